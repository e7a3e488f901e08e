"""Typed, past-tense events published after the change they describe has committed."""

from __future__ import annotations

from dataclasses import dataclass

from office_scheduler.domain.models import Comment, Run, Task, WakeupRequest
from office_scheduler.domain.status import IntakeOutcome


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Base of every event; ``actor_agent_id`` is the agent that caused it, if any."""

    actor_agent_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskCreated(Event):
    """A task was created (possibly already assigned)."""

    task: Task


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskUpdated(Event):
    """A task's fields changed; ``before`` and ``after`` are the two versions."""

    before: Task
    after: Task


@dataclass(frozen=True, kw_only=True, slots=True)
class CommentAdded(Event):
    """A comment was posted on ``task``."""

    comment: Comment
    task: Task


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
    """A run reached a terminal state (finished, failed, cancelled)."""

    run: Run
