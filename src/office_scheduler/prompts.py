"""Prompt assembly: why the agent was woken, on what, and how to act (pure functions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from office_scheduler.domain.models import Agent, Comment, ContextEntry, Project, Task, Workspace

MAX_COMMENTS = 20
MAX_PAYLOAD_CHARS = 2000

_SOURCE_TITLES = {
    "routine": "A routine fired",
    "comment": "A new comment was posted on your task",
    "agent_error": "An agent's session failed",
    "self": "You asked to be woken",
    "user": "A person woke you",
    "task_assigned": "A task was assigned to you",
    "task_blockers_resolved": "All blockers of your task are done",
    "task_children_completed": "All subtasks of your task are finished",
    "approval_resolved": "An approval you requested was decided",
    "budget_alert": "A budget threshold was crossed",
    "queue_run": "A run was queued for you",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptInput:
    """Everything the wake prompt is built from."""

    workspace: Workspace
    agent: Agent
    context: Sequence[ContextEntry]
    task: Task | None = None
    project: Project | None = None
    comments: Sequence[Comment] = ()
    children: Sequence[Task] = ()
    blockers: Sequence[Task] = ()
    run_id: int = 0


def _payload(entry: ContextEntry) -> str:
    text = json.dumps(entry.payload, sort_keys=True, ensure_ascii=False)
    if len(text) > MAX_PAYLOAD_CHARS:
        text = text[:MAX_PAYLOAD_CHARS] + "…(truncated)"
    return text


def _task_line(task: Task) -> str:
    assignee = task.assignee_agent_id or "unassigned"
    return f"- [{task.state.value}] {task.title} (id {task.id}, assignee {assignee})"


def build_prompt(data: PromptInput) -> str:
    """Assemble the wake prompt as markdown.

    Sections: the agent's instructions, why it was woken (every merged wake with its
    payload, oldest first), the task with its blockers, subtasks and recent comments,
    and how to act through the ``office`` command. Text from tasks and comments is
    quoted as data; nothing in it is interpreted by the scheduler.
    """
    agent, ws = data.agent, data.workspace
    lines = [
        f"# You are {agent.name}, the {agent.role.value} of workspace {ws.name}",
        "",
        agent.instructions.strip() or "(no instructions)",
        "",
        f"## Why you were woken ({len(data.context)} wake(s) merged into run {data.run_id})",
    ]
    for entry in data.context:
        title = _SOURCE_TITLES.get(entry.source.value, entry.source.value)
        lines.append(
            f"- **{entry.source.value}** at {entry.requested_at.isoformat()}: {title}. "
            f"Payload: `{_payload(entry)}`"
        )
    if data.task is not None:
        task = data.task
        lines += ["", f"## Task {task.id}: {task.title}", f"State: {task.state.value}"]
        if data.project is not None:
            lines.append(f"Project: {data.project.name} (id {data.project.id})")
        if task.parent_id:
            lines.append(f"Parent task: {task.parent_id}")
        lines += ["", "```text", task.description or "(no description)", "```"]
        if data.blockers:
            lines += ["", "### Blocked by", *(_task_line(t) for t in data.blockers)]
        if data.children:
            lines += ["", "### Subtasks", *(_task_line(t) for t in data.children)]
        if data.comments:
            lines += ["", f"### Recent comments (last {MAX_COMMENTS})"]
            for comment in list(data.comments)[-MAX_COMMENTS:]:
                author = comment.author_agent_id or comment.author_kind.value
                lines += [f"- {comment.created_at.isoformat()} by {author}:", "  ```text"]
                lines += [f"  {line}" for line in comment.body.splitlines() or [""]]
                lines.append("  ```")
    lines += [
        "",
        "## How to act",
        "Use the `office` command; it finds the server and your run token in the environment",
        "(OFFICE_API_URL, OFFICE_TOKEN, OFFICE_RUN_ID, OFFICE_TASK_ID, OFFICE_AGENT_ID).",
        "- `office task show ID --json`, `office task list --json`",
        "- `office task create --title T [--parent ID] [--assignee AGENT] [--blocked-by ID]`",
        "- `office comment add TASK_ID --body TEXT`, `office task done ID`",
        "- `office wake self --reason TEXT` to be woken again",
        "Print a final JSON object line such as "
        '`{"status": "ok", "summary": "..."}` when you finish.',
    ]
    return "\n".join(lines) + "\n"
