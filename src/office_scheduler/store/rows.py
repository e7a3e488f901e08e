"""Row ↔ domain record mapping: the one place that knows both shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from office_scheduler.domain.models import (
    ActivityEntry,
    Agent,
    AgentSession,
    ApiToken,
    Approval,
    Comment,
    ExecutorConfig,
    InboxItem,
    Project,
    Run,
    RunEvent,
    Task,
    WakeupRequest,
    Workspace,
    WorkspaceSettings,
)
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    ApprovalKind,
    ApprovalStatus,
    AuthorKind,
    Classification,
    InboxKind,
    InboxStatus,
    RunReason,
    RunStatus,
    TaskState,
    TokenKind,
    WakeSource,
    WakeupStatus,
)

Row = Mapping[Any, Any]


def executor_to_json(config: ExecutorConfig) -> dict[str, Any]:
    """Serialise an executor definition (tuples become lists)."""
    data = asdict(config)
    data["argv"] = list(config.argv)
    data["pass_env"] = list(config.pass_env)
    data["preset_args"] = list(config.preset_args)
    return data


def executor_from_json(data: Mapping[str, Any]) -> ExecutorConfig:
    """Build an executor definition from its stored JSON."""
    values = dict(data)
    values["argv"] = tuple(values.get("argv", ()))
    if "pass_env" in values:
        values["pass_env"] = tuple(values["pass_env"])
    values["preset_args"] = tuple(values.get("preset_args", ()))
    values["env"] = dict(values.get("env", {}))
    return ExecutorConfig(**values)


def settings_from_row(row: Row | None) -> WorkspaceSettings:
    """Workspace settings from a ``workspace_settings`` row (defaults when absent)."""
    if row is None:
        return WorkspaceSettings()
    executors = {
        name: executor_from_json({**cfg, "name": name})
        for name, cfg in (row["executors"] or {}).items()
    }
    return WorkspaceSettings(
        coalesce_window=timedelta(seconds=row["coalesce_window_s"]),
        recovery_lookback_hours=row["recovery_lookback_hours"],
        prompt_max_wakes=row["prompt_max_wakes"],
        prompt_max_wake_bytes=row["prompt_max_wake_bytes"],
        default_executor=row["default_executor"],
        executors=executors,
    )


def workspace_from_row(row: Row, settings: WorkspaceSettings) -> Workspace:
    """A workspace from its row and settings."""
    return Workspace(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        office_workflow_id=row["office_workflow_id"],
        routine_workflow_id=row["routine_workflow_id"],
        kanban_workflow_id=row["kanban_workflow_id"],
        settings=settings,
        created_at=row["created_at"],
    )


def project_from_row(row: Row) -> Project:
    """A project from its row."""
    return Project(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        description=row["description"],
        directory=row["directory"],
        executor=row["executor"],
        repos=tuple(row["repos"] or ()),
        created_at=row["created_at"],
    )


def agent_from_row(row: Row) -> Agent:
    """An agent from its row."""
    return Agent(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        role=AgentRole(row["role"]),
        status=AgentStatus(row["status"]),
        instructions=row["instructions"],
        max_concurrent_sessions=row["max_concurrent_sessions"],
        cooldown=timedelta(seconds=row["cooldown_s"]),
        skip_idle_wakeups=bool(row["skip_idle_wakeups"]),
        executor=row["executor"],
        last_wakeup_finished_at=row["last_wakeup_finished_at"],
        created_at=row["created_at"],
        reports_to=row["reports_to"],
        paused_reason=row["paused_reason"],
        permission_policy=row["permission_policy"],
        imported_status=(
            None if row["imported_status"] is None else AgentStatus(row["imported_status"])
        ),
        expected_run_cents=row["expected_run_cents"],
    )


def task_from_row(row: Row, *, is_office: bool, blocked_by: Sequence[str] = ()) -> Task:
    """A task from its row; the caller computes the Office predicate and blockers."""
    return Task(
        id=row["id"],
        workspace_id=row["workspace_id"],
        workflow_id=row["workflow_id"],
        project_id=row["project_id"],
        parent_id=row["parent_id"],
        title=row["title"],
        description=row["description"],
        state=TaskState(row["state"]),
        assignee_agent_id=row["assignee_agent_id"],
        checkout_agent_id=row["checkout_agent_id"],
        checkout_run_id=row["checkout_run_id"],
        checkout_at=row["checkout_at"],
        requires_approval=bool(row["requires_approval"]),
        reviewers=tuple(row["reviewers"] or ()),
        approvers=tuple(row["approvers"] or ()),
        executor=row["executor"],
        archived_at=row["archived_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        is_office=is_office,
        blocked_by=tuple(blocked_by),
    )


def comment_from_row(row: Row) -> Comment:
    """A comment from its row."""
    return Comment(
        id=row["id"],
        task_id=row["task_id"],
        workspace_id=row["workspace_id"],
        author_kind=AuthorKind(row["author_kind"]),
        author_agent_id=row["author_agent_id"],
        body=row["body"],
        created_at=row["created_at"],
        channel=row["channel"],
        external_author=row["external_author"],
    )


def wakeup_from_row(row: Row) -> WakeupRequest:
    """A wakeup request from its row."""
    return WakeupRequest(
        id=row["id"],
        workspace_id=row["workspace_id"],
        agent_id=row["agent_id"],
        task_id=row["task_id"],
        source=WakeSource(row["source"]),
        classification=Classification(row["classification"]),
        payload=dict(row["payload"] or {}),
        idempotency_key=row["idempotency_key"],
        status=WakeupStatus(row["status"]),
        status_reason=row["status_reason"],
        run_id=row["run_id"],
        requested_at=row["requested_at"],
        caused_by_run_id=row.get("caused_by_run_id"),
        causation_depth=row.get("causation_depth") or 0,
        human_rooted=bool(row.get("human_rooted")),
    )


def run_from_row(row: Row) -> Run:
    """A run from its row."""
    return Run(
        id=row["id"],
        workspace_id=row["workspace_id"],
        agent_id=row["agent_id"],
        task_id=row["task_id"],
        source=WakeSource(row["source"]),
        classification=Classification(row["classification"]),
        status=RunStatus(row["status"]),
        reason=RunReason(row["reason"]) if row["reason"] else None,
        error=row["error"],
        idempotency_key=row["idempotency_key"],
        context_version=row["context_version"],
        coalesced_count=row["coalesced_count"],
        requested_at=row["requested_at"],
        not_before=row["not_before"],
        claimed_at=row["claimed_at"],
        claimed_by=row["claimed_by"],
        lease_expires_at=row["lease_expires_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        retry_count=row["retry_count"],
        executor=row["executor"],
        prompt=row["prompt"],
        result=row["result"],
        usage=row["usage"],
        pid=row["pid"],
        exit_code=row["exit_code"],
        session_id=row["session_id"],
        prompt_kind=row.get("prompt_kind"),
        attempt=row.get("attempt", 0),
        caused_by_run_id=row.get("caused_by_run_id"),
        causation_depth=row.get("causation_depth") or 0,
        human_rooted=bool(row.get("human_rooted")),
    )


def run_event_from_row(row: Row) -> RunEvent:
    """A run event from its row."""
    return RunEvent(
        id=row["id"],
        run_id=row["run_id"],
        at=row["at"],
        kind=row["kind"],
        message=row["message"],
        data=dict(row["data"] or {}),
    )


def session_from_row(row: Row) -> AgentSession:
    """An agent session from its row."""
    return AgentSession(
        id=row["id"],
        run_id=row["run_id"],
        agent_id=row["agent_id"],
        task_id=row["task_id"],
        executor=row["executor"],
        external_session_id=row["external_session_id"],
        cwd=row["cwd"],
        resumed_from=row["resumed_from"],
        created_at=row["created_at"],
    )


def inbox_from_row(row: Row) -> InboxItem:
    """An inbox item from its row."""
    return InboxItem(
        id=row["id"],
        workspace_id=row["workspace_id"],
        kind=InboxKind(row["kind"]),
        status=InboxStatus(row["status"]),
        title=row["title"],
        body=row["body"],
        data=dict(row["data"] or {}),
        created_at=row["created_at"],
        resolved_at=row["resolved_at"],
        agent_id=row["agent_id"],
        task_id=row["task_id"],
        approval_id=row["approval_id"],
        dedupe_key=row["dedupe_key"],
    )


def activity_from_row(row: Row) -> ActivityEntry:
    """An activity entry from its row."""
    return ActivityEntry(
        id=row["id"],
        workspace_id=row["workspace_id"],
        at=row["at"],
        kind=row["kind"],
        agent_id=row["agent_id"],
        task_id=row["task_id"],
        run_id=row["run_id"],
        message=row["message"],
        data=dict(row["data"] or {}),
        actor=row["actor"],
    )


def token_from_row(row: Row) -> ApiToken:
    """An API token record from its row (the hash stays in the store)."""
    return ApiToken(
        id=row["id"],
        kind=TokenKind(row["kind"]),
        name=row["name"],
        workspace_id=row["workspace_id"],
        agent_id=row["agent_id"],
        run_id=row["run_id"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        attempt=row.get("attempt"),
    )


def approval_from_row(row: Row) -> Approval:
    """An approval from its row."""
    return Approval(
        id=row["id"],
        workspace_id=row["workspace_id"],
        kind=ApprovalKind(row["kind"]),
        status=ApprovalStatus(row["status"]),
        title=row["title"],
        body=row["body"],
        task_id=row["task_id"],
        requested_by_agent_id=row["requested_by_agent_id"],
        decision_note=row["decision_note"],
        decided_by=row["decided_by"],
        created_at=row["created_at"],
        resolved_at=row["resolved_at"],
    )
