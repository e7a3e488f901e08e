"""Build a claimed run's prompt: full wake prompt or resume delta (DESIGN §6 step 8).

The reads happen together: ahead, in ``load``'s snapshot with the run's subjects
(:func:`read_ahead`), or in one worker thread when the prompt is rebuilt; the assembly is
the pure code of :mod:`office_scheduler.prompts`. The run records the prompt kind
(``runs.prompt_kind``) and a ``prompt_built`` event with the size and a snapshot of the
task as the prompt showed it; the next resume delta of the same (task, agent) compares
against that snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from office_scheduler.domain.models import (
    AgentSession,
    Comment,
    ExecutorConfig,
    Run,
    RunWakes,
    Task,
)
from office_scheduler.domain.summaries import ApprovalDecision, ContinuationSummary
from office_scheduler.pipeline.context import RunContext
from office_scheduler.pipeline.planning import planned_session
from office_scheduler.prompts import (
    DeltaInput,
    PromptInput,
    PromptKind,
    TaskSnapshot,
    act_route,
    build_delta_prompt,
    build_prompt,
    choose_prompt_kind,
    estimate_tokens,
)
from office_scheduler.store.facade import Store
from office_scheduler.store.summaries import PROMPT_EVENT
from office_scheduler.summary import summary_scope

#: ``ctx.extras`` key: ``(executor, cwd, material)`` read by :func:`read_ahead`.
_READ_AHEAD = "prompt_material"
#: ``ctx.extras`` key: the prior (task, agent) session the prompt was built against
#: (``None``: there was none), so the launch resumes the very session the prompt assumed.
PRIOR_SESSION = "prior_session"


@dataclass(kw_only=True, slots=True)
class _Material:
    """What the store had to say for one prompt."""

    run: Run
    wakes: RunWakes
    names: dict[str, str]
    comments: list[Comment] = field(default_factory=list)
    children: list[Task] = field(default_factory=list)
    blockers: list[Task] = field(default_factory=list)
    prior: AgentSession | None = None
    prior_run: Run | None = None
    previous: TaskSnapshot | None = None
    decisions: list[ApprovalDecision] = field(default_factory=list)
    summary: ContinuationSummary | None = None


def _gather(
    store: Store,
    seen: Run,
    known: RunWakes | None,
    newest: int,
    task: Task | None,
    config: ExecutorConfig | None,
    cwd: str | None,
) -> tuple[_Material, PromptKind]:
    """Read the run and its material again; its wakes only when some merged since ``seen``."""
    with store.db.snapshot():  # one read connection (and on SQLite one snapshot) for all
        run = store.queue.get_run(seen.id)
        wakes = known
        if wakes is None or run.context_version != seen.context_version:
            wakes = store.queue.run_wakes(run.id, newest=newest)
        return _read_material(store, run, wakes, task, config, cwd)


def read_ahead(ctx: RunContext) -> None:
    """Read the material of the run's first prompt now (blocking), for :func:`build_run_prompt`.

    ``load`` calls this inside its snapshot, so the run's subjects and the prompt's
    material come in one read transaction and one thread hop. The material is used once,
    by the first build and only for the executor and directory planned now; a rebuild
    (a wake merged in after the build) reads afresh. Its run is the run as claimed
    (``ctx.run``, not read again) and its wakes those ``load`` read (``ctx.wakes``): a wake
    merged in since fails the start's compare-and-set on the context version, and the
    prompt is rebuilt.
    """
    config, cwd = planned_session(ctx)
    assert ctx.wakes is not None
    found = _read_material(ctx.deps.store, ctx.run, ctx.wakes, ctx.task, config, cwd)
    ctx.extras[_READ_AHEAD] = (config, cwd, found)


def forget_read_ahead(ctx: RunContext) -> None:
    """Drop the material :func:`read_ahead` read: the first build reads afresh."""
    ctx.extras.pop(_READ_AHEAD, None)


async def _material(
    ctx: RunContext, executor: ExecutorConfig | None, cwd: str | None
) -> tuple[_Material, PromptKind]:
    """The material :func:`read_ahead` read for this executor and directory, else a fresh read."""
    ahead = ctx.extras.pop(_READ_AHEAD, None)
    if ahead is not None and ahead[0] == executor and ahead[1] == cwd:
        found: tuple[_Material, PromptKind] = ahead[2]
        return found
    assert ctx.workspace is not None
    newest = ctx.workspace.settings.prompt_max_wakes
    return await asyncio.to_thread(
        _gather, ctx.deps.store, ctx.run, ctx.wakes, newest, ctx.task, executor, cwd
    )


def _read_material(
    store: Store,
    run: Run,
    wakes: RunWakes,
    task: Task | None,
    config: ExecutorConfig | None,
    cwd: str | None,
) -> tuple[_Material, PromptKind]:
    data = _Material(run=run, wakes=wakes, names={})
    if task is None:
        data.names = store.office.agent_names(run.workspace_id, only=_named_agents(data))
        data.summary = store.summaries.get_summary(run.agent_id, summary_scope(wakes.entries))
        return data, PromptKind.FULL
    # ``task`` was read in this snapshot (load) or before it (a rebuild; a task is never
    # deleted, only archived), so an empty list needs no existence check.
    data.comments = store.office.list_comments(task.id, require=False)
    data.children = store.office.list_children(task.id, require=False)
    data.blockers = [store.office.get_task(blocker_id) for blocker_id in task.blocked_by]
    data.names = store.office.agent_names(run.workspace_id, only=_named_agents(data))
    data.prior = store.runlog.latest_resumable_session(task.id, run.agent_id)
    kind = choose_prompt_kind(task_id=task.id, prior=data.prior, config=config, cwd=cwd)
    if kind is PromptKind.DELTA:
        assert data.prior is not None
        data.prior_run = store.queue.get_run(data.prior.run_id)
        stored = store.summaries.prompt_snapshot(data.prior.run_id)
        data.previous = TaskSnapshot.from_json(stored) if stored else None
        data.decisions = store.summaries.decided_approvals(task.id, since=_since(data))
    return data, kind


#: Past this many candidate ids the prompt reads every agent's name instead.
_MAX_NAMED = 500


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (payloads name agents by id anywhere)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _named_agents(data: _Material) -> set[str] | None:
    """The ids the prompt may name an agent by (``None``: too many, read every name).

    Comment authors, assignees of the listed tasks, and any string in the payload of a
    merged wake the prompt may show.
    """
    ids = {c.author_agent_id for c in data.comments if c.author_agent_id}
    ids |= {t.assignee_agent_id for t in (*data.children, *data.blockers) if t.assignee_agent_id}
    for entry in data.wakes.entries:
        ids.update(_strings(entry.payload))
        if len(ids) > _MAX_NAMED:
            return None
    return ids


def _since(data: _Material) -> datetime:
    """When the resumed session's run started (its claim, or the session, as fallbacks)."""
    assert data.prior is not None
    prior_run = data.prior_run
    if prior_run is not None:
        return prior_run.started_at or prior_run.claimed_at or data.prior.created_at
    return data.prior.created_at


def _full(ctx: RunContext, data: _Material, executor: ExecutorConfig | None) -> str:
    assert ctx.agent is not None
    assert ctx.workspace is not None
    return build_prompt(
        PromptInput(
            workspace=ctx.workspace,
            agent=ctx.agent,
            wakes=data.wakes,
            max_wakes=ctx.workspace.settings.prompt_max_wakes,
            max_wake_bytes=ctx.workspace.settings.prompt_max_wake_bytes,
            task=ctx.task,
            project=ctx.project,
            comments=data.comments,
            children=data.children,
            blockers=data.blockers,
            run_id=data.run.id,
            agent_names=data.names,
            summary=data.summary,
            act_via=act_route(executor),
        )
    )


def _delta(ctx: RunContext, data: _Material) -> str:
    assert ctx.agent is not None
    assert ctx.task is not None
    assert ctx.workspace is not None
    assert data.prior is not None
    settings = ctx.workspace.settings
    return build_delta_prompt(
        DeltaInput(
            agent=ctx.agent,
            task=ctx.task,
            wakes=data.wakes,
            max_wakes=settings.prompt_max_wakes,
            max_wake_bytes=settings.prompt_max_wake_bytes,
            run_id=data.run.id,
            prior_run_id=data.prior.run_id,
            since=_since(data),
            previous=data.previous,
            comments=data.comments,
            blockers=data.blockers,
            children=data.children,
            decisions=data.decisions,
            agent_names=data.names,
        )
    )


async def build_run_prompt(
    ctx: RunContext, *, executor: ExecutorConfig | None, cwd: str | None = None
) -> None:
    """Set ``ctx.prompt`` (and ``ctx.prompt_version``) for the claimed run.

    A task-bound run that will resume its (task, agent) session gets the resume delta
    (:func:`~office_scheduler.prompts.choose_prompt_kind`); the full prompt is then kept in
    ``ctx.extras["full_prompt"]`` for an executor that must fall back to a new session.
    Records the kind on the run and a ``prompt_built`` event (kind, bytes, estimated
    tokens, resumed session, task snapshot).

    Args:
        ctx: the run's context (agent and workspace loaded).
        executor: the executor the run will use, if one resolves.
        cwd: the absolute working directory the session will use, when known (a prior
            session from another directory is not resumed).
    """
    data, kind = await _material(ctx, executor, cwd)
    ctx.run = data.run
    ctx.wakes = data.wakes
    if ctx.task is not None:
        ctx.extras[PRIOR_SESSION] = data.prior  # the session the prompt kind was chosen for
    full = _full(ctx, data, executor)
    prompt = _delta(ctx, data) if kind is PromptKind.DELTA else full
    ctx.extras["full_prompt"] = full if kind is PromptKind.DELTA else None
    ctx.extras["prompt_kind"] = kind.value
    ctx.prompt = prompt
    ctx.prompt_version = data.run.context_version
    size = len(prompt.encode("utf-8"))
    details: dict[str, Any] = {
        "prompt_kind": kind.value,
        "bytes": size,
        "tokens": estimate_tokens(prompt),
        "full_bytes": len(full.encode("utf-8")),
    }
    if kind is PromptKind.DELTA and data.prior is not None:
        details["resumed_session_id"] = data.prior.id
        details["resumed_run_id"] = data.prior.run_id
    if ctx.task is not None:
        snapshot = TaskSnapshot.of(ctx.task, data.blockers, data.children, data.comments)
        details["snapshot"] = snapshot.to_json()
    await ctx.event(PROMPT_EVENT, f"{kind.value} prompt, {size} bytes", **details)
