"""Request bodies of the HTTP API, with the limits every input must respect.

Response models live in :mod:`office_scheduler.api.views`. Unknown body fields are
rejected (422 naming the field) so that a typo never silently does nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AgentStatus, TaskState

#: Longest title of a task.
MAX_TITLE = 500
#: Longest free text (descriptions, instructions, comment bodies).
MAX_TEXT = 100_000
#: Most items of a list input.
MAX_ITEMS = 100
#: Longest wall-clock or inactivity limit of an executor session (7 days), seconds.
MAX_SESSION_S = 7 * 86_400

Name = Annotated[str, Field(min_length=1, max_length=200)]
Title = Annotated[str, Field(min_length=1, max_length=MAX_TITLE)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Body = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
EntityId = Annotated[str, Field(min_length=1, max_length=100)]
IdList = Annotated[list[EntityId], Field(max_length=MAX_ITEMS)]
PathText = Annotated[str, Field(max_length=4096)]
Key = Annotated[str, Field(min_length=1, max_length=500)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)]
Arg = Annotated[str, Field(max_length=10_000)]


def has_nul(value: object) -> bool:
    """Whether a JSON value holds a NUL character in any string (PostgreSQL rejects them)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(key) or has_nul(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(item) for item in value)
    return False


class InputModel(BaseModel):
    """Base of request bodies: unknown fields and NUL characters in text are errors."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if has_nul(value):
            raise ValueError("text must not contain NUL characters")
        return value

    def changes(
        self, *, nullable: frozenset[str] = frozenset(), prefix: str = ""
    ) -> dict[str, Any]:
        """Return the fields the client sent (for PATCH), by name.

        Args:
            nullable: fields for which an explicit ``null`` is meaningful (e.g. unassign).
            prefix: where this model sits in the body (``settings.``), for error fields.

        Raises:
            InvalidInputError: an explicit ``null`` for any other field (``field`` names it).
        """
        sent: dict[str, Any] = {}
        for name in sorted(self.model_fields_set):
            value = getattr(self, name)
            if value is None and name not in nullable:
                field = prefix + name
                raise InvalidInputError(f"{field} must not be null", field=field)
            sent[name] = value
        return sent


class ExecutorIn(InputModel):
    """How to launch an agent session (see :class:`ExecutorConfig`); ``env`` values are secret."""

    kind: Literal["command", "acp"] = "command"
    argv: Annotated[list[Arg], Field(max_length=MAX_ITEMS)] = Field(default_factory=list)
    env: Annotated[dict[EnvName, Arg], Field(max_length=MAX_ITEMS)] = Field(default_factory=dict)
    cwd: PathText | None = None
    timeout_s: float = Field(default=3600.0, gt=0, le=MAX_SESSION_S)
    inactivity_timeout_s: float = Field(default=600.0, gt=0, le=MAX_SESSION_S)
    stall_timeout_s: float = Field(default=300.0, gt=0, le=MAX_SESSION_S)
    pass_env: Annotated[list[EnvName], Field(max_length=MAX_ITEMS)] | None = None
    preset: Literal["claude", "codex", "gemini"] | None = None
    preset_args: Annotated[list[Arg], Field(max_length=MAX_ITEMS)] = Field(default_factory=list)

    def to_config(self, name: str, *, keep_env: dict[str, str] | None = None) -> ExecutorConfig:
        """The domain executor definition called ``name``.

        Args:
            name: the executor's name.
            keep_env: the current environment, kept when the client sent no ``env``.
        """
        env = dict(self.env)
        if "env" not in self.model_fields_set and keep_env is not None:
            env = dict(keep_env)
        config = ExecutorConfig(
            name=name,
            kind=self.kind,
            argv=tuple(self.argv),
            env=env,
            cwd=self.cwd,
            timeout_s=self.timeout_s,
            inactivity_timeout_s=self.inactivity_timeout_s,
            stall_timeout_s=self.stall_timeout_s,
            preset=self.preset,
            preset_args=tuple(self.preset_args),
        )
        if self.pass_env is None:
            return config
        return replace(config, pass_env=tuple(self.pass_env))


ExecutorMap = Annotated[dict[Name, ExecutorIn], Field(max_length=MAX_ITEMS)]


class SettingsPatch(InputModel):
    """Workspace settings to change; fields left out keep their current value.

    An executor sent without ``env`` keeps the environment it has (responses show only
    the keys, so a read-modify-write does not erase secrets).
    """

    coalesce_window_s: float | None = Field(default=None, ge=0, le=3600)
    recovery_lookback_hours: int | None = Field(default=None, ge=1, le=720)
    prompt_max_wakes: int | None = Field(default=None, ge=1, le=500)
    prompt_max_wake_bytes: int | None = Field(default=None, ge=1000, le=200_000)
    default_executor: Name | None = None
    executors: ExecutorMap | None = None

    def apply(self, current: WorkspaceSettings) -> WorkspaceSettings:
        """Return ``current`` with the sent fields replaced.

        Raises:
            InvalidInputError: an explicit ``null`` for a field that needs a value.
        """
        sent = self.changes(nullable=frozenset({"default_executor"}), prefix="settings.")
        window = current.coalesce_window
        if "coalesce_window_s" in sent:
            window = timedelta(seconds=sent["coalesce_window_s"])
        executors = current.executors
        if self.executors is not None:
            executors = {
                name: config.to_config(name, keep_env=_env_of(current.executors.get(name)))
                for name, config in self.executors.items()
            }
        return WorkspaceSettings(
            coalesce_window=window,
            recovery_lookback_hours=sent.get(
                "recovery_lookback_hours", current.recovery_lookback_hours
            ),
            prompt_max_wakes=sent.get("prompt_max_wakes", current.prompt_max_wakes),
            prompt_max_wake_bytes=sent.get("prompt_max_wake_bytes", current.prompt_max_wake_bytes),
            default_executor=sent.get("default_executor", current.default_executor),
            executors=executors,
        )


def _env_of(config: ExecutorConfig | None) -> dict[str, str] | None:
    return None if config is None else config.env


class SettingsIn(InputModel):
    """Workspace settings for a new workspace (defaults as documented in DESIGN §5)."""

    coalesce_window_s: float = Field(default=5.0, ge=0, le=3600)
    recovery_lookback_hours: int = Field(default=24, ge=1, le=720)
    prompt_max_wakes: int = Field(default=20, ge=1, le=500)
    prompt_max_wake_bytes: int = Field(default=12_000, ge=1000, le=200_000)
    default_executor: Name | None = None
    executors: ExecutorMap = Field(default_factory=dict)

    def to_settings(self) -> WorkspaceSettings:
        """The domain settings."""
        return WorkspaceSettings(
            coalesce_window=timedelta(seconds=self.coalesce_window_s),
            recovery_lookback_hours=self.recovery_lookback_hours,
            prompt_max_wakes=self.prompt_max_wakes,
            prompt_max_wake_bytes=self.prompt_max_wake_bytes,
            default_executor=self.default_executor,
            executors={name: config.to_config(name) for name, config in self.executors.items()},
        )


class WorkspaceCreate(InputModel):
    """``POST /api/v1/workspaces``."""

    name: Name
    description: Text = ""
    settings: SettingsIn = Field(default_factory=SettingsIn)


class WorkspacePatch(InputModel):
    """``PATCH /api/v1/workspaces/{id}``."""

    description: Text | None = None
    settings: SettingsPatch | None = None


class ProjectCreate(InputModel):
    """``POST /api/v1/workspaces/{id}/projects``."""

    name: Name
    description: Text = ""
    directory: PathText | None = None
    executor: Name | None = None
    repos: Annotated[list[PathText], Field(max_length=MAX_ITEMS)] = Field(default_factory=list)


class ProjectPatch(InputModel):
    """``PATCH /api/v1/projects/{id}``; ``null`` clears ``directory`` or ``executor``."""

    description: Text | None = None
    directory: PathText | None = None
    executor: Name | None = None
    repos: Annotated[list[PathText], Field(max_length=MAX_ITEMS)] | None = None

    NULLABLE: ClassVar[frozenset[str]] = frozenset({"directory", "executor"})


class AgentCreate(InputModel):
    """``POST /api/v1/workspaces/{id}/agents``; ``skip_idle_wakeups`` defaults by role."""

    name: Name
    role: AgentRole = AgentRole.WORKER
    status: AgentStatus = AgentStatus.IDLE
    instructions: Text = ""
    max_concurrent_sessions: int = Field(default=1, ge=1, le=100)
    cooldown_s: float = Field(default=10.0, ge=0, le=7 * 86_400)
    skip_idle_wakeups: StrictBool | None = None
    executor: Name | None = None
    reports_to: EntityId | None = None
    permission_policy: dict[str, Any] | None = None
    expected_run_cents: int | None = Field(default=None, ge=0, le=100_000_000)


class AgentPatch(InputModel):
    """``PATCH /api/v1/agents/{id}`` (pause: ``{"status": "paused"}``, resume: ``"idle"``).

    ``null`` clears ``executor``, ``reports_to``, ``permission_policy`` and
    ``expected_run_cents`` and resets
    ``skip_idle_wakeups`` to the role's default (so does a ``role`` change that does not
    set it). A status change goes through the same rules as
    ``POST /agents/{id}/pause|resume|stop``; ``working``/``pending_approval`` are 422.
    ``executor`` must name an executor of the workspace. ``skip_idle_wakeups`` takes JSON
    booleans only.
    """

    name: Name | None = None
    role: AgentRole | None = None
    status: AgentStatus | None = None
    instructions: Text | None = None
    max_concurrent_sessions: int | None = Field(default=None, ge=1, le=100)
    cooldown_s: float | None = Field(default=None, ge=0, le=7 * 86_400)
    skip_idle_wakeups: StrictBool | None = None
    executor: Name | None = None
    reports_to: EntityId | None = None
    permission_policy: dict[str, Any] | None = None
    expected_run_cents: int | None = Field(default=None, ge=0, le=100_000_000)

    NULLABLE: ClassVar[frozenset[str]] = frozenset(
        {"executor", "skip_idle_wakeups", "reports_to", "permission_policy", "expected_run_cents"}
    )


class WakeIn(InputModel):
    """``POST /api/v1/agents/{id}/wake``."""

    reason: Text | None = None
    payload: dict[str, Any] | None = None
    task_id: EntityId | None = None
    idempotency_key: Key | None = None


#: Most wakes one ``POST /api/v1/workspaces/{id}/wakes`` carries.
MAX_BATCH_WAKES = 500


class BatchWakeIn(WakeIn):
    """One wake of ``POST /api/v1/workspaces/{id}/wakes``: a single wake plus its agent."""

    agent_id: EntityId


class WakeBatchIn(InputModel):
    """``POST /api/v1/workspaces/{id}/wakes``: 1 to 500 wakes, written all or nothing."""

    wakes: Annotated[list[BatchWakeIn], Field(min_length=1, max_length=MAX_BATCH_WAKES)]


class TaskCreate(InputModel):
    """``POST /api/v1/workspaces/{id}/tasks``.

    ``workflow`` ``office`` (default) makes an Office task, which gets autonomous wakes;
    ``kanban`` makes an ordinary task (unless it is project-linked).
    """

    title: Title
    description: Text = ""
    project_id: EntityId | None = None
    parent_id: EntityId | None = None
    assignee_agent_id: EntityId | None = None
    state: TaskState = TaskState.TODO
    requires_approval: bool = False
    reviewers: IdList = Field(default_factory=list)
    approvers: IdList = Field(default_factory=list)
    executor: Name | None = None
    blocked_by: IdList = Field(default_factory=list)
    workflow: Literal["office", "kanban"] = "office"


class TaskPatch(InputModel):
    """``PATCH /api/v1/tasks/{id}``; ``null`` unassigns, clears the executor or the project."""

    title: Title | None = None
    description: Text | None = None
    state: TaskState | None = None
    assignee_agent_id: EntityId | None = None
    requires_approval: bool | None = None
    reviewers: IdList | None = None
    approvers: IdList | None = None
    executor: Name | None = None
    project_id: EntityId | None = None

    NULLABLE: ClassVar[frozenset[str]] = frozenset({"assignee_agent_id", "executor", "project_id"})


class BlockerIn(InputModel):
    """``POST /api/v1/tasks/{id}/blockers``."""

    blocker_task_id: EntityId


class CommentIn(InputModel):
    """``POST /api/v1/tasks/{id}/comments``."""

    body: Body


class ChannelMessageIn(InputModel):
    """``POST /api/v1/channels/{task_id}/messages``: a message from a chat integration."""

    text: Body
    author: Name
    channel: Annotated[str, Field(min_length=1, max_length=60)]

    @field_validator("text", "author", "channel")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class QueueRunIn(InputModel):
    """``POST /api/v1/runs``: queue a run for any task (ordinary kanban tasks included)."""

    task_id: EntityId
    agent_id: EntityId | None = None
    idempotency_key: Key | None = None
