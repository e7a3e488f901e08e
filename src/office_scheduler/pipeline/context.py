"""The state one run carries through the pipeline, and how steps are composed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import structlog

from office_scheduler.auth import TokenService
from office_scheduler.clock import Clock
from office_scheduler.config import Settings
from office_scheduler.domain.budgets import BudgetPolicy
from office_scheduler.domain.events import Event, RunEnded
from office_scheduler.domain.models import (
    Agent,
    AgentSession,
    ExecutorConfig,
    Project,
    Run,
    RunWakes,
    Task,
    WakeRequest,
    Workspace,
)
from office_scheduler.domain.status import RunReason, RunStatus
from office_scheduler.executors.base import Executor
from office_scheduler.metrics import Metrics
from office_scheduler.pipeline.storable import clean_json, short_error
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.reconnect import retry_once_if_connection_lost
from office_scheduler.store.runlog import RunEventRow

log = structlog.get_logger(__name__)

T = TypeVar("T")

Publish = Callable[[Event], Awaitable[None]]
Enqueue = Callable[[WakeRequest], Awaitable[IntakeResult]]


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineDeps:
    """What every step may use.

    Attributes:
        enqueue: intake, for the wakes a run sends on its way out (the ``agent_error``
            escalation to the coordinator); without it no such wake is sent.
        metrics: the service's Prometheus metrics (failures, retries, escalations);
            ``None`` counts nothing.
    """

    store: Store
    clock: Clock
    settings: Settings
    publish: Publish
    executors: Mapping[str, Executor]
    tokens: TokenService
    enqueue: Enqueue | None = None
    metrics: Metrics | None = None


@dataclass(kw_only=True, slots=True)
class RunContext:
    """One claimed run on its way through the steps; steps fill in what they learn.

    Attributes:
        budget_policies: the budget policies of the run's scopes in check order, read by
            ``load`` with the run's subjects for ``budget_check`` (``None``: not read yet).
        actionable_tasks: the agent's actionable tasks, counted by ``load`` for a wake
            ``idle_skip`` may skip (``None``: not counted).
        wakes: the bounded view of the wakes merged into the run, read by ``load`` and
            again with each rebuilt prompt (``None``: not read yet).
    """

    run: Run
    deps: PipelineDeps
    agent: Agent | None = None
    workspace: Workspace | None = None
    task: Task | None = None
    project: Project | None = None
    budget_policies: list[BudgetPolicy] | None = None
    actionable_tasks: int | None = None
    wakes: RunWakes | None = None
    prompt: str | None = None
    prompt_version: int = 0
    executor_config: ExecutorConfig | None = None
    session: AgentSession | None = None
    ended: Run | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    pending_events: list[RunEventRow] = field(default_factory=list)

    async def event(self, kind: str, message: str = "", **data: Any) -> None:
        """Append a line to the run's event log (written at the next :meth:`flush_events`).

        Decisions are buffered and written together, in the transactions that start the
        session, end or park the run, or when the pipeline returns: no transaction of
        their own on the usual path. ``at`` is the instant of the decision.
        """
        self.pending_events.append((self.run.id, kind, message, data, self.deps.clock.now()))

    async def flush_events(self) -> None:
        """Write the buffered decisions in one transaction (no-op when there are none)."""
        if not self.pending_events:
            return
        events, self.pending_events = self.pending_events, []
        await asyncio.to_thread(self.deps.store.runlog.add_run_events, events)

    async def end(
        self,
        status: RunStatus,
        reason: RunReason,
        *,
        error: str | None = None,
        result: Mapping[str, Any] | None = None,
        usage: Mapping[str, Any] | None = None,
        exit_code: int | None = None,
        then: AfterEnd | None = None,
    ) -> None:
        """End the run (terminal status + reason), log the decision and publish it.

        One transaction (:meth:`Database.transaction`) writes the end, the buffered
        decisions, the ``run_<status>`` event, a guard's skip in the activity log and
        whatever ``then`` writes: one commit instead of four. ``then`` runs only when this
        attempt ended the run; an exception from it rolls the end back, so a follow-up
        that must never undo the end guards itself (a savepoint, as
        :func:`~office_scheduler.pipeline.summary.summary_after_end` does). ``error`` and
        ``result`` are made storable first (no NUL, no SQL text:
        :func:`~office_scheduler.pipeline.storable.short_error`).
        """
        error = short_error(error)
        result = clean_json(result) if result is not None else None
        ending = _Ending(status, reason, self.deps.clock.now(), error, result, usage, exit_code)
        ended = await self.with_decisions(
            lambda events, retry: self._finish(events, ending, then, retry=retry)
        )
        if ended is None:
            return
        self.ended = ended
        log.info(
            "run_ended",
            run_id=self.run.id,
            agent_id=self.run.agent_id,
            status=status.value,
            reason=reason.value,
            error=error,
        )
        sources = self.wakes.sources if self.wakes is not None else None
        await self.deps.publish(RunEnded(run=ended, wake_sources=sources))

    async def with_decisions(
        self, write: Callable[[list[RunEventRow], bool], T | None]
    ) -> T | None:
        """Run ``write`` in a worker thread, handing it the buffered decisions.

        ``write`` gets the decisions and must commit them with its own change when it
        returns a value; when it returns ``None`` (its change did not apply) or raises,
        they go back to the buffer. The hand-over happens here, on the event loop, so a
        cancelled pipeline whose thread still commits never writes them a second time.
        A lost connection retries ``write`` whole (:mod:`office_scheduler.store.reconnect`);
        its second argument says whether this is such a retry, after which a change that
        no longer applies may be one the lost attempt committed.
        """
        events, self.pending_events = self.pending_events, []
        try:
            done = await asyncio.to_thread(
                retry_once_if_connection_lost,
                lambda retry: write(events, retry),
                call=getattr(write, "__qualname__", ""),
            )
        except asyncio.CancelledError:
            raise  # the thread may still commit them: never hand them out twice
        except BaseException:
            self.pending_events = events + self.pending_events
            raise
        if done is None:
            self.pending_events = events + self.pending_events
        return done

    def _finish(
        self,
        events: list[RunEventRow],
        ending: _Ending,
        then: AfterEnd | None,
        *,
        retry: bool,
    ) -> Run | None:
        """The transaction of :meth:`end` (blocking): the run as ended, or ``None``."""
        store = self.deps.store
        with store.db.transaction():
            ended = store.queue.finish_run(
                self.run.id,
                status=ending.status,
                reason=ending.reason,
                now=ending.now,
                error=ending.error,
                result=ending.result,
                usage=ending.usage,
                exit_code=ending.exit_code,
                node_id=self.deps.settings.node_id,
                seen_version=self.prompt_version or self.run.context_version,
                claimed_at=self.run.claimed_at,
            )
            if ended is None:
                if not retry:
                    return None
                # A retry after a commit whose acknowledgement was lost: that commit
                # ended the run (and wrote the decisions) if the run carries our end.
                current = store.queue.get_run(self.run.id)
                ours = current.status is ending.status and current.finished_at == ending.now
                return current if ours else None
            reason = ending.reason.value
            kind, message = f"run_{ending.status.value}", ending.error or reason
            events = [*events, (self.run.id, kind, message, {"reason": reason}, ending.now)]
            if then is not None:
                events += then(ended)
            store.runlog.add_run_events(events)
            # Skips and cancels by a guard go to the activity log (one place for all).
            wakeup_ids = [e.request_id for e in self.wakes.entries] if self.wakes else None
            store.runlog.log_run_skip(ended, now=ending.now, wakeup_ids=wakeup_ids)
        return ended

    async def schedule_retry(
        self,
        retry_at: datetime,
        reason: RunReason,
        *,
        error: str,
        result: Mapping[str, Any] | None = None,
        usage: Mapping[str, Any] | None = None,
        exit_code: int | None = None,
    ) -> Run | None:
        """Park the failed run in ``scheduled_retry`` until ``retry_at`` (not an end).

        The buffered decisions are written in the same transaction.

        Returns:
            The run as parked, or ``None`` when this attempt no longer owned it.
        """
        error = short_error(error) or ""
        result = clean_json(result) if result is not None else None
        now = self.deps.clock.now()

        def park(events: list[RunEventRow], retry: bool) -> Run | None:
            store = self.deps.store
            with store.db.transaction():
                parked = store.queue.schedule_retry(
                    self.run.id,
                    retry_at=retry_at,
                    reason=reason,
                    error=error,
                    now=now,
                    result=result,
                    usage=usage,
                    exit_code=exit_code,
                    node_id=self.deps.settings.node_id,
                    claimed_at=self.run.claimed_at,
                )
                if parked is None:
                    if not retry:
                        return None
                    # A retry after a lost commit acknowledgement (see _finish).
                    current = store.queue.get_run(self.run.id)
                    waiting = current.status is RunStatus.SCHEDULED_RETRY
                    return current if waiting and current.not_before == retry_at else None
                if events:
                    store.runlog.add_run_events(events)
            return parked

        parked = await self.with_decisions(park)
        if parked is not None:
            self.ended = parked
        return parked


Step = Callable[[RunContext, Callable[[], Awaitable[None]]], Awaitable[None]]
#: Work done inside the transaction that ends a run, given the ended run (blocking, in the
#: store's pinned transaction); it returns the run events to record with the end.
AfterEnd = Callable[[Run], list[RunEventRow]]


@dataclass(frozen=True, slots=True)
class _Ending:
    status: RunStatus
    reason: RunReason
    now: datetime
    error: str | None
    result: Mapping[str, Any] | None
    usage: Mapping[str, Any] | None
    exit_code: int | None


def compose(steps: Sequence[Step]) -> Callable[[RunContext], Awaitable[None]]:
    """Chain ``steps`` first to last; a step ends the chain by not calling ``call_next``."""

    async def run(ctx: RunContext) -> None:
        async def call(index: int) -> None:
            if index < len(steps) and ctx.ended is None:
                await steps[index](ctx, lambda: call(index + 1))

        await call(0)

    return run
