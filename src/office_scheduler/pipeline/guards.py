"""Steps that decide whether a claimed run should launch at all (DESIGN §6 steps 2-6)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from office_scheduler.domain.models import Agent, Run
from office_scheduler.domain.status import (
    AgentStatus,
    Classification,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
)
from office_scheduler.pipeline.context import AfterEnd, RunContext
from office_scheduler.pipeline.prompting import forget_read_ahead, read_ahead
from office_scheduler.store.runlog import RunEventRow

log = structlog.get_logger(__name__)

Next = Callable[[], Awaitable[None]]


def _read_subjects(ctx: RunContext) -> None:
    store = ctx.deps.store
    office = store.office
    with store.db.snapshot():
        ctx.agent = office.get_agent(ctx.run.agent_id)
        ctx.workspace = office.get_workspace(ctx.run.workspace_id)
        if ctx.run.task_id is not None:
            ctx.task = office.find_task(ctx.run.task_id)
            if ctx.task is not None and ctx.task.project_id is not None:
                ctx.project = office.get_project(ctx.task.project_id)
        if _may_idle_skip(ctx.run, ctx.agent):
            ctx.actionable_tasks = office.count_actionable_tasks(ctx.agent.id)
        ctx.budget_policies = store.budgets.applicable_policies(
            ctx.agent.workspace_id,
            project_id=ctx.task.project_id if ctx.task is not None else None,
            agent_id=ctx.agent.id,
        )
        if ctx.run.task_id is None or ctx.task is not None:  # else staleness cancels it
            read_ahead(ctx)


def _may_idle_skip(run: Run, agent: Agent) -> bool:
    """Whether ``idle_skip`` looks at the agent's actionable tasks for ``run``."""
    return run.classification is Classification.PERIODIC and agent.skip_idle_wakeups


async def load(ctx: RunContext, call_next: Next) -> None:
    """Read the run's agent, workspace, task, project and budget policies for the later steps.

    For a wake ``idle_skip`` may skip, the agent's actionable tasks are counted too.

    The material of the run's prompt is read with them
    (:func:`~office_scheduler.pipeline.prompting.read_ahead`): one thread hop and one read
    connection (:meth:`Database.snapshot`) for all the reads before the launch.
    """
    await asyncio.to_thread(_read_subjects, ctx)
    # The ``claimed`` event is written by the claim transaction itself (store/queue.py).
    await call_next()


async def agent_guard(ctx: RunContext, call_next: Next) -> None:
    """A paused or stopped agent's run finishes without action.

    Reason ``budget_exceeded`` when a budget paused the agent, ``agent_paused`` otherwise.
    """
    assert ctx.agent is not None
    if ctx.agent.status in (AgentStatus.PAUSED, AgentStatus.STOPPED):
        by_budget = ctx.agent.paused_reason == RunReason.BUDGET_EXCEEDED.value
        reason = RunReason.BUDGET_EXCEEDED if by_budget else RunReason.AGENT_PAUSED
        await ctx.end(RunStatus.FINISHED, reason)
        return
    await call_next()


def is_review_wake(run: Run) -> bool:
    """Whether ``run`` carries a review-stage wake (its agent works as a reviewer)."""
    return any(entry.payload.get("role") == "reviewer" for entry in run.context)


async def staleness(ctx: RunContext, call_next: Next) -> None:
    """Cancel a task-bound run whose task vanished, ended, or moved to someone else.

    Reasons (specification "Staleness check"): ``task_not_found``, ``task_terminal``
    (done, cancelled or archived), ``assignee_changed``, ``review_participant_changed``.
    The run's checkout, if any, is released by :meth:`RunContext.end`.
    """
    if ctx.run.task_id is None:
        await call_next()
        return
    task = ctx.task
    reason: RunReason | None = None
    if task is None:
        reason = RunReason.TASK_NOT_FOUND
    elif task.state.is_terminal or task.archived_at is not None:
        reason = RunReason.TASK_TERMINAL
    elif is_review_wake(ctx.run):
        if ctx.run.agent_id not in task.reviewers or task.state is not TaskState.IN_REVIEW:
            reason = RunReason.REVIEW_PARTICIPANT_CHANGED
    elif ctx.run.source is not WakeSource.QUEUE_RUN and task.assignee_agent_id != ctx.run.agent_id:
        reason = RunReason.ASSIGNEE_CHANGED
    if reason is not None:
        await ctx.end(RunStatus.CANCELLED, reason)
        return
    await call_next()


async def idle_skip(ctx: RunContext, call_next: Next) -> None:
    """Skip a periodic wake of an agent that has nothing actionable (no session launched).

    All must hold (specification "Idle wakeup skip"): periodic classification,
    ``skip_idle_wakeups`` on the agent, zero tasks in TODO/IN_PROGRESS assigned to it.
    """
    agent = ctx.agent
    assert agent is not None
    if _may_idle_skip(ctx.run, agent):
        count = ctx.actionable_tasks
        if count is None:  # not counted by load
            count = await asyncio.to_thread(ctx.deps.store.office.count_actionable_tasks, agent.id)
        if count == 0:
            log.info(
                "wakeup_idle_skipped",
                wakeup_ids=[entry.request_id for entry in ctx.run.context],
                agent_instance_id=agent.id,
                agent_name=agent.name,
                run_id=ctx.run.id,
                reason=RunReason.NO_ACTIONABLE_TASKS.value,
            )
            await ctx.end(
                RunStatus.FINISHED, RunReason.NO_ACTIONABLE_TASKS, then=_log_idle_skip(ctx)
            )
            return
    await call_next()


def _log_idle_skip(ctx: RunContext) -> AfterEnd:
    """The ``wakeup_idle_skipped`` activity entry, written in the transaction of the skip."""
    assert ctx.agent is not None
    agent, store, now = ctx.agent, ctx.deps.store, ctx.deps.clock.now()
    wakeup_ids = [entry.request_id for entry in ctx.run.context]

    def write(run: Run) -> list[RunEventRow]:
        store.runlog.add_activity(
            workspace_id=run.workspace_id,
            kind="wakeup_idle_skipped",
            message=f"{agent.name} has no actionable tasks; periodic wake skipped",
            now=now,
            agent_id=agent.id,
            run_id=run.id,
            data={"wakeup_ids": wakeup_ids},
        )
        return []

    return write


async def blocker_hold(ctx: RunContext, call_next: Next) -> None:
    """Hold a pure ``task_assigned`` run while its task has open blockers.

    The run finishes with reason ``blocked``; the ``task_blockers_resolved`` wake sent when
    the last blocker ends starts the work. Likewise a run of only ``task_children_completed``
    wakes finishes with reason ``children_pending`` while a subtask is still open (the
    specification wakes the parent once *all* children ended). A run that also carries
    other wakes (a comment) goes ahead so that nothing merged into it is swallowed.
    """
    if ctx.task is not None and all(
        entry.source is WakeSource.TASK_ASSIGNED for entry in ctx.run.context
    ):
        open_ids = await asyncio.to_thread(ctx.deps.store.office.open_blocker_ids, ctx.task.id)
        if open_ids:
            await ctx.event("blocked", "task has open blockers", blocker_ids=open_ids)
            await ctx.end(RunStatus.FINISHED, RunReason.BLOCKED)
            return
    if ctx.task is not None and all(
        entry.source is WakeSource.TASK_CHILDREN_COMPLETED for entry in ctx.run.context
    ):
        # Every ending child sends a wake (so a burst coalesces); launch once all have ended.
        children = await asyncio.to_thread(ctx.deps.store.office.list_children, ctx.task.id)
        pending = [c.id for c in children if not c.state.is_terminal and c.archived_at is None]
        if pending:
            await ctx.event("children_pending", "task has open subtasks", child_ids=pending)
            await ctx.end(RunStatus.FINISHED, RunReason.CHILDREN_PENDING)
            return
    await call_next()


async def checkout(ctx: RunContext, call_next: Next) -> None:
    """Take the task's exclusive checkout for this run; a conflict finishes without retry.

    A reviewer's run (a review-stage wake) reads the task without taking it over, so it
    takes no checkout: several reviewers, and the assignee, may run at the same time.
    """
    if ctx.task is None or is_review_wake(ctx.run):
        await call_next()
        return
    taken = await asyncio.to_thread(
        ctx.deps.store.queue.checkout_task,
        ctx.task.id,
        agent_id=ctx.run.agent_id,
        run_id=ctx.run.id,
        now=ctx.deps.clock.now(),
        node_id=ctx.deps.settings.node_id,
        claimed_at=ctx.run.claimed_at,
    )
    if not taken:
        await ctx.end(RunStatus.FINISHED, RunReason.CHECKOUT_CONFLICT)
        return
    if ctx.task.checkout_run_id is not None:
        # Another run held the task when load read the prompt's material and has ended
        # since: what it left (its session, its last comments) must reach this prompt.
        forget_read_ahead(ctx)
    await call_next()
