"""Budgets in the pipeline: the pre-launch check (DESIGN §6 step 7) and cost recording.

The check runs between ``checkout`` and ``build_context``: workspace → project → agent
policies (specification "Pre-execution budget check"). The first exceeded policy whose action
blocks ends the run ``finished`` with reason ``budget_exceeded``; for ``pause_agent`` the
agent is paused first (its other queued runs end the same way). So does a blocking policy
that spend so far plus the run's expected cost would take over its limit (the projection;
nothing is paused then). ``notify`` never stops a run.

:func:`record_cost` is called from the launch step when a session ends: it stores the cost
event and fires the alerts and exceed actions the new spend calls for. A failure there is
logged and never changes how the run ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from office_scheduler.budgets.service import BudgetService
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.status import RunReason, RunStatus
from office_scheduler.pipeline.context import RunContext

log = structlog.get_logger(__name__)

Next = Callable[[], Awaitable[None]]


def budget_service(ctx: RunContext) -> BudgetService:
    """A :class:`BudgetService` over the pipeline's store, clock, intake and bus."""
    deps = ctx.deps
    return BudgetService(deps.store, deps.clock, enqueue=deps.enqueue, publish=deps.publish)


def _project_id(ctx: RunContext) -> str | None:
    return ctx.task.project_id if ctx.task is not None else None


async def budget_check(ctx: RunContext, call_next: Next) -> None:
    """Stop the run before launch when a blocking budget of its scopes is exceeded."""
    assert ctx.agent is not None
    block = await budget_service(ctx).check_before_launch(
        ctx.agent, project_id=_project_id(ctx), run_id=ctx.run.id, policies=ctx.budget_policies
    )
    if block is not None:
        policy = block.policy
        projected = block.expected_subcents is not None
        expected_pct = policy.percent_of(block.expected_subcents or 0)
        why = f" + this run's expected {expected_pct}% would exceed it" if projected else ""
        await ctx.event(
            "budget_exceeded",
            f"{policy.scope_kind.value} budget at {block.budget_pct}%{why}: "
            f"{policy.action_on_exceed.value}",
            policy_id=policy.id,
            scope_kind=policy.scope_kind.value,
            scope_id=policy.scope_id,
            period=block.period,
            budget_pct=block.budget_pct,
            action_on_exceed=policy.action_on_exceed.value,
            projected=projected,
            expected_run_cents=(block.expected_subcents or 0) / 100 if projected else None,
        )
        await ctx.end(RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)
        return
    await call_next()


async def record_cost(ctx: RunContext, outcome: Outcome) -> None:
    """Record the session's usage as a cost event and apply the budget rules to it."""
    try:
        await budget_service(ctx).record_run_cost(ctx.run, outcome, project_id=_project_id(ctx))
    except Exception:
        log.exception("budget_cost_recording_failed", run_id=ctx.run.id)
