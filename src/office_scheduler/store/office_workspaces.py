"""Workspaces (with their workflows and settings) and projects of the office store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Project, Workspace, WorkspaceSettings
from office_scheduler.domain.status import WorkflowKind
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.office_common import office_task_clause, workspace_row
from office_scheduler.store.rows import (
    executor_to_json,
    project_from_row,
    settings_from_row,
    workspace_from_row,
)
from office_scheduler.store.schema import (
    projects,
    tasks,
    workflows,
    workspace_settings,
    workspaces,
)
from office_scheduler.store.sql import Row, all_rows, first_row, unique_conflict
from office_scheduler.store.validation import clean_text, optional_text, text_tuple

_WORKFLOW_NAMES = {
    WorkflowKind.KANBAN: "Kanban",
    WorkflowKind.OFFICE: "Office",
    WorkflowKind.ROUTINE: "Routines",
}
_PROJECT_CHANGES = frozenset({"description", "directory", "executor", "repos"})
#: Bounds of ``recovery_lookback_hours``; values outside are clamped on write.
MIN_LOOKBACK_HOURS = 1
MAX_LOOKBACK_HOURS = 720
#: Bounds of ``prompt_max_wakes`` and ``prompt_max_wake_bytes`` (checked on write).
PROMPT_MAX_WAKES_RANGE = (1, 500)
PROMPT_MAX_WAKE_BYTES_RANGE = (1_000, 200_000)


def _bounded(value: object, bounds: tuple[int, int], field: str) -> int:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{field} must be a whole number from {low} to {high}", field=field)
    return value


def _settings_values(settings: WorkspaceSettings) -> dict[str, Any]:
    if settings.coalesce_window.total_seconds() < 0:
        raise InvalidInputError("coalesce window must not be negative", field="coalesce_window_s")
    lookback = settings.recovery_lookback_hours
    if isinstance(lookback, bool) or not isinstance(lookback, int):
        raise InvalidInputError(
            "recovery lookback must be a whole number of hours", field="recovery_lookback_hours"
        )
    executors = {}
    for name, config in settings.executors.items():
        data = executor_to_json(config)
        data.pop("name", None)
        executors[name] = data
    return {
        "coalesce_window_s": settings.coalesce_window.total_seconds(),
        # Clamped on write to 1..720 hours (specification "Recovery sweep").
        "recovery_lookback_hours": min(max(lookback, MIN_LOOKBACK_HOURS), MAX_LOOKBACK_HOURS),
        "prompt_max_wakes": _bounded(
            settings.prompt_max_wakes, PROMPT_MAX_WAKES_RANGE, "prompt_max_wakes"
        ),
        "prompt_max_wake_bytes": _bounded(
            settings.prompt_max_wake_bytes, PROMPT_MAX_WAKE_BYTES_RANGE, "prompt_max_wake_bytes"
        ),
        "default_executor": settings.default_executor,
        "executors": executors,
    }


_SETTINGS_OF = sa.select(workspace_settings).where(
    workspace_settings.c.workspace_id == sa.bindparam("workspace_id")
)
#: A workspace row joined with its settings row (their column names do not overlap).
_WORKSPACE_WITH_SETTINGS = (
    sa.select(workspaces, workspace_settings)
    .select_from(workspaces.outerjoin(workspace_settings))
    .where(workspaces.c.id == sa.bindparam("workspace_id"))
)


def coalesce_window_of(seconds: float | None) -> timedelta:
    """A stored ``coalesce_window_s`` as a hold (a workspace without settings: the default)."""
    return WorkspaceSettings().coalesce_window if seconds is None else timedelta(seconds=seconds)


_COALESCE_WINDOW = (
    sa.select(workspaces.c.id, workspace_settings.c.coalesce_window_s)
    .select_from(workspaces.outerjoin(workspace_settings))
    .where(workspaces.c.id == sa.bindparam("workspace_id"))
)


def _load_workspace(conn: Connection, row: Row) -> Workspace:
    settings = first_row(conn, _SETTINGS_OF, {"workspace_id": row["id"]})
    return workspace_from_row(row, settings_from_row(settings))


def _project_row(conn: Connection, project_id: str) -> Row:
    row = first_row(conn, sa.select(projects).where(projects.c.id == project_id))
    if row is None:
        raise NotFoundError(f"project {project_id} not found", field="project_id")
    return row


def _project_name_taken(conn: Connection, workspace_id: str, name: str) -> bool:
    query = sa.select(projects.c.id).where(
        projects.c.workspace_id == workspace_id, projects.c.name == name
    )
    return conn.execute(query).first() is not None


class WorkspaceMethods:
    """Workspace and project methods of :class:`~office_scheduler.store.office.OfficeStore`."""

    _db: Database

    def create_workspace(
        self,
        *,
        name: str,
        description: str = "",
        settings: WorkspaceSettings,
        now: datetime,
    ) -> Workspace:
        """Create a workspace with its three workflows and its settings, in one transaction.

        Returns:
            The new workspace.

        Raises:
            InvalidInputError: blank name (``name``) or invalid settings.
            ConflictError: a workspace of that name exists (field ``name``).
        """
        name = clean_text(name, field="name")
        description = clean_text(description, field="description", required=False)
        values = _settings_values(settings)
        workspace_id = new_id()
        flow_ids = {kind: new_id() for kind in WorkflowKind}
        message = f"a workspace named {name!r} already exists"
        with unique_conflict(field="name", message=message), self._db.write() as conn:
            taken = sa.select(workspaces.c.id).where(workspaces.c.name == name)
            if conn.execute(taken).first() is not None:
                raise ConflictError(message, field="name")
            conn.execute(
                sa.insert(workspaces).values(
                    id=workspace_id,
                    name=name,
                    description=description,
                    office_workflow_id=flow_ids[WorkflowKind.OFFICE],
                    routine_workflow_id=flow_ids[WorkflowKind.ROUTINE],
                    kanban_workflow_id=flow_ids[WorkflowKind.KANBAN],
                    created_at=now,
                )
            )
            conn.execute(
                sa.insert(workflows),
                [
                    {
                        "id": flow_id,
                        "workspace_id": workspace_id,
                        "kind": kind.value,
                        "name": _WORKFLOW_NAMES[kind],
                        "created_at": now,
                    }
                    for kind, flow_id in flow_ids.items()
                ],
            )
            conn.execute(
                sa.insert(workspace_settings).values(
                    workspace_id=workspace_id, updated_at=now, **values
                )
            )
            return _load_workspace(conn, workspace_row(conn, workspace_id))

    def get_workspace(self, workspace_id: str) -> Workspace:
        """Return the workspace ``workspace_id`` (one statement: the pipeline reads it per run).

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        with self._db.read() as conn:
            row = first_row(conn, _WORKSPACE_WITH_SETTINGS, {"workspace_id": workspace_id})
        if row is None:
            raise NotFoundError(f"workspace {workspace_id} not found", field="workspace_id")
        settings = row if row["workspace_id"] is not None else None
        return workspace_from_row(row, settings_from_row(settings))

    def coalesce_window(self, workspace_id: str) -> timedelta:
        """The workspace's coalescing hold (one small query: intake reads it on every wake).

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        with self._db.read() as conn:
            row = conn.execute(_COALESCE_WINDOW, {"workspace_id": workspace_id}).first()
        if row is None:
            raise NotFoundError(f"workspace {workspace_id} not found", field="workspace_id")
        return coalesce_window_of(row.coalesce_window_s)

    def find_workspace_by_name(self, name: str) -> Workspace | None:
        """Return the workspace called ``name``, or ``None``."""
        with self._db.read() as conn:
            row = first_row(conn, sa.select(workspaces).where(workspaces.c.name == name))
            return None if row is None else _load_workspace(conn, row)

    def list_workspaces(self) -> list[Workspace]:
        """Return every workspace, ordered by name."""
        with self._db.read() as conn:
            rows = all_rows(conn, sa.select(workspaces).order_by(workspaces.c.name))
            return [_load_workspace(conn, row) for row in rows]

    def update_workspace(
        self,
        workspace_id: str,
        *,
        now: datetime,
        description: str | None = None,
        settings: WorkspaceSettings | None = None,
    ) -> Workspace:
        """Change a workspace's description and/or replace its settings.

        Returns:
            The workspace after the change (``None`` arguments are left unchanged).

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
            InvalidInputError: invalid settings.
        """
        values = None if settings is None else _settings_values(settings)
        with self._db.write() as conn:
            workspace_row(conn, workspace_id)
            if description is not None:
                text = clean_text(description, field="description", required=False)
                conn.execute(
                    sa.update(workspaces)
                    .where(workspaces.c.id == workspace_id)
                    .values(description=text)
                )
            if values is not None:
                changed = conn.execute(
                    sa.update(workspace_settings)
                    .where(workspace_settings.c.workspace_id == workspace_id)
                    .values(updated_at=now, **values)
                ).rowcount
                if changed == 0:
                    conn.execute(
                        sa.insert(workspace_settings).values(
                            workspace_id=workspace_id, updated_at=now, **values
                        )
                    )
            return _load_workspace(conn, workspace_row(conn, workspace_id))

    def office_adopted(self) -> bool:
        """Return whether any workspace has adopted Office.

        Returns:
            True when some task, archived or not, is project-linked or on its workspace's
            office workflow.
        """
        query = (
            sa.select(tasks.c.id)
            .join_from(tasks, workspaces, tasks.c.workspace_id == workspaces.c.id)
            .where(office_task_clause())
            .limit(1)
        )
        with self._db.read() as conn:
            return conn.execute(query).first() is not None

    def create_project(
        self,
        *,
        workspace_id: str,
        name: str,
        now: datetime,
        description: str = "",
        directory: str | None = None,
        executor: str | None = None,
        repos: Sequence[str] = (),
    ) -> Project:
        """Create a project in a workspace.

        Returns:
            The new project.

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
            InvalidInputError: a blank name or malformed field (named in ``field``).
            ConflictError: the workspace has a project of that name (field ``name``).
        """
        values: dict[str, Any] = {
            "name": clean_text(name, field="name"),
            "description": clean_text(description, field="description", required=False),
            "directory": optional_text(directory, field="directory"),
            "executor": optional_text(executor, field="executor"),
            "repos": list(text_tuple(repos, field="repos")),
        }
        project_id = new_id()
        message = f"a project named {values['name']!r} already exists in this workspace"
        with unique_conflict(field="name", message=message), self._db.write() as conn:
            workspace_row(conn, workspace_id)
            if _project_name_taken(conn, workspace_id, values["name"]):
                raise ConflictError(message, field="name")
            conn.execute(
                sa.insert(projects).values(
                    id=project_id, workspace_id=workspace_id, created_at=now, **values
                )
            )
            return project_from_row(_project_row(conn, project_id))

    def get_project(self, project_id: str) -> Project:
        """Return the project ``project_id``.

        Raises:
            NotFoundError: no such project (field ``project_id``).
        """
        with self._db.read() as conn:
            return project_from_row(_project_row(conn, project_id))

    def find_project_by_name(self, workspace_id: str, name: str) -> Project | None:
        """Return the project called ``name`` in ``workspace_id``, or ``None``."""
        query = sa.select(projects).where(
            projects.c.workspace_id == workspace_id, projects.c.name == name
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
            return None if row is None else project_from_row(row)

    def list_projects(self, workspace_id: str) -> list[Project]:
        """Return the projects of ``workspace_id``, ordered by name (empty for no workspace)."""
        query = (
            sa.select(projects)
            .where(projects.c.workspace_id == workspace_id)
            .order_by(projects.c.name)
        )
        with self._db.read() as conn:
            return [project_from_row(row) for row in all_rows(conn, query)]

    def update_project(self, project_id: str, *, now: datetime, **changes: object) -> Project:
        """Change a project's ``description``, ``directory``, ``executor`` and/or ``repos``.

        Returns:
            The project after the change.

        Raises:
            NotFoundError: no such project (field ``project_id``).
            InvalidInputError: an unknown or malformed change (``field`` names the key).
        """
        values: dict[str, Any] = {}
        for key, value in changes.items():
            if key not in _PROJECT_CHANGES:
                raise InvalidInputError(f"unknown project field {key!r}", field=key)
            if key == "description":
                values[key] = clean_text(value, field=key, required=False)
            elif key == "repos":
                values[key] = list(text_tuple(value, field=key))
            else:
                values[key] = optional_text(value, field=key)
        with self._db.write() as conn:
            _project_row(conn, project_id)
            if values:
                conn.execute(
                    sa.update(projects).where(projects.c.id == project_id).values(**values)
                )
            return project_from_row(_project_row(conn, project_id))
