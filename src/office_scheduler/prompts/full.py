"""The full wake prompt: who the agent is, why it was woken, on what, and how to act."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from office_scheduler.domain.models import Agent, Comment, Project, RunWakes, Task, Workspace
from office_scheduler.domain.summaries import ContinuationSummary
from office_scheduler.prompts.acting import ActRoute, how_to_act
from office_scheduler.prompts.text import clean, fenced, one_line
from office_scheduler.prompts.wakes import DEFAULT_MAX_WAKE_BYTES, DEFAULT_MAX_WAKES, wake_section

#: Most recent comments shown in a full prompt.
MAX_COMMENTS = 20
#: Longest comment body shown, in characters.
MAX_COMMENT_CHARS = 2000
#: Longest task or project description shown, in characters.
MAX_DESCRIPTION_CHARS = 8000
#: Longest agent instructions included, in characters.
MAX_INSTRUCTIONS_CHARS = 16000
#: Longest slice of the continuation summary injected into taskless prompts, in characters
#: (specification "Continuation summary").
SUMMARY_SLICE_CHARS = 1500
#: Most subtasks or blockers listed.
MAX_LISTED_TASKS = 50

_SLICE_MARK = "\n…(summary continues)"


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptInput:
    """Everything the full wake prompt is built from.

    Attributes:
        wakes: the wakes merged into the run (bounded view).
        comments: the task's comments, oldest first (the last 20 are shown).
        blockers: the tasks named in ``task.blocked_by`` (open or done).
        agent_names: agent id → name, to name agents mentioned in payloads.
        summary: the continuation summary of the run's scope (taskless runs only).
        act_via: how the agent acts: the office MCP tools or the ``office`` command
            (:func:`~office_scheduler.prompts.acting.act_route` of the run's executor).
        max_wakes: most merged wakes shown in full (workspace ``prompt_max_wakes``).
        max_wake_bytes: budget of the wake section in UTF-8 bytes (workspace
            ``prompt_max_wake_bytes``).
    """

    workspace: Workspace
    agent: Agent
    wakes: RunWakes
    task: Task | None = None
    project: Project | None = None
    comments: Sequence[Comment] = ()
    children: Sequence[Task] = ()
    blockers: Sequence[Task] = ()
    run_id: int = 0
    agent_names: Mapping[str, str] = field(default_factory=dict)
    summary: ContinuationSummary | None = None
    act_via: ActRoute = ActRoute.CLI
    max_wakes: int = DEFAULT_MAX_WAKES
    max_wake_bytes: int = DEFAULT_MAX_WAKE_BYTES


def summary_slice(content: str, limit: int = SUMMARY_SLICE_CHARS) -> str:
    """The first ``limit`` characters of a summary, cut at a line end when it is longer.

    A cut slice ends with ``…(summary continues)`` and is still at most ``limit``
    characters; whole lines are kept when a line break falls in the second half.
    """
    if len(content) <= limit:
        return content
    head = content[: limit - len(_SLICE_MARK)]
    cut = head.rfind("\n")
    if cut >= len(head) // 2:
        head = head[:cut]
    return head + _SLICE_MARK


def task_line(task: Task, names: Mapping[str, str]) -> str:
    """One bullet naming a task: state, title, id and assignee."""
    assignee = task.assignee_agent_id
    who = names.get(assignee, assignee) if assignee else "unassigned"
    title = one_line(task.title, limit=200)
    return f"- [{task.state.value}] {title} (id {task.id}, assignee {who})"


def comment_lines(comment: Comment, names: Mapping[str, str]) -> list[str]:
    """A comment as a bullet with its author and time, the body quoted in a fenced block."""
    if comment.author_agent_id:
        author = f"agent {names.get(comment.author_agent_id, comment.author_agent_id)}"
    else:
        author = comment.author_kind.value
    body = clean(comment.body, limit=MAX_COMMENT_CHARS)
    return [
        f"- {comment.created_at.isoformat()} by {author} (comment {comment.id}):",
        *fenced(body, indent="  "),
    ]


def _header(data: PromptInput) -> list[str]:
    agent, ws = data.agent, data.workspace
    lines = [
        f"# You are {one_line(agent.name, limit=200)}, the {agent.role.value} of workspace "
        f"{one_line(ws.name, limit=200)}",
        "",
        "## Your instructions",
        clean(agent.instructions.strip(), limit=MAX_INSTRUCTIONS_CHARS) or "(no instructions)",
    ]
    if ws.description.strip():
        lines += ["", "## Workspace", *fenced(clean(ws.description, limit=2000))]
    return lines


def _project(project: Project) -> list[str]:
    lines = ["", f"## Project {one_line(project.name, limit=200)} (id {project.id})"]
    if project.directory:
        lines.append(f"Directory: {one_line(project.directory, limit=500)}")
    if project.repos:
        lines.append("Repositories: " + ", ".join(one_line(r, limit=300) for r in project.repos))
    if project.description.strip():
        lines += fenced(clean(project.description, limit=MAX_DESCRIPTION_CHARS))
    return lines


def _task(data: PromptInput, task: Task) -> list[str]:
    names = data.agent_names
    lines = [
        "",
        f"## Task {task.id}: {one_line(task.title, limit=500)}",
        f"State: {task.state.value}",
    ]
    if task.parent_id:
        lines.append(f"Parent task: {task.parent_id}")
    if task.requires_approval:
        lines.append("Requires approval: yes (a person reviews it before it is done)")
    lines += ["", "Description:"]
    lines += fenced(clean(task.description, limit=MAX_DESCRIPTION_CHARS) or "(no description)")
    if data.blockers:
        lines += ["", "### Blocked by"]
        lines += [task_line(t, names) for t in list(data.blockers)[:MAX_LISTED_TASKS]]
    if data.children:
        lines += ["", "### Subtasks"]
        lines += [task_line(t, names) for t in list(data.children)[:MAX_LISTED_TASKS]]
    if data.comments:
        shown = list(data.comments)[-MAX_COMMENTS:]
        lines += ["", f"### Recent comments ({len(shown)} of {len(data.comments)}, oldest first)"]
        for comment in shown:
            lines += comment_lines(comment, names)
    return lines


def _summary(summary: ContinuationSummary) -> list[str]:
    return [
        "",
        f"## Where you left off (continuation summary, scope {summary.scope})",
        "Written by the scheduler after your last successful run of this scope:",
        *fenced(clean(summary_slice(summary.content)), info="markdown"),
    ]


def build_prompt(data: PromptInput) -> str:
    """Assemble the full wake prompt as markdown (pure and deterministic).

    Sections, in order: the agent's instructions and the workspace; why it was woken
    (the merged wakes with their payloads, oldest first, bounded by ``max_wakes`` and
    ``max_wake_bytes``: see :func:`~office_scheduler.prompts.wakes.wake_section`); the
    project; the task with its blockers, subtasks and last 20 comments; for taskless runs,
    a 1,500-character slice of the continuation summary; how to act (the office MCP tools,
    or the ``office`` command for executors without them; ``data.act_via``). Text written
    by people or agents is cleaned, capped and fenced.

    Returns:
        The prompt, ending with a newline.
    """
    lines = _header(data)
    listed = {c.id for c in list(data.comments)[-MAX_COMMENTS:]} if data.task else set()
    wakes = wake_section(
        data.wakes,
        run_id=data.run_id,
        names=data.agent_names,
        comments=data.comments,
        listed=listed,
        max_wakes=data.max_wakes,
        max_bytes=data.max_wake_bytes,
    )
    lines += ["", *wakes]
    if data.project is not None:
        lines += _project(data.project)
    if data.task is not None:
        lines += _task(data, data.task)
    elif data.summary is not None and data.summary.content.strip():
        lines += _summary(data.summary)
    lines += how_to_act(data.act_via)
    return "\n".join(lines) + "\n"
