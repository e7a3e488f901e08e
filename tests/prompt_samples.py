"""Domain records for prompt and summary unit tests (fixed ids and instants)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from office_scheduler.domain.models import (
    Agent,
    AgentSession,
    Comment,
    ContextEntry,
    ExecutorConfig,
    Project,
    Task,
    Workspace,
    WorkspaceSettings,
)
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    AuthorKind,
    TaskState,
    WakeSource,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def workspace(**fields: Any) -> Workspace:
    values: dict[str, Any] = {
        "id": "ws1",
        "name": "acme",
        "description": "Acme builds the company website.",
        "office_workflow_id": "wf-office",
        "routine_workflow_id": "wf-routine",
        "kanban_workflow_id": "wf-kanban",
        "settings": WorkspaceSettings(),
        "created_at": T0,
    }
    values.update(fields)
    return Workspace(**values)


def agent(**fields: Any) -> Agent:
    values: dict[str, Any] = {
        "id": "ag-ann",
        "workspace_id": "ws1",
        "name": "ann",
        "role": AgentRole.WORKER,
        "status": AgentStatus.IDLE,
        "instructions": "You build web pages. Always run the tests before you finish.",
        "max_concurrent_sessions": 1,
        "cooldown": timedelta(seconds=10),
        "skip_idle_wakeups": True,
        "executor": None,
        "last_wakeup_finished_at": None,
        "created_at": T0,
    }
    values.update(fields)
    return Agent(**values)


def project(**fields: Any) -> Project:
    values: dict[str, Any] = {
        "id": "pr1",
        "workspace_id": "ws1",
        "name": "site",
        "description": "The marketing site.",
        "directory": "/srv/site",
        "executor": None,
        "repos": ("git@example.com:acme/site.git",),
        "created_at": T0,
    }
    values.update(fields)
    return Project(**values)


def task(ident: str = "tk1", **fields: Any) -> Task:
    values: dict[str, Any] = {
        "id": ident,
        "workspace_id": "ws1",
        "workflow_id": "wf-office",
        "project_id": "pr1",
        "parent_id": None,
        "title": "Write the landing page",
        "description": "Hero, pricing table and a footer.",
        "state": TaskState.IN_PROGRESS,
        "assignee_agent_id": "ag-ann",
        "checkout_agent_id": None,
        "checkout_run_id": None,
        "checkout_at": None,
        "requires_approval": False,
        "reviewers": (),
        "approvers": (),
        "executor": None,
        "archived_at": None,
        "created_at": T0,
        "updated_at": T0,
        "is_office": True,
    }
    values.update(fields)
    return Task(**values)


def comment(ident: str, body: str, minutes: float, *, by: str | None = None) -> Comment:
    return Comment(
        id=ident,
        task_id="tk1",
        workspace_id="ws1",
        author_kind=AuthorKind.AGENT if by else AuthorKind.USER,
        author_agent_id=by,
        body=body,
        created_at=at(minutes),
    )


def wake(source: WakeSource, payload: dict[str, Any], request_id: int = 1) -> ContextEntry:
    return ContextEntry(
        request_id=request_id, source=source, payload=payload, requested_at=at(request_id)
    )


def session(**fields: Any) -> AgentSession:
    values: dict[str, Any] = {
        "id": "se1",
        "run_id": 7,
        "agent_id": "ag-ann",
        "task_id": "tk1",
        "executor": "claude",
        "external_session_id": "ext-123",
        "cwd": "/srv/site",
        "resumed_from": None,
        "created_at": T0,
    }
    values.update(fields)
    return AgentSession(**values)


def executor(**fields: Any) -> ExecutorConfig:
    values: dict[str, Any] = {"name": "claude", "kind": "acp", "argv": ("claude-code-acp",)}
    values.update(fields)
    return ExecutorConfig(**values)
