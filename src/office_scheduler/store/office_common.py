"""Shared pieces of the office store: the Office task predicate, task loading, lookups.

Everything here runs on the connection of one office store method's transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import Task
from office_scheduler.store.rows import task_from_row
from office_scheduler.store.schema import task_blockers, tasks, workspaces
from office_scheduler.store.sql import Row, all_rows, first_row


def office_task_clause() -> sa.ColumnElement[bool]:
    """The Office predicate of a task row joined with its workspace row.

    Returns:
        ``project_id IS NOT NULL`` or the task is on the workspace's ``office`` or ``routine``
        workflow (a heavy routine's task starts a run for its assignee like any Office task).
    """
    return sa.or_(
        tasks.c.project_id.is_not(None),
        tasks.c.workflow_id == workspaces.c.office_workflow_id,
        tasks.c.workflow_id == workspaces.c.routine_workflow_id,
    )


def task_select() -> sa.Select[Any]:
    """Select every task column plus the computed ``is_office`` flag."""
    return sa.select(tasks, office_task_clause().label("is_office")).join_from(
        tasks, workspaces, tasks.c.workspace_id == workspaces.c.id
    )


_BLOCKERS_OF = (
    sa.select(task_blockers.c.task_id, task_blockers.c.blocker_task_id)
    .where(task_blockers.c.task_id.in_(sa.bindparam("task_ids", expanding=True)))
    .order_by(task_blockers.c.task_id, task_blockers.c.blocker_task_id)
)


def blockers_by_task(conn: Connection, task_ids: Sequence[str]) -> dict[str, list[str]]:
    """All blocker ids of each of ``task_ids``, sorted."""
    found: dict[str, list[str]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return found
    rows = conn.execute(_BLOCKERS_OF, {"task_ids": list(task_ids)})
    for task_id, blocker_id in rows:
        found[task_id].append(blocker_id)
    return found


def load_tasks(
    conn: Connection, query: sa.Select[Any], params: dict[str, Any] | None = None
) -> list[Task]:
    """Run a :func:`task_select` query (with bound ``params``) and build the tasks."""
    rows = all_rows(conn, query, params)
    blockers = blockers_by_task(conn, [row["id"] for row in rows])
    return [
        task_from_row(row, is_office=bool(row["is_office"]), blocked_by=blockers[row["id"]])
        for row in rows
    ]


_TASK_BY_ID = task_select().where(tasks.c.id == sa.bindparam("task_id"))
_TASK_EXISTS = sa.select(tasks.c.id).where(tasks.c.id == sa.bindparam("task_id"))
_WORKSPACE_BY_ID = sa.select(workspaces).where(workspaces.c.id == sa.bindparam("workspace_id"))


def find_task_in(conn: Connection, task_id: str) -> Task | None:
    """The task ``task_id``, or ``None``."""
    found = load_tasks(conn, _TASK_BY_ID, {"task_id": task_id})
    return found[0] if found else None


def require_task(conn: Connection, task_id: str, *, field: str = "task_id") -> None:
    """Check that task ``task_id`` exists (one index probe, nothing loaded).

    Raises:
        NotFoundError: no such task, naming ``field``.
    """
    if conn.execute(_TASK_EXISTS, {"task_id": task_id}).first() is None:
        raise NotFoundError(f"task {task_id} not found", field=field)


def get_task_in(conn: Connection, task_id: str, *, field: str = "task_id") -> Task:
    """The task ``task_id``; raises :class:`NotFoundError` naming ``field`` when missing."""
    task = find_task_in(conn, task_id)
    if task is None:
        raise NotFoundError(f"task {task_id} not found", field=field)
    return task


def ids_in_workspace(
    conn: Connection, table: sa.Table, workspace_id: str, ids: Collection[str]
) -> set[str]:
    """Which of ``ids`` are rows of ``table`` (agents, tasks...) in ``workspace_id``."""
    if not ids:
        return set()
    query = sa.select(table.c.id).where(
        table.c.workspace_id == workspace_id, table.c.id.in_(list(ids))
    )
    return {str(row_id) for row_id in conn.execute(query).scalars()}


def workspace_row(conn: Connection, workspace_id: str) -> Row:
    """The workspace row; raises :class:`NotFoundError` (field ``workspace_id``) when missing."""
    found = first_row(conn, _WORKSPACE_BY_ID, {"workspace_id": workspace_id})
    if found is None:
        raise NotFoundError(f"workspace {workspace_id} not found", field="workspace_id")
    return found


def require_in_workspace(
    conn: Connection, table: sa.Table, ids: Iterable[str], *, workspace_id: str, field: str
) -> None:
    """Check that every id of ``ids`` is a row of ``table`` in ``workspace_id``.

    Raises:
        NotFoundError: naming ``field``, for the first id that is missing or elsewhere.
    """
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return
    present = set(
        conn.execute(
            sa.select(table.c.id).where(
                table.c.id.in_(wanted), table.c.workspace_id == workspace_id
            )
        ).scalars()
    )
    for item_id in wanted:
        if item_id not in present:
            raise NotFoundError(
                f"{field} {item_id} not found in workspace {workspace_id}", field=field
            )
