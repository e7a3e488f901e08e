"""Routines: vocabularies and records (specification "Routines", DESIGN §4 and §8).

A routine is a task template (heavy) or a taskless wake spec (lightweight) with triggers.
Instants are aware UTC datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

JSON = dict[str, Any]


class RoutineStatus(StrEnum):
    """Only ``active`` routines fire."""

    ACTIVE = "active"
    PAUSED = "paused"
    ARCHIVED = "archived"


class ConcurrencyPolicy(StrEnum):
    """What a fire does while an instance of the same routine and fingerprint is active."""

    COALESCE_IF_ACTIVE = "coalesce_if_active"
    SKIP_IF_ACTIVE = "skip_if_active"
    ALWAYS_ENQUEUE = "always_enqueue"


class CatchUpPolicy(StrEnum):
    """What the cron loop does with ticks missed while no scheduler ran (DESIGN §8)."""

    ENQUEUE_MISSED_WITH_CAP = "enqueue_missed_with_cap"
    SKIP_MISSED = "skip_missed"


class TriggerKind(StrEnum):
    """How a routine is fired."""

    SCHEDULE = "schedule"
    WEBHOOK = "webhook"
    MANUAL = "manual"


class SigningMode(StrEnum):
    """How a webhook trigger authenticates its caller.

    ``github`` checks ``X-Hub-Signature-256`` as GitHub signs; ``slack`` checks
    ``X-Slack-Signature`` as Slack signs (its messages become comments on a channel task).
    """

    NONE = "none"
    BEARER = "bearer"
    HMAC_SHA256 = "hmac_sha256"
    GITHUB = "github"
    SLACK = "slack"


class RoutineRunSource(StrEnum):
    """What fired a routine run."""

    CRON = "cron"
    WEBHOOK = "webhook"
    MANUAL = "manual"


class RoutineRunStatus(StrEnum):
    """Routine run states (DESIGN §4).

    ``received`` → ``task_created`` (heavy) | ``dispatched`` (lightweight) | ``skipped`` |
    ``coalesced`` | ``failed``; ``task_created``/``dispatched`` later end ``done``,
    ``cancelled`` or ``failed`` with what they created.
    """

    RECEIVED = "received"
    TASK_CREATED = "task_created"
    DISPATCHED = "dispatched"
    SKIPPED = "skipped"
    COALESCED = "coalesced"
    FAILED = "failed"
    DONE = "done"
    CANCELLED = "cancelled"


#: Routine runs whose task or run may still be live ("active" candidates).
LINKED_ROUTINE_RUN_STATUSES = (RoutineRunStatus.TASK_CREATED, RoutineRunStatus.DISPATCHED)


class VariableType(StrEnum):
    """Types of declared template variables."""

    TEXT = "text"
    NUMBER = "number"
    BOOLEAN = "boolean"
    SELECT = "select"


#: Names the template engine provides itself; they cannot be declared.
BUILTIN_VARIABLES = frozenset({"date", "datetime"})


@dataclass(frozen=True, kw_only=True, slots=True)
class RoutineVariable:
    """A declared template variable.

    ``default`` has the variable's type (``str``, ``int``/``float``, ``bool``); ``options``
    lists the allowed values of a ``select``; ``path`` (``payload.issue.title``) takes the
    value from a webhook delivery's JSON body, checked by type like a provided value.
    """

    name: str
    type: VariableType = VariableType.TEXT
    default: Any = None
    required: bool = False
    options: tuple[str, ...] = ()
    path: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskTemplate:
    """What a heavy routine creates: ``{{name}}`` placeholders in title and description."""

    title: str
    description: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Routine:
    """A routine; ``task_template`` ``None`` makes it lightweight (taskless runs)."""

    id: str
    workspace_id: str
    name: str
    description: str
    assignee_agent_id: str | None
    status: RoutineStatus
    concurrency_policy: ConcurrencyPolicy
    catch_up_policy: CatchUpPolicy
    catch_up_max: int
    task_template: TaskTemplate | None
    variables: tuple[RoutineVariable, ...]
    created_at: datetime
    updated_at: datetime

    @property
    def is_heavy(self) -> bool:
        """True when a fire creates a task."""
        return self.task_template is not None

    @property
    def summary_scope(self) -> str:
        """Continuation summary scope of the routine's taskless runs."""
        return f"routine:{self.id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class RoutineTrigger:
    """A schedule, webhook or manual trigger. ``secret`` is never shown after creation."""

    id: str
    routine_id: str
    kind: TriggerKind
    enabled: bool
    cron_expression: str | None
    timezone: str
    next_run_at: datetime | None
    last_fired_at: datetime | None
    public_id: str | None
    signing_mode: SigningMode | None
    created_at: datetime
    #: ``github``: event name → accepted actions (empty list: every action); ``None``: all.
    events: dict[str, list[str]] | None = None
    #: ``slack``: the channel task whose comments the messages become.
    channel_task_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RoutineRun:
    """One firing of a routine and what became of it.

    ``variables`` are the resolved values; ``missed`` the catch-up summary carried by the
    first fired tick (``{"count", "since", "exact"}``).
    """

    id: int
    routine_id: str
    trigger_id: str | None
    source: RoutineRunSource
    status: RoutineRunStatus
    status_reason: str | None
    variables: JSON
    missed: JSON | None
    idempotency_key: str | None
    linked_task_id: str | None
    linked_run_id: int | None
    coalesced_into_run_id: int | None
    dispatch_fingerprint: str | None
    scheduled_for: datetime | None
    created_at: datetime
    completed_at: datetime | None
    #: Template or variable paths a webhook delivery lacked (they rendered empty).
    warnings: tuple[str, ...] = ()


#: The routine installed for every new ``ceo``/``coordinator`` agent (specification "The
#: pre-installed coordinator routine"): an ordinary routine the user may edit, pause or delete.
HEARTBEAT_NAME = "Coordinator heartbeat"
HEARTBEAT_DESCRIPTION = (
    "Wakes the coordinator every 5 minutes to check workspace activity, react to errors "
    "and budget signals, and decide what to do next."
)
HEARTBEAT_CRON = "*/5 * * * *"
HEARTBEAT_TIMEZONE = "UTC"
