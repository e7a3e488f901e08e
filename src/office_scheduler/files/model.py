"""The records of a config directory and of an import plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AgentStatus


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSpec:
    """One agent as configured in ``agents/<name>.yml`` (role defaults already applied)."""

    name: str
    role: AgentRole
    instructions: str = ""
    max_concurrent_sessions: int = 1
    cooldown_s: float = 10.0
    skip_idle_wakeups: bool = True
    executor: str | None = None
    status: AgentStatus = AgentStatus.IDLE


@dataclass(frozen=True, kw_only=True, slots=True)
class ProjectSpec:
    """One project as configured in ``projects/<name>.yml`` (directory made absolute)."""

    name: str
    description: str = ""
    directory: str | None = None
    executor: str | None = None
    repos: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class OfficeConfig:
    """A whole office: the workspace, its settings and executors, agents and projects.

    Agents and projects are ordered by name.
    """

    name: str
    description: str
    settings: WorkspaceSettings
    agents: tuple[AgentSpec, ...] = ()
    projects: tuple[ProjectSpec, ...] = ()


class Action(StrEnum):
    """What an import does to one record."""

    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One planned change: ``kind`` is ``workspace``, ``agent`` or ``project``."""

    kind: str
    name: str
    action: Action
    fields: tuple[str, ...] = ()


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
