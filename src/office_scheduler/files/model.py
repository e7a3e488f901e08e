"""The records of a config directory and of an import plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from office_scheduler.domain.budgets import BudgetAction, BudgetPeriod, BudgetScope
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    RoutineStatus,
    RoutineVariable,
    SigningMode,
    TaskTemplate,
    TriggerKind,
)
from office_scheduler.domain.status import AgentRole, AgentStatus


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSpec:
    """One agent as configured in ``agents/<name>.yml`` (role defaults already applied).

    ``reports_to`` is the *name* of another agent of the same config; ``permission_policy``
    is ``{"mode": ..., "tools": [...]}`` (normalised) or ``None``; ``paused_reason`` is kept
    so that a budget pause survives an export and re-import; ``expected_run_cents`` is what
    one run is expected to cost (budgets' pre-launch projection), ``None`` when not set.
    """

    name: str
    role: AgentRole
    instructions: str = ""
    max_concurrent_sessions: int = 1
    cooldown_s: float = 10.0
    skip_idle_wakeups: bool = True
    executor: str | None = None
    status: AgentStatus = AgentStatus.IDLE
    reports_to: str | None = None
    permission_policy: dict[str, Any] | None = None
    paused_reason: str | None = None
    expected_run_cents: int | None = None
    #: Overrides of the workspace's runaway limits (``None``: the file sets none).
    limits: dict[str, int | None] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ProjectSpec:
    """One project as configured in ``projects/<name>.yml`` (directory made absolute)."""

    name: str
    description: str = ""
    directory: str | None = None
    executor: str | None = None
    repos: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggerSpec:
    """One trigger of a routine file.

    ``cron`` (normalised) and ``timezone`` (an IANA name, ``UTC`` when not given) belong to
    a ``schedule`` trigger, ``signing_mode`` to a ``webhook`` one, ``events`` (event name →
    accepted actions) to a ``github`` webhook.
    """

    kind: TriggerKind
    enabled: bool = True
    cron: str | None = None
    timezone: str = ""
    signing_mode: SigningMode | None = None
    events: dict[str, list[str]] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RoutineSpec:
    """One routine as configured in ``routines/<name>.yml``.

    ``assignee`` is an agent name; ``variables`` are the declarations after every
    ``{{name}}`` of the template was declared (as the routine service stores them);
    ``triggers`` are in canonical order (kind, then cron and zone or signing mode).
    """

    name: str
    description: str = ""
    assignee: str | None = None
    status: RoutineStatus = RoutineStatus.ACTIVE
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.COALESCE_IF_ACTIVE
    catch_up_policy: CatchUpPolicy = CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP
    catch_up_max: int = 25
    task_template: TaskTemplate | None = None
    variables: tuple[RoutineVariable, ...] = ()
    triggers: tuple[TriggerSpec, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetSpec:
    """One entry of ``office.yml``'s ``budgets`` list (money in whole cents).

    ``name`` is the agent or project name (``None`` for the workspace).
    """

    scope: BudgetScope
    name: str | None = None
    limit_cents: int
    period: BudgetPeriod = BudgetPeriod.MONTHLY
    alert_pct: int = 80
    on_exceed: BudgetAction = BudgetAction.PAUSE_AGENT

    @property
    def key(self) -> tuple[str, str]:
        """``(scope, name)``: what an import matches a stored policy by."""
        return (self.scope.value, self.name or "")

    @property
    def label(self) -> str:
        """``workspace``, ``agent <name>`` or ``project <name>``."""
        return self.scope.value if self.name is None else f"{self.scope.value} {self.name}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelSpec:
    """One ``notifications`` entry of ``office.yml``, validated, references resolved.

    Attributes:
        name: the channel's name.
        values: the channel's columns (``kind``, ``url``, ``secret``, ``events``, ``enabled``).
    """

    name: str
    values: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class OfficeConfig:
    """A whole office: the workspace, its settings and executors, agents, projects, routines.

    Agents, projects and routines are ordered by name. ``root`` is the config directory
    (absolute) and ``env_references`` the executor values read from ``${env:NAME}``, both
    for the import plan.
    """

    name: str
    description: str
    settings: WorkspaceSettings
    agents: tuple[AgentSpec, ...] = ()
    projects: tuple[ProjectSpec, ...] = ()
    routines: tuple[RoutineSpec, ...] = ()
    budgets: tuple[BudgetSpec, ...] = ()
    #: The workspace's runaway limits (``None``: ``office.yml`` has no ``limits:``).
    limits: dict[str, int | None] | None = None
    notifications: tuple[ChannelSpec, ...] = ()
    root: str | None = field(default=None, compare=False)
    env_references: tuple[EnvReference, ...] = field(default=(), compare=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvReference:
    """An executor ``env`` value read from the importing process (``${env:NAME}``)."""

    executor: str
    key: str
    variable: str


class Action(StrEnum):
    """What an import does to one record."""

    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One planned change: ``kind`` is ``workspace``, ``agent``, ``project`` or ``routine``.

    A routine's ``fields`` name ``triggers`` when triggers are added, removed, enabled or
    disabled. ``details`` show the values a new record gets (every field) or a changed one
    gets (the changed fields), as ``key: value`` lines with ``env`` values never shown;
    ``warnings`` flag what deserves a second look (see :mod:`office_scheduler.files.review`).
    ``note`` says what the import leaves alone on purpose (e.g. a pause the system or a
    person made since the last import), empty otherwise.
    """

    kind: str
    name: str
    action: Action
    fields: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportPlan:
    """The changes an import would make, computed against the current store."""

    config: OfficeConfig
    workspace_id: str | None
    changes: tuple[Change, ...] = field(default_factory=tuple)

    @property
    def has_changes(self) -> bool:
        """True when applying the plan would change anything."""
        return any(change.action is not Action.UNCHANGED for change in self.changes)


@dataclass(frozen=True, kw_only=True, slots=True)
class NewWebhook:
    """A webhook trigger an import created: its URL id and, when signed, its secret.

    The secret is shown this once: the store never returns it again.
    """

    routine: str
    public_id: str
    signing_mode: SigningMode
    secret: str | None

    @property
    def path(self) -> str:
        """The URL path that fires the trigger."""
        return f"/api/routine-triggers/{self.public_id}/fire"


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportResult:
    """What :func:`~office_scheduler.files.sync.run_import` did."""

    workspace_id: str
    new_webhooks: tuple[NewWebhook, ...] = ()
