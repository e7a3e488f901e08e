"""The resume delta: only what is new for a resumed (task, agent) session.

A resumed session still holds the instructions, the task and everything it was told
before (specification "Resume delta prompt"), so its prompt lists only the wake reasons,
task changes (state, blockers, subtasks), decided approvals and comments that are new
since the run of the session it resumes. What the earlier prompt showed is recorded as a
:class:`TaskSnapshot` in that run's ``prompt_built`` event, and compared here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from office_scheduler.domain.models import Agent, Comment, RunWakes, Task
from office_scheduler.domain.status import TERMINAL_TASK_STATES
from office_scheduler.domain.summaries import ApprovalDecision
from office_scheduler.prompts.full import MAX_COMMENTS, MAX_LISTED_TASKS, comment_lines, task_line
from office_scheduler.prompts.text import clean, fenced, one_line
from office_scheduler.prompts.wakes import DEFAULT_MAX_WAKE_BYTES, DEFAULT_MAX_WAKES, wake_section

_TERMINAL = {state.value for state in TERMINAL_TASK_STATES}


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskSnapshot:
    """What a prompt showed of its task, to tell later what changed.

    Attributes:
        state: the task's state value.
        blockers: blocker task id → state value.
        children: subtask id → state value.
        comments_until: creation instant of the newest comment seen (UTC), if any.
        comment_ids_at_until: ids of the comments created exactly at ``comments_until``.
    """

    state: str
    blockers: Mapping[str, str] = field(default_factory=dict)
    children: Mapping[str, str] = field(default_factory=dict)
    comments_until: datetime | None = None
    comment_ids_at_until: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        task: Task,
        blockers: Sequence[Task],
        children: Sequence[Task],
        comments: Sequence[Comment],
    ) -> TaskSnapshot:
        """The snapshot of a task as a prompt built from these records shows it."""
        until = max((c.created_at for c in comments), default=None)
        return cls(
            state=task.state.value,
            blockers={t.id: t.state.value for t in blockers},
            children={t.id: t.state.value for t in children},
            comments_until=until,
            comment_ids_at_until=tuple(sorted(c.id for c in comments if c.created_at == until)),
        )

    def to_json(self) -> dict[str, Any]:
        """The snapshot as JSON (instants as ISO 8601 strings)."""
        return {
            "state": self.state,
            "blockers": dict(self.blockers),
            "children": dict(self.children),
            "comments_until": self.comments_until.isoformat() if self.comments_until else None,
            "comment_ids_at_until": list(self.comment_ids_at_until),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskSnapshot | None:
        """Read a stored snapshot; ``None`` when it is missing or malformed."""
        try:
            until = data.get("comments_until")
            return cls(
                state=str(data["state"]),
                blockers={str(k): str(v) for k, v in dict(data.get("blockers") or {}).items()},
                children={str(k): str(v) for k, v in dict(data.get("children") or {}).items()},
                comments_until=datetime.fromisoformat(until) if until else None,
                comment_ids_at_until=tuple(str(i) for i in data.get("comment_ids_at_until") or ()),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def saw(self, comment: Comment) -> bool:
        """Whether the prompt this snapshot describes could have shown ``comment``."""
        if self.comments_until is None:
            return False
        if comment.created_at == self.comments_until:
            return comment.id in self.comment_ids_at_until
        return comment.created_at < self.comments_until


@dataclass(frozen=True, kw_only=True, slots=True)
class DeltaInput:
    """Everything a resume delta is built from.

    Attributes:
        prior_run_id: the run of the session being resumed.
        since: when that run started (UTC); comments after it are new when no snapshot
            says otherwise.
        previous: what that run's prompt showed; ``None`` when it was not recorded.
        comments: the task's comments, oldest first (the delta filters the new ones).
        blockers: the tasks named in ``task.blocked_by`` now.
        children: the task's subtasks now.
        decisions: approvals of the task decided since ``since``, oldest first.
        wakes: the wakes merged into the run (bounded view), shown under the same budget
            as in the full prompt (``max_wakes``, ``max_wake_bytes``).
    """

    agent: Agent
    task: Task
    wakes: RunWakes
    run_id: int
    prior_run_id: int
    since: datetime
    previous: TaskSnapshot | None = None
    comments: Sequence[Comment] = ()
    blockers: Sequence[Task] = ()
    children: Sequence[Task] = ()
    decisions: Sequence[ApprovalDecision] = ()
    agent_names: Mapping[str, str] = field(default_factory=dict)
    max_wakes: int = DEFAULT_MAX_WAKES
    max_wake_bytes: int = DEFAULT_MAX_WAKE_BYTES


def new_comments(data: DeltaInput) -> list[Comment]:
    """Comments the resumed session has not seen, except the agent's own."""
    fresh = []
    for comment in data.comments:
        if comment.author_agent_id == data.agent.id:
            continue
        seen = data.previous.saw(comment) if data.previous else comment.created_at <= data.since
        if not seen:
            fresh.append(comment)
    return fresh


def _state_change(data: DeltaInput) -> list[str]:
    now = data.task.state.value
    before = data.previous.state if data.previous else None
    if before is None:
        return [f"- State: {now}"]
    if before == now:
        return [f"- State: {now} (unchanged)"]
    return [f"- State changed: {before} → {now}"]


def _blocker_changes(data: DeltaInput) -> list[str]:
    names = data.agent_names
    before = dict(data.previous.blockers) if data.previous else {}
    lines: list[str] = []
    for blocker in data.blockers:
        was = before.get(blocker.id)
        done = blocker.state.value in _TERMINAL
        if done and (was is None or was not in _TERMINAL):
            lines.append("- Blocker resolved: " + task_line(blocker, names)[2:])
        elif not done and was is None and data.previous is not None:
            lines.append("- New blocker: " + task_line(blocker, names)[2:])
    current = {blocker.id for blocker in data.blockers}
    removed = sorted(ident for ident in before if ident not in current)
    lines += [f"- Blocker removed: task {ident}" for ident in removed]
    return lines


def _child_changes(data: DeltaInput) -> list[str]:
    names = data.agent_names
    before = dict(data.previous.children) if data.previous else {}
    lines: list[str] = []
    for child in list(data.children)[:MAX_LISTED_TASKS]:
        was = before.get(child.id)
        if was is None and data.previous is not None:
            lines.append("- New subtask: " + task_line(child, names)[2:])
        elif was is not None and was != child.state.value:
            lines.append(f"- Subtask {was} → " + task_line(child, names)[2:])
        elif data.previous is None and child.state in TERMINAL_TASK_STATES:
            lines.append("- Subtask finished: " + task_line(child, names)[2:])
    return lines


def _decisions(data: DeltaInput) -> list[str]:
    lines: list[str] = []
    for decision in data.decisions:
        who = f" by {one_line(decision.decided_by, limit=100)}" if decision.decided_by else ""
        lines.append(
            f"- {decision.resolved_at.isoformat()}: approval {decision.approval_id} "
            f"({one_line(decision.title, limit=200)}) was {decision.status}{who}."
        )
        if decision.decision_note:
            lines += fenced(clean(decision.decision_note, limit=2000), indent="  ")
    return lines


def build_delta_prompt(data: DeltaInput) -> str:
    """Assemble the resume delta as markdown (pure and deterministic).

    Contains the wake reasons, task changes (state, resolved/new/removed blockers,
    subtask changes), approvals decided since the resumed run and new comments by others
    (the last 20). It leaves out the instructions, workspace, project and task
    description: the resumed session has them.

    Returns:
        The prompt, ending with a newline.
    """
    task = data.task
    fresh = new_comments(data)
    shown = fresh[-MAX_COMMENTS:]
    lines = [
        f"# Resumed session: what is new since run {data.prior_run_id}",
        f"You are continuing your session on task {task.id} "
        f"({one_line(task.title, limit=200)}). Your instructions and everything this session "
        "was told before still apply; below is only what changed.",
        "",
        *wake_section(
            data.wakes,
            run_id=data.run_id,
            names=data.agent_names,
            comments=data.comments,
            listed={comment.id for comment in shown},
            max_wakes=data.max_wakes,
            max_bytes=data.max_wake_bytes,
        ),
        "",
        "## Task changes",
        *_state_change(data),
        *_blocker_changes(data),
        *_child_changes(data),
    ]
    decisions = _decisions(data)
    if decisions:
        lines += ["", "## Decisions", *decisions]
    if fresh:
        lines += ["", f"## New comments ({len(shown)} of {len(fresh)} new, oldest first)"]
        for comment in shown:
            lines += comment_lines(comment, data.agent_names)
    lines += [
        "",
        "Carry on with the task; print the final JSON object line when you finish, as before.",
    ]
    return "\n".join(lines) + "\n"
