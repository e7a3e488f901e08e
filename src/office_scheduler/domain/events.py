"""Typed, past-tense events published after the change they describe has committed."""

from __future__ import annotations

from dataclasses import dataclass

from office_scheduler.domain.budgets import BudgetPolicy
from office_scheduler.domain.models import Approval, Comment, Run, Task, WakeupRequest
from office_scheduler.domain.status import IntakeOutcome, WakeSource


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Base of every event; ``actor_agent_id`` is the agent that caused it, if any."""

    actor_agent_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskCreated(Event):
    """A task was created (possibly already assigned).

    Attributes:
        by: who created it when no agent did (``actor_agent_id`` is ``None``): ``user``
            (a person) or ``system`` (a routine's run).
    """

    task: Task
    by: str = "user"


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskUpdated(Event):
    """A task's fields changed; ``before`` and ``after`` are the two versions."""

    before: Task
    after: Task


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskMoved(Event):
    """A task's kanban state changed (a person's drag, an agent's update, an approval).

    Published together with :class:`TaskUpdated` for the same change.

    Attributes:
        by: who moved it: ``user``, ``user:<name>``, ``agent:<id>`` or ``system``.
        note: why (a reviewer's decision note), when one was given.
        comment_id: the comment that carries ``note``, when one was posted with the move.
    """

    before: Task
    after: Task
    by: str = "user"
    note: str = ""
    comment_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskAssigned(Event):
    """A task's assignee was set or changed on an existing task (creation is TaskCreated)."""

    task: Task
    previous_agent_id: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskArchived(Event):
    """A task was archived (it no longer counts as actionable)."""

    task: Task


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequested(Event):
    """An approval was opened (by an agent, or by an agent finishing a gated task)."""

    approval: Approval


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalResolved(Event):
    """A person approved or rejected an approval."""

    approval: Approval


@dataclass(frozen=True, kw_only=True, slots=True)
class CommentAdded(Event):
    """A comment was posted on ``task``.

    Attributes:
        user_id: the person who wrote it (the admin token's name, or a chat message's
            author), when a person did.
    """

    comment: Comment
    task: Task
    user_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupReceived(Event):
    """Intake handled a wake request: a run was created or joined, or the key was a duplicate."""

    request: WakeupRequest
    run: Run | None
    outcome: IntakeOutcome


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(Event):
    """A run's agent session was launched."""

    run: Run


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEnded(Event):
    """A run reached a terminal state (finished, failed, cancelled): ``run.status`` says which.

    Attributes:
        wake_sources: the sources of the wakes merged into the run, when the publisher read
            them (the pipeline does); ``None`` when unknown.
    """

    run: Run
    wake_sources: frozenset[WakeSource] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetThresholdCrossed(Event):
    """Spend under ``policy`` reached its warn threshold (``exceeded`` false) or its limit.

    ``agent_id`` is the agent whose run crossed it; ``budget_pct`` is spend as a whole
    percent of the limit; ``period`` the period key (``YYYY-MM`` or ``lifetime``).
    """

    policy: BudgetPolicy
    agent_id: str
    run_id: int | None
    period: str
    budget_pct: int
    exceeded: bool
