"""Steps that build the prompt, pick the executor, open the session and launch it.

DESIGN §6 steps 8-12.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from pathlib import Path

import structlog

from office_scheduler.domain.events import RunStarted
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import AgentSession, ExecutorConfig, Run
from office_scheduler.domain.status import InboxKind, OutcomeStatus, RunReason, RunStatus
from office_scheduler.pipeline.budget import record_cost
from office_scheduler.pipeline.context import RunContext
from office_scheduler.pipeline.output import OutputRecorder
from office_scheduler.pipeline.planning import pick_executor, planned_cwd, planned_session
from office_scheduler.pipeline.prompting import PRIOR_SESSION, build_run_prompt
from office_scheduler.pipeline.redaction import Redactor
from office_scheduler.pipeline.retries import record_failure
from office_scheduler.pipeline.storable import storable_outcome
from office_scheduler.pipeline.summary import summary_after_end
from office_scheduler.prompts import can_resume
from office_scheduler.store.runlog import RunEventRow

log = structlog.get_logger(__name__)

Next = Callable[[], Awaitable[None]]


async def build_context(ctx: RunContext, call_next: Next) -> None:
    """Assemble the prompt: the full wake prompt, or the resume delta for a resumed session."""
    await _build_prompt(ctx)
    await call_next()


async def _build_prompt(ctx: RunContext) -> None:
    assert ctx.agent is not None
    assert ctx.workspace is not None
    config, cwd = planned_session(ctx)
    await build_run_prompt(ctx, executor=config, cwd=cwd)


async def resolve_executor(ctx: RunContext, call_next: Next) -> None:
    """Pick the executor: task override → agent preference → project → workspace default.

    No executor, or a name with no definition or no implementation, is a configuration
    error: the run fails with a clear message and an inbox item, and is not retried.
    """
    assert ctx.workspace is not None
    assert ctx.agent is not None
    name, origin = pick_executor(ctx)
    problem: str | None = None
    if name is None:
        problem = (
            f"no executor configured for agent {ctx.agent.name}: set one on the task, the "
            "agent, the project or the workspace default"
        )
    elif name not in ctx.workspace.settings.executors:
        problem = f"executor {name!r} (from the {origin}) is not defined in workspace settings"
    else:
        config = ctx.workspace.settings.executors[name]
        if config.kind not in ctx.deps.executors:
            problem = f"executor {name!r} has kind {config.kind!r}, which is not available"
        else:
            ctx.executor_config = config
            await ctx.event("executor_resolved", f"{name} (from the {origin})", executor=name)
    if problem is not None:
        await asyncio.to_thread(
            ctx.deps.store.runlog.add_inbox_item,
            workspace_id=ctx.run.workspace_id,
            kind=InboxKind.EXECUTOR_MISSING,
            title=f"Run {ctx.run.id} of {ctx.agent.name} could not start",
            body=problem,
            data={"run_id": ctx.run.id, "agent_id": ctx.agent.id},
            now=ctx.deps.clock.now(),
            agent_id=ctx.agent.id,
            task_id=ctx.run.task_id,
        )
        await ctx.end(RunStatus.FAILED, RunReason.EXECUTOR_MISSING, error=problem)
        return
    await call_next()


@dataclass(frozen=True, kw_only=True, slots=True)
class _SessionPlan:
    """The session row :func:`launch` writes when the run starts (see :func:`open_session`)."""

    executor: str
    cwd: str
    resumed_from: str | None


async def open_session(ctx: RunContext, call_next: Next) -> None:
    """Plan the run's session; task-bound runs resume the prior (task, agent) session.

    The prior session is the one the prompt was built against (read with the prompt's
    material), resumed only under the rule that chose the prompt kind
    (:func:`~office_scheduler.prompts.can_resume`: same executor, an executor that can
    resume, same working directory); otherwise the run starts a new session. The working
    directory is created and the session row written by :func:`launch`, in the worker
    thread of the transaction that marks the run ``running``.
    """
    config = ctx.executor_config
    assert config is not None
    cwd = planned_cwd(ctx, config)  # created by the start (:func:`_start`)
    prior = None
    if ctx.run.task_id is not None:
        if PRIOR_SESSION in ctx.extras:  # read with the prompt's material
            prior = ctx.extras[PRIOR_SESSION]
        else:
            prior = await asyncio.to_thread(
                ctx.deps.store.runlog.latest_resumable_session, ctx.run.task_id, ctx.run.agent_id
            )
        if not can_resume(task_id=ctx.run.task_id, prior=prior, config=config, cwd=str(cwd)):
            prior = None
    ctx.extras["session_plan"] = _SessionPlan(
        executor=config.name, cwd=str(cwd), resumed_from=prior.id if prior else None
    )
    ctx.extras["resume_session_id"] = prior.external_session_id if prior else None
    ctx.extras["resume_cwd"] = prior.cwd if prior else None
    await call_next()


class _NotStarted(Exception):
    """Rolls the start transaction back: the run was not ``claimed`` at this version."""


@dataclass(frozen=True, slots=True)
class _Started:
    run: Run
    session: AgentSession
    token: str


def _start(
    ctx: RunContext, config: ExecutorConfig, plan: _SessionPlan, events: list[RunEventRow]
) -> _Started | None:
    """One transaction: the session row, claimed → running, the run token, the decisions.

    The session's working directory is created first (outside the transaction).

    ``running`` is a compare-and-set on ``claimed`` and the context version the prompt was
    built from; when it fails nothing is written and ``None`` comes back.
    """
    deps = ctx.deps
    now = deps.clock.now()
    ttl = config.timeout_s + deps.settings.shutdown_grace.total_seconds() + 300
    launched = (ctx.run.id, "launched", f"{config.name} session started", {"executor": config.name})
    assert ctx.prompt is not None
    Path(plan.cwd).mkdir(parents=True, exist_ok=True)
    try:
        with deps.store.db.transaction():
            session = deps.store.runlog.create_session(
                run_id=ctx.run.id,
                agent_id=ctx.run.agent_id,
                task_id=ctx.run.task_id,
                executor=plan.executor,
                cwd=plan.cwd,
                resumed_from=plan.resumed_from,
                now=now,
            )
            started = deps.store.queue.mark_running(
                ctx.run.id,
                expected_version=ctx.prompt_version,
                prompt=ctx.prompt,
                executor=config.name,
                session_id=session.id,
                now=now,
                prompt_kind=ctx.extras.get("prompt_kind"),
                node_id=deps.settings.node_id,
                claimed_at=ctx.run.claimed_at,
            )
            if started is None:
                raise _NotStarted
            token = deps.tokens.mint_run(
                workspace_id=ctx.run.workspace_id,
                agent_id=ctx.run.agent_id,
                run_id=ctx.run.id,
                now=now,
                ttl=timedelta(seconds=ttl),
            )
            deps.store.runlog.add_run_events([*events, (*launched, now)])
    except _NotStarted:
        return None
    return _Started(run=started, session=session, token=token)


async def _start_session(ctx: RunContext, config: ExecutorConfig) -> tuple[Run, str] | None:
    """Start the run, rebuilding the prompt while wakes merge in after it was built.

    A wake merged after the prompt was built bumps the context version, so the start's
    compare-and-set fails; the prompt is rebuilt so the merged wake reaches this session.

    Returns:
        ``(running run, run token)``, or ``None`` when the run is no longer claimed by
        this attempt's claim.
    """
    plan = ctx.extras.get("session_plan")
    assert isinstance(plan, _SessionPlan), "open_session must run before launch"
    while True:
        started = await ctx.with_decisions(lambda events, _retry: _start(ctx, config, plan, events))
        if started is not None:
            ctx.session = started.session
            return started.run, started.token
        current = await asyncio.to_thread(ctx.deps.store.queue.get_run, ctx.run.id)
        ours = (current.claimed_by, current.claimed_at) == (
            ctx.deps.settings.node_id,
            ctx.run.claimed_at,
        )
        if current.status is not RunStatus.CLAIMED or not ours:
            return None  # ended, or requeued and maybe claimed again: this attempt lost it
        await ctx.event("prompt_rebuilt", "a wake merged in after the prompt was built")
        await _build_prompt(ctx)


def _environment(ctx: RunContext, config: ExecutorConfig, token: str) -> dict[str, str]:
    base = ctx.deps.settings.agent_base_env
    env = {name: base[name] for name in config.pass_env if name in base}
    env.update(config.env)
    env.update(
        OFFICE_API_URL=ctx.deps.settings.api_url,
        OFFICE_TOKEN=token,
        OFFICE_RUN_ID=str(ctx.run.id),
        OFFICE_SESSION_ID=ctx.session.id if ctx.session is not None else "",
        OFFICE_AGENT_ID=ctx.run.agent_id,
        OFFICE_WORKSPACE_ID=ctx.run.workspace_id,
        OFFICE_TASK_ID=ctx.run.task_id or "",
    )
    return env


async def launch(ctx: RunContext, call_next: Next) -> None:
    """Start the session (``running``), stream its output into the run log, record the end."""
    config = ctx.executor_config
    assert config is not None
    assert ctx.agent is not None
    deps = ctx.deps
    begun = await _start_session(ctx, config)
    if begun is None:
        return
    started, token = begun
    assert ctx.session is not None
    await deps.publish(RunStarted(run=started))
    assert ctx.prompt is not None
    request = Launch(
        run_id=ctx.run.id,
        agent_id=ctx.run.agent_id,
        task_id=ctx.run.task_id,
        workspace_id=ctx.run.workspace_id,
        prompt=ctx.prompt,
        config=config,
        env=_environment(ctx, config, token),
        cwd=ctx.session.cwd or str(deps.settings.home),
        resume_session_id=ctx.extras.get("resume_session_id"),
        resume_cwd=ctx.extras.get("resume_cwd"),
        permission_policy=ctx.agent.permission_policy,
        full_prompt=ctx.extras.get("full_prompt"),
    )
    redactor = Redactor([token, *config.env.values()])
    recorder = OutputRecorder(
        store=deps.store,
        clock=deps.clock,
        run_id=ctx.run.id,
        limit=deps.settings.max_output_events,
        redactor=redactor,
    )
    executor = deps.executors[config.kind]
    try:
        outcome = await executor.run(request, recorder)
    finally:
        await recorder.close()
    outcome = replace(
        outcome, message=redactor.text(outcome.message), result=redactor.data(outcome.result)
    )
    ctx.extras["outcome"] = outcome
    await _record_outcome(ctx, outcome)
    await call_next()


async def _record_outcome(ctx: RunContext, outcome: Outcome) -> None:
    store = ctx.deps.store
    # Agent text may hold NUL, lone surrogates or NaN, which PostgreSQL cannot store.
    outcome = storable_outcome(outcome)
    ctx.extras["outcome"] = outcome
    await record_cost(ctx, outcome)
    if outcome.external_session_id and ctx.session is not None:
        await asyncio.to_thread(
            store.runlog.set_external_session_id, ctx.session.id, outcome.external_session_id
        )
    if outcome.status is OutcomeStatus.SUCCEEDED:
        await ctx.end(
            RunStatus.FINISHED,
            RunReason.COMPLETED,
            result=outcome.result,
            usage=asdict(outcome.usage),
            exit_code=outcome.exit_code,
            then=summary_after_end(ctx, outcome),
        )
        return
    await record_failure(ctx, outcome)
