"""The maintenance loop (DESIGN §7): what keeps the queue honest between wakes.

Each pass, in order: runs whose lease expired (their process died) go back to ``queued``;
task checkouts left behind by runs that are no longer live are released; due scheduled
retries are promoted to ``queued`` (or cancelled when their task moved on); and, once some
workspace has adopted Office, the recovery sweep re-dispatches assigned Office tasks whose
``task_assigned`` wake was lost.

With several processes on PostgreSQL only the holder of the maintenance leader's lease
(:class:`~office_scheduler.store.leadership.Leadership`, renewed by
:class:`~office_scheduler.scheduler.leader.LeaderLoop`) runs these passes. A pass checks the
holder's own deadline before it starts and again before every write, and each write runs in
a transaction that first checks the pass's :class:`~office_scheduler.store.leader_lease.LeaderTerm`
with the lease row locked (:func:`~office_scheduler.store.leader_lease.check_term`): a leader
that wakes after a freeze, when another node took the lease, has its writes refused
(:class:`~office_scheduler.store.leader_lease.LeaderFenced`) and stops. Wakes the sweep and
the re-drive send go through intake under deterministic idempotency keys, so a stale
duplicate of one of them is deduplicated rather than fenced.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import ParamSpec, TypeVar

import structlog

from office_scheduler.clock import Clock
from office_scheduler.config import Settings
from office_scheduler.domain.errors import OfficeError
from office_scheduler.domain.events import Event, RunEnded
from office_scheduler.domain.models import Run, WakeRequest
from office_scheduler.domain.status import IntakeOutcome, WakeSource
from office_scheduler.office.redrive import redrive_decisions
from office_scheduler.pipeline.context import Enqueue
from office_scheduler.pipeline.retries import stale_retry_reason
from office_scheduler.scheduler.loop import OwnedLoop
from office_scheduler.scheduler.orphans import kill_orphans
from office_scheduler.store.facade import Store
from office_scheduler.store.leader_lease import LeaderFenced, LeaderTerm, check_term
from office_scheduler.store.leadership import Leadership
from office_scheduler.store.recovery import RECOVERY_KEY_MARKER, RecoveryCandidate, assigned_key

log = structlog.get_logger(__name__)

Publish = Callable[[Event], Awaitable[None]]
P = ParamSpec("P")
T = TypeVar("T")
#: Shortest pause between two passes when a retry falls due sooner than the interval.
MIN_PAUSE_S = 1.0


async def _ignore(_event: Event) -> None:
    return None


def _no_poke() -> None:
    return None


class LeadershipLost(Exception):
    """This process stopped acting as leader in the middle of a pass (the pass ends)."""


def recovery_key(candidate: RecoveryCandidate) -> str:
    """The idempotency key of a recovery dispatch.

    A lost wake is re-delivered under its own creation key ``task_assigned:<task>:<agent>``,
    so a late original and the sweep dedupe into one wake. When that key exists (the wake
    arrived, and every run it made failed or was cancelled), re-dispatch number *n* uses
    ``task_assigned:<task>:<agent>:recovery:<n>``: deterministic, so concurrent sweeps
    dispatch once.
    """
    key = assigned_key(candidate.task_id, candidate.agent_id)
    if not candidate.assigned_key_used:
        return key
    return f"{key}{RECOVERY_KEY_MARKER}{candidate.redispatches + 1}"


class MaintenanceLoop(OwnedLoop):
    """Runs :meth:`tick` every ``settings.maintenance_interval`` (sooner for a due retry).

    Args:
        alive: returns the runs this process is executing; their leases are never
            recovered here even when the wall clock jumped past them.
        enqueue: intake, for recovery dispatches; without it the sweep does nothing.
        publish: receives :class:`RunEnded` for scheduled retries cancelled here.
        poke: wakes the runs loop after retries were promoted.
        leadership: when given, a pass runs only while this process holds it, and its
            writes are fenced by the pass's term; without it every pass runs unfenced
            (one process, or tests).
    """

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        settings: Settings,
        alive: Callable[[], Sequence[int]] = list,
        enqueue: Enqueue | None = None,
        publish: Publish = _ignore,
        poke: Callable[[], None] = _no_poke,
        leadership: Leadership | None = None,
    ) -> None:
        self._alive = alive
        self._leadership = leadership
        self._store = store
        self._clock = clock
        self._settings = settings
        self._enqueue = enqueue
        self._publish = publish
        self._poke_runs = poke
        #: The term of the pass in progress (``None`` outside a leader's pass).
        self._term: LeaderTerm | None = None
        super().__init__(name="maintenance-loop")

    def _fence(self) -> LeaderTerm | None:
        """The term to fence the next write with; raises once this process stopped leading.

        Outside a pass started by :meth:`run_pass` (drain mode, tests) and on SQLite
        nothing is checked and ``None`` comes back.

        Raises:
            LeadershipLost: the pass's leadership ended (own deadline passed, or dropped).
        """
        pass_term, leadership = self._term, self._leadership
        if pass_term is None or leadership is None:
            return None
        term = leadership.term()
        if term != pass_term:
            raise LeadershipLost(f"leadership of epoch {pass_term.epoch} ended during the pass")
        return term if leadership.uses_lease else None

    async def _write(self, write: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run the store call ``write`` in a worker thread, fenced by the pass's term."""
        term = self._fence()
        call = functools.partial(write, *args, **kwargs)
        if term is None:
            return await asyncio.to_thread(call)
        return await asyncio.to_thread(self._fenced_call, term, call)

    def _fenced_call(self, term: LeaderTerm, call: Callable[[], T]) -> T:
        with self._store.db.transaction() as conn:
            check_term(conn, term)
            return call()

    async def tick(self) -> list[int]:
        """One maintenance pass; returns the ids of runs whose expired lease was recovered."""
        await self.correct_queue_heads()
        recovered = await self.recover_stale_claims()
        await self.reap_leaked_checkouts()
        await self.promote_due_retries()
        await self.recovery_sweep()
        self._fence()
        await redrive_decisions(self._store, self._clock, self._publish, self._enqueue)
        return recovered

    async def correct_queue_heads(self) -> int:
        """Correct agents' queue heads that are later than their queued runs (a safety net).

        Returns:
            How many heads were late; each is logged, since the store keeps them right.
        """
        late = await self._write(self._store.queue.reconcile_heads)
        if late:
            log.warning("queue_heads_corrected", agents=late)
            self._poke_runs()
        return late

    async def recover_stale_claims(self) -> list[int]:
        """Put claimed/running runs whose lease expired back to ``queued`` (not a failure).

        Their agent processes still running on this machine (a scheduler process killed
        with SIGKILL leaves its sessions behind) are killed first, so a run's next
        session never overlaps the last one (see :mod:`~office_scheduler.scheduler.orphans`).
        """
        recovered = await self._write(
            self._store.queue.recover_expired_leases,
            now=self._clock.now(),
            alive=self._alive(),
            before_requeue=kill_orphans,
        )
        if recovered:
            log.warning("stale_claims_recovered", run_ids=recovered)
            self._poke_runs()
        return recovered

    async def reap_leaked_checkouts(self) -> list[str]:
        """Release task checkouts whose holding run is not live; returns the task ids."""
        task_ids = await self._write(self._store.queue.reap_leaked_checkouts)
        if task_ids:
            log.warning("leaked_checkouts_released", task_ids=task_ids)
        return task_ids

    async def promote_due_retries(self) -> list[int]:
        """Queue every due scheduled retry whose task is still the agent's; cancel the rest.

        Returns:
            The ids of the runs put back to ``queued``.
        """
        queue = self._store.queue
        now = self._clock.now()
        promoted: list[int] = []
        for run in await asyncio.to_thread(queue.due_retries, now=now):
            task = None
            if run.task_id is not None:
                task = await asyncio.to_thread(self._store.office.find_task, run.task_id)
            reason = stale_retry_reason(run, task)
            if reason is not None:
                cancelled = await self._write(queue.cancel_retry, run.id, reason=reason, now=now)
                if cancelled is not None:
                    await self._retry_cancelled(cancelled)
                continue
            queued = await self._write(queue.promote_retry, run.id, now=now)
            if queued is None:
                continue
            promoted.append(queued.id)
            await self._write(
                self._store.runlog.add_run_event,
                queued.id,
                kind="retry_promoted",
                message=f"retry {queued.retry_count} queued",
                data={"retry_count": queued.retry_count},
                now=now,
            )
        if promoted:
            log.info("retries_promoted", run_ids=promoted)
            self._poke_runs()
        return promoted

    async def _retry_cancelled(self, run: Run) -> None:
        assert run.reason is not None
        await self._write(
            self._store.runlog.add_run_event,
            run.id,
            kind="run_cancelled",
            message=run.reason.value,
            data={"reason": run.reason.value},
            now=self._clock.now(),
        )
        log.info(
            "retry_cancelled",
            run_id=run.id,
            agent_id=run.agent_id,
            task_id=run.task_id,
            reason=run.reason.value,
        )
        await self._write(self._store.runlog.log_run_skip, run, now=self._clock.now())
        await self._publish(RunEnded(run=run))

    async def recovery_sweep(self) -> int:
        """Re-dispatch assigned Office tasks whose ``task_assigned`` wake was lost.

        Nothing is scanned while no workspace has adopted Office (has an agent). Each
        dispatch goes through intake and is logged as activity ``recovery_dispatch``; every
        workspace that had candidates gets one ``recovery_sweep_complete`` entry with its
        ``dispatched_count``. Agents a blocking budget stopped this period are skipped.

        Returns:
            How many tasks were dispatched.
        """
        if self._enqueue is None:
            return 0
        queue = self._store.queue
        if not await asyncio.to_thread(queue.office_adopted):
            return 0
        now = self._clock.now()
        candidates = await asyncio.to_thread(
            queue.recovery_candidates,
            now=now,
            limit=self._settings.recovery_batch_size,
            max_redispatches=self._settings.recovery_max_redispatches,
        )
        considered = Counter(candidate.workspace_id for candidate in candidates)
        dispatched: Counter[str] = Counter()
        for candidate in candidates:
            self._fence()  # a long sweep stops as soon as this process stops leading
            if await self._dispatch(candidate, self._enqueue):
                dispatched[candidate.workspace_id] += 1
        for workspace_id, count in considered.items():
            await self._write(
                self._store.runlog.add_activity,
                workspace_id=workspace_id,
                kind="recovery_sweep_complete",
                message=f"recovery sweep dispatched {dispatched[workspace_id]} task(s)",
                now=self._clock.now(),
                data={"dispatched_count": dispatched[workspace_id], "candidates": count},
            )
        total = sum(dispatched.values())
        log.info("recovery_sweep_complete", dispatched_count=total, candidates=len(candidates))
        return total

    async def _dispatch(self, candidate: RecoveryCandidate, enqueue: Enqueue) -> bool:
        key = recovery_key(candidate)
        try:
            result = await enqueue(
                WakeRequest(
                    workspace_id=candidate.workspace_id,
                    agent_id=candidate.agent_id,
                    source=WakeSource.TASK_ASSIGNED,
                    payload={"task_id": candidate.task_id, "recovery": True},
                    task_id=candidate.task_id,
                    idempotency_key=key,
                )
            )
        except OfficeError:
            log.exception("recovery_dispatch_failed", task_id=candidate.task_id, key=key)
            return False
        if result.outcome is IntakeOutcome.DEDUPLICATED:
            return False
        await self._write(
            self._store.runlog.add_activity,
            workspace_id=candidate.workspace_id,
            kind="recovery_dispatch",
            message=(
                f"task {candidate.task_id} re-dispatched to its assignee "
                + (
                    "(its earlier runs failed or were cancelled)"
                    if candidate.assigned_key_used
                    else "(its task_assigned wake was lost)"
                )
            ),
            now=self._clock.now(),
            agent_id=candidate.agent_id,
            task_id=candidate.task_id,
            run_id=result.run.id if result.run else None,
            data={"idempotency_key": key, "wakeup_id": result.request.id},
        )
        log.info(
            "recovery_dispatch",
            task_id=candidate.task_id,
            agent_id=candidate.agent_id,
            idempotency_key=key,
        )
        return True

    @property
    def leader(self) -> bool:
        """Whether this process may act as maintenance leader now."""
        return self._leadership is None or self._leadership.held

    async def run_pass(self) -> float:
        """One :meth:`tick` when leading; rest ``maintenance_interval`` or until a retry is due.

        A process that does not lead does nothing (the leader loop takes the lease when it
        is free and pokes this loop). The holder checks its own deadline before the pass
        and before each write of it; a pass whose leadership ends, or whose write is
        refused by the epoch fence, stops where it is.
        """
        pause = self._settings.maintenance_interval.total_seconds()
        if self._leadership is not None:
            term = self._leadership.term()
            if term is None:
                return pause
            self._term = term
        try:
            await self.tick()
        except LeadershipLost as exc:
            log.warning("maintenance_pass_stopped", reason=str(exc))
            return pause
        except LeaderFenced as exc:
            if self._leadership is not None:
                self._leadership.fenced(str(exc))
            log.warning("maintenance_pass_fenced", reason=str(exc))
            return pause
        finally:
            self._term = None
        due = await asyncio.to_thread(self._store.queue.next_retry_at)
        if due is not None:
            until_due = (due - self._clock.now()).total_seconds()
            pause = min(pause, max(until_due, MIN_PAUSE_S))
        return pause
