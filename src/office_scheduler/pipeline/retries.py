"""What happens after an agent session fails (DESIGN §6, "Failures go to ``retry.py``").

A failure whose error family is ``config`` fails the run at once (retrying cannot fix it) with
an inbox item. Any other failure goes through :func:`office_scheduler.retry.plan_retry` with
the run's failure count: the run waits in ``scheduled_retry`` until the parsed rate-limit
reset plus 30 s or the jittered backoff, and the ``max_run_failures``-th failure escalates
instead: the run fails (``retries_exhausted``), people get an ``agent.error`` inbox item, and
the workspace's coordinator an ``agent_error`` wake (never the failing coordinator itself).
An agent whose runs escalate ``pause_after_escalations`` times in a row is paused.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import asdict
from datetime import datetime
from typing import Any

import structlog

from office_scheduler.domain.errors import OfficeError
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.models import Run, Task, WakeRequest
from office_scheduler.domain.status import (
    AgentStatus,
    ErrorFamily,
    InboxKind,
    OutcomeStatus,
    RunReason,
    RunStatus,
    WakeSource,
)
from office_scheduler.pipeline.context import RunContext
from office_scheduler.retry import (
    JITTER,
    RESET_MARGIN,
    RetrySource,
    classify_error,
    plan_retry,
)

log = structlog.get_logger(__name__)

#: Longest error text carried in an ``agent_error`` wake's payload.
MAX_PAYLOAD_ERROR_CHARS = 4000


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


def _clip(text: str) -> str:
    if len(text) <= MAX_PAYLOAD_ERROR_CHARS:
        return text
    return text[: MAX_PAYLOAD_ERROR_CHARS - 1] + "…"


async def record_failure(ctx: RunContext, outcome: Outcome) -> None:
    """Fail, retry later or escalate a run whose session ended without success.

    A session the executor reports ``cancelled`` ends the run ``cancelled`` (no retry).
    """
    message = outcome.message or "agent session failed"
    reason = outcome.reason if outcome.reason is not RunReason.COMPLETED else RunReason.AGENT_FAILED
    family = outcome.error_family or classify_error(message)
    details: dict[str, Any] = {
        "result": outcome.result,
        "usage": asdict(outcome.usage),
        "exit_code": outcome.exit_code,
    }
    if outcome.status is OutcomeStatus.CANCELLED:
        # The session was stopped on purpose: neither a failure nor something to retry.
        if reason is RunReason.AGENT_FAILED:
            reason = RunReason.CANCELLED_BY_USER
        await ctx.end(RunStatus.CANCELLED, reason, error=message, **details)
        return
    if ctx.deps.metrics is not None:  # metrics hook: a failed session
        ctx.deps.metrics.failure(family)
    if family is ErrorFamily.CONFIG:
        await _config_failure(ctx, message, details)
        return
    settings = ctx.deps.settings
    now = ctx.deps.clock.now()
    failures = ctx.run.retry_count + 1
    plan = plan_retry(message, failures, now, max_failures=settings.max_run_failures)
    if plan.escalate:
        await ctx.end(RunStatus.FAILED, RunReason.RETRIES_EXHAUSTED, error=message, **details)
        if ctx.ended is not None:
            await escalate(ctx, ctx.ended, message, failures)
        return
    assert plan.retry_at is not None
    assert plan.source is not None
    retry_at, source, reset_at = plan.retry_at, plan.source, plan.parsed_reset_at
    table = settings.retry_backoff
    if source == "backoff" and table:
        # A tuned backoff table (e.g. seconds in a test deployment), same ±25 % jitter.
        base = table[min(failures, len(table)) - 1]
        retry_at = now + base * random.uniform(1 - JITTER, 1 + JITTER)
    told = outcome.retry_not_before
    if source == "backoff" and told is not None and told + RESET_MARGIN > now:
        # The executor itself read the reset (e.g. from structured output): trust it.
        retry_at, source, reset_at = told + RESET_MARGIN, "rate_limit_parsed", told
    parked = await ctx.schedule_retry(retry_at, reason, error=message, **details)
    if parked is not None:
        if ctx.deps.metrics is not None:  # metrics hook: a retry scheduled
            ctx.deps.metrics.retry_scheduled()
        await _log_retry(ctx, parked, family, source, reset_at, failures)


async def _log_retry(
    ctx: RunContext,
    run: Run,
    family: ErrorFamily,
    source: RetrySource,
    reset_at: datetime | None,
    failures: int,
) -> None:
    delay_s = (run.not_before - ctx.deps.clock.now()).total_seconds()
    fields: dict[str, Any] = {
        "retry_at": _iso(run.not_before),
        "delay_s": round(delay_s, 3),
        "source": source,
        "parsed_reset_at": _iso(reset_at),
        "failures": failures,
        "error_family": family.value,
    }
    await ctx.event(
        "retry_scheduled",
        f"failure {failures} of {ctx.deps.settings.max_run_failures}: retry at "
        f"{fields['retry_at']} ({source})",
        **fields,
    )
    log.warning(
        "run_retry_scheduled",
        run_id=run.id,
        agent_id=run.agent_id,
        task_id=run.task_id,
        reason=run.reason.value if run.reason else None,
        retry_count=run.retry_count,
        **fields,
    )


async def _config_failure(ctx: RunContext, message: str, details: dict[str, Any]) -> None:
    await ctx.end(RunStatus.FAILED, RunReason.CONFIG_ERROR, error=message, **details)
    if ctx.ended is None:
        return
    name = ctx.agent.name if ctx.agent else ctx.run.agent_id
    await asyncio.to_thread(
        ctx.deps.store.runlog.add_inbox_item,
        workspace_id=ctx.run.workspace_id,
        kind=InboxKind.AGENT_ERROR,
        title=f"Run {ctx.run.id} of {name} failed: configuration error",
        body=f"{message}\n\nRetrying cannot fix this; check the executor's settings.",
        data={
            "run_id": ctx.run.id,
            "agent_id": ctx.run.agent_id,
            "task_id": ctx.run.task_id,
            "error_family": ErrorFamily.CONFIG.value,
        },
        now=ctx.deps.clock.now(),
        agent_id=ctx.run.agent_id,
        task_id=ctx.run.task_id,
    )


async def escalate(ctx: RunContext, run: Run, error: str, failures: int) -> None:
    """Tell people (inbox) and the coordinator (``agent_error`` wake) that a run gave up."""
    deps = ctx.deps
    if deps.metrics is not None:  # metrics hook: an escalation
        deps.metrics.escalated()
    name = ctx.agent.name if ctx.agent else run.agent_id
    session_id = ctx.session.id if ctx.session is not None else run.session_id
    payload: dict[str, Any] = {"failed_agent_id": run.agent_id}
    if session_id is not None:
        payload["failed_session_id"] = session_id
    payload.update(run_id=run.id, error=_clip(error))
    await asyncio.to_thread(
        deps.store.runlog.add_inbox_item,
        workspace_id=run.workspace_id,
        kind=InboxKind.AGENT_ERROR,
        title=f"{name} failed {failures} times in a row on run {run.id}",
        body=error,
        data={**payload, "task_id": run.task_id},
        now=deps.clock.now(),
        agent_id=run.agent_id,
        task_id=run.task_id,
    )
    coordinator = await asyncio.to_thread(deps.store.queue.coordinator_of, run.workspace_id)
    woken: str | None = None
    if coordinator is not None and coordinator.id != run.agent_id and deps.enqueue is not None:
        try:
            await deps.enqueue(
                WakeRequest(
                    workspace_id=run.workspace_id,
                    agent_id=coordinator.id,
                    source=WakeSource.AGENT_ERROR,
                    payload=payload,
                    idempotency_key=f"agent_error:{run.id}",
                    hold=False,
                    # The failed run is the cause: a coordinator re-creating work that
                    # keeps failing is a chain the runaway limits see (DESIGN §15).
                    caused_by_run_id=run.id,
                )
            )
            woken = coordinator.id
        except OfficeError:
            # The inbox item stands; a vanished coordinator must not hide the escalation.
            log.exception("agent_error_wake_failed", run_id=run.id, coordinator_id=coordinator.id)
    log.error(
        "run_escalated",
        run_id=run.id,
        agent_id=run.agent_id,
        task_id=run.task_id,
        failures=failures,
        coordinator_id=woken,
        self_escalation=coordinator is not None and coordinator.id == run.agent_id,
    )
    await _pause_if_failing(ctx, run)


async def _pause_if_failing(ctx: RunContext, run: Run) -> None:
    """Pause the agent when its last ``pause_after_escalations`` runs all escalated."""
    deps = ctx.deps
    threshold = deps.settings.pause_after_escalations
    if threshold <= 0:
        return
    streak = await asyncio.to_thread(deps.store.queue.escalation_streak, run.agent_id)
    if streak < threshold:
        return
    agent = await asyncio.to_thread(deps.store.office.get_agent, run.agent_id)
    if agent.status in (AgentStatus.PAUSED, AgentStatus.STOPPED):
        return
    now = deps.clock.now()
    await asyncio.to_thread(
        deps.store.office.update_agent,
        agent.id,
        now=now,
        status=AgentStatus.PAUSED,
        paused_reason="escalations",
    )
    why = (
        f"{streak} runs of {agent.name} in a row failed {deps.settings.max_run_failures} times "
        "and were escalated, so the agent was paused. Resume it once the cause is fixed."
    )
    data = {"agent_id": agent.id, "escalations": streak, "last_run_id": run.id}
    await asyncio.to_thread(
        deps.store.runlog.add_inbox_item,
        workspace_id=run.workspace_id,
        kind=InboxKind.AGENT_PAUSED,
        title=f"{agent.name} was paused after {streak} escalations in a row",
        body=why,
        data=data,
        now=now,
        agent_id=agent.id,
    )
    await asyncio.to_thread(
        deps.store.runlog.add_activity,
        workspace_id=run.workspace_id,
        kind="agent_paused",
        message=why,
        now=now,
        agent_id=agent.id,
        run_id=run.id,
        data=data,
    )
    log.warning("agent_paused_after_escalations", agent_id=agent.id, escalations=streak)


def stale_retry_reason(run: Run, task: Task | None, *, reviewer: bool) -> RunReason | None:
    """Why a due scheduled retry must be cancelled instead of promoted, or ``None``.

    ``retry_task_cancelled``: the task vanished, ended (done, cancelled) or was archived.
    ``retry_stale_assignee``: the task now belongs to another agent (for a review wake: the
    agent is no longer a reviewer). Explicit ``queue_run`` runs may be for any agent.
    ``reviewer``: whether the run carries a review-stage wake
    (:attr:`~office_scheduler.domain.models.RunWakes.reviewer`).
    """
    if run.task_id is None:
        return None
    if task is None or task.state.is_terminal or task.archived_at is not None:
        return RunReason.RETRY_TASK_CANCELLED
    if reviewer:
        if run.agent_id not in task.reviewers:
            return RunReason.RETRY_STALE_ASSIGNEE
    elif run.source is not WakeSource.QUEUE_RUN and task.assignee_agent_id != run.agent_id:
        return RunReason.RETRY_STALE_ASSIGNEE
    return None
