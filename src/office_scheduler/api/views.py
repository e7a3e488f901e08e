"""Response models of the HTTP API and their construction from domain records.

Domain dataclasses are never serialised directly: each response names exactly what it
shows. Instants are ISO-8601 UTC with ``Z``; enums are their string values; token hashes
never appear and executors show only the *names* of their environment variables.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, PlainSerializer, WithJsonSchema

from office_scheduler.domain.models import (
    Agent,
    ExecutorConfig,
    Run,
    WakeupRequest,
    Workspace,
    WorkspaceSettings,
)
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    AuthorKind,
    Classification,
    InboxKind,
    InboxStatus,
    IntakeOutcome,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.store.pagination import Page
from office_scheduler.store.queue import IntakeResult

T = TypeVar("T")


def iso_z(value: datetime) -> str:
    """Format an aware instant as ISO-8601 UTC with a ``Z`` suffix."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


Timestamp = Annotated[
    datetime,
    PlainSerializer(iso_z, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class View(BaseModel):
    """Base of responses; built from domain records by attribute."""

    model_config = ConfigDict(from_attributes=True)


class ListOut(BaseModel, Generic[T]):
    """A page of a listing; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None = None


class ErrorBody(BaseModel):
    """What went wrong; ``field`` names the input at fault, when one is."""

    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    """Every 4xx/5xx response body."""

    error: ErrorBody


class ExecutorOut(View):
    """An executor definition; ``env_keys`` lists the variables it sets (values are secret)."""

    name: str
    kind: str
    argv: list[str]
    env_keys: list[str]
    cwd: str | None
    timeout_s: float
    inactivity_timeout_s: float
    stall_timeout_s: float = 300.0
    pass_env: list[str]
    preset: str | None = None
    preset_args: list[str] = []

    @classmethod
    def of(cls, config: ExecutorConfig) -> ExecutorOut:
        """The view of ``config`` (without the environment's values)."""
        return cls(
            name=config.name,
            kind=config.kind,
            argv=list(config.argv),
            env_keys=sorted(config.env),
            cwd=config.cwd,
            timeout_s=config.timeout_s,
            inactivity_timeout_s=config.inactivity_timeout_s,
            stall_timeout_s=config.stall_timeout_s,
            pass_env=list(config.pass_env),
            preset=config.preset,
            preset_args=list(config.preset_args),
        )


class SettingsOut(View):
    """A workspace's scheduling settings."""

    coalesce_window_s: float
    recovery_lookback_hours: int
    prompt_max_wakes: int
    prompt_max_wake_bytes: int
    default_executor: str | None
    executors: dict[str, ExecutorOut]

    @classmethod
    def of(cls, settings: WorkspaceSettings) -> SettingsOut:
        """The view of ``settings``."""
        return cls(
            coalesce_window_s=settings.coalesce_window.total_seconds(),
            recovery_lookback_hours=settings.recovery_lookback_hours,
            prompt_max_wakes=settings.prompt_max_wakes,
            prompt_max_wake_bytes=settings.prompt_max_wake_bytes,
            default_executor=settings.default_executor,
            executors={name: ExecutorOut.of(cfg) for name, cfg in settings.executors.items()},
        )


class WorkspaceOut(View):
    """A workspace."""

    id: str
    name: str
    description: str
    office_workflow_id: str
    kanban_workflow_id: str
    settings: SettingsOut
    created_at: Timestamp

    @classmethod
    def of(cls, workspace: Workspace) -> WorkspaceOut:
        """The view of ``workspace``."""
        return cls(
            id=workspace.id,
            name=workspace.name,
            description=workspace.description,
            office_workflow_id=workspace.office_workflow_id,
            kanban_workflow_id=workspace.kanban_workflow_id,
            settings=SettingsOut.of(workspace.settings),
            created_at=workspace.created_at,
        )


class ProjectOut(View):
    """A project."""

    id: str
    workspace_id: str
    name: str
    description: str
    directory: str | None
    executor: str | None
    repos: list[str]
    created_at: Timestamp


class AgentOut(View):
    """An agent."""

    id: str
    workspace_id: str
    name: str
    role: AgentRole
    status: AgentStatus
    instructions: str
    max_concurrent_sessions: int
    cooldown_s: float
    skip_idle_wakeups: bool
    executor: str | None
    reports_to: str | None
    paused_reason: str | None
    permission_policy: dict[str, Any] | None
    expected_run_cents: int | None
    last_wakeup_finished_at: Timestamp | None
    created_at: Timestamp

    @classmethod
    def of(cls, agent: Agent) -> AgentOut:
        """The view of ``agent``."""
        return cls(
            id=agent.id,
            workspace_id=agent.workspace_id,
            name=agent.name,
            role=agent.role,
            status=agent.status,
            instructions=agent.instructions,
            max_concurrent_sessions=agent.max_concurrent_sessions,
            cooldown_s=agent.cooldown.total_seconds(),
            skip_idle_wakeups=agent.skip_idle_wakeups,
            executor=agent.executor,
            reports_to=agent.reports_to,
            paused_reason=agent.paused_reason,
            permission_policy=agent.permission_policy,
            expected_run_cents=agent.expected_run_cents,
            last_wakeup_finished_at=agent.last_wakeup_finished_at,
            created_at=agent.created_at,
        )


class TaskOut(View):
    """A task; ``is_office`` tells whether it gets autonomous wakes."""

    id: str
    workspace_id: str
    workflow_id: str
    project_id: str | None
    parent_id: str | None
    title: str
    description: str
    state: TaskState
    assignee_agent_id: str | None
    checkout_agent_id: str | None
    checkout_run_id: int | None
    checkout_at: Timestamp | None
    requires_approval: bool
    reviewers: list[str]
    approvers: list[str]
    executor: str | None
    blocked_by: list[str]
    is_office: bool
    archived_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp


class TaskDetailOut(TaskOut):
    """A task with the ids of its subtasks and the number of its comments."""

    children: list[str]
    comments_count: int


class CommentOut(View):
    """A comment on a task."""

    id: str
    task_id: str
    workspace_id: str
    author_kind: AuthorKind
    author_agent_id: str | None
    body: str
    channel: str | None = None
    external_author: str | None = None
    created_at: Timestamp


class WakeupOut(View):
    """A wakeup request: why an agent was woken and which run it created or joined."""

    id: int
    workspace_id: str
    agent_id: str
    task_id: str | None
    source: WakeSource
    classification: Classification
    payload: dict[str, Any]
    idempotency_key: str | None
    status: WakeupStatus
    status_reason: str | None
    run_id: int | None
    requested_at: Timestamp
    caused_by_run_id: int | None = None
    causation_depth: int = 0
    human_rooted: bool = False


class RunOut(View):
    """A run (the prompt is shown by ``GET /api/v1/runs/{id}`` only).

    Its merged wakes are the wakeup requests with its ``run_id`` (``coalesced_count`` of
    them): a page of them comes with ``GET /api/v1/runs/{id}``, all of them, paged, from
    ``GET /api/v1/wakeups?run_id=``.
    """

    id: int
    workspace_id: str
    agent_id: str
    task_id: str | None
    source: WakeSource
    classification: Classification
    status: RunStatus
    reason: RunReason | None
    error: str | None
    idempotency_key: str | None
    context_version: int
    coalesced_count: int
    requested_at: Timestamp
    not_before: Timestamp
    claimed_at: Timestamp | None
    claimed_by: str | None
    lease_expires_at: Timestamp | None
    started_at: Timestamp | None
    finished_at: Timestamp | None
    retry_count: int
    #: Launches so far (0 before the first); each launch is an attempt with its own token.
    attempt: int = 0
    executor: str | None
    result: dict[str, Any] | None
    usage: dict[str, Any] | None
    pid: int | None
    exit_code: int | None
    session_id: str | None
    #: The run whose action caused this run (DESIGN §15); ``None`` at a chain's root.
    caused_by_run_id: int | None = None
    causation_depth: int = 0
    human_rooted: bool = False


class RunEventOut(View):
    """One line of a run's event log."""

    id: int
    run_id: int
    at: Timestamp
    kind: str
    message: str
    data: dict[str, Any]


class RunDetailOut(RunOut):
    """A run with its prompt, its event log and one page of its merged wakes.

    Attributes:
        wakes: the newest of the run's merged wakes first (a page; ``wakes_next_cursor``
            continues it, as ``wakes_cursor``).
        wakes_next_cursor: the cursor of the next page of wakes, ``None`` on the last.
    """

    prompt: str | None
    #: ``full`` (the whole wake prompt) or ``delta`` (what is new for a resumed session).
    prompt_kind: str | None = None
    events: list[RunEventOut]
    wakes: list[WakeupOut] = []
    wakes_next_cursor: str | None = None


class IntakeOut(BaseModel):
    """What a wake or queue-run request did: the request, its run, and the outcome."""

    wakeup: WakeupOut
    run_id: int | None
    outcome: IntakeOutcome

    @classmethod
    def of(cls, result: IntakeResult) -> IntakeOut:
        """The view of an intake result."""
        return cls(
            wakeup=WakeupOut.model_validate(result.request),
            run_id=None if result.run is None else result.run.id,
            outcome=result.outcome,
        )


class ActivityOut(View):
    """An activity-log entry; ``actor`` is ``system``, ``user`` or ``agent:<id>``."""

    id: int
    workspace_id: str
    at: Timestamp
    kind: str
    actor: str
    agent_id: str | None
    task_id: str | None
    run_id: int | None
    message: str
    data: dict[str, Any]


class InboxOut(View):
    """An inbox item for the people of a workspace."""

    id: int
    workspace_id: str
    kind: InboxKind
    status: InboxStatus
    title: str
    body: str
    data: dict[str, Any]
    agent_id: str | None
    task_id: str | None
    approval_id: str | None
    created_at: Timestamp
    resolved_at: Timestamp | None


class HealthOut(BaseModel):
    """``GET /healthz``."""

    status: str
    database: str
    loops: dict[str, Any]
    node_id: str | None = None
    role: str | None = None
    maintenance_leader: bool | None = None
    leader: dict[str, Any] | None = None


def run_detail(
    run: Run, events: list[RunEventOut], wakes: Page[WakeupRequest] | None = None
) -> RunDetailOut:
    """The detailed view of a run with its events and a page of its merged wakes."""
    base = dict(RunOut.model_validate(run))
    return RunDetailOut(
        **base,
        prompt=run.prompt,
        prompt_kind=run.prompt_kind,
        events=events,
        wakes=[WakeupOut.model_validate(w) for w in wakes.items] if wakes else [],
        wakes_next_cursor=wakes.next_cursor if wakes else None,
    )
