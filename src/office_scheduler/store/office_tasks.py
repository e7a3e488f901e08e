"""Tasks of the office store: create, read, list, change, archive, count."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import Task
from office_scheduler.domain.status import ACTIONABLE_TASK_STATES, TaskState, WorkflowKind
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.notifications import notify_task_done
from office_scheduler.store.office_common import (
    find_task_in,
    get_task_in,
    load_tasks,
    require_in_workspace,
    task_select,
    workspace_row,
)
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.schema import agents, projects, task_blockers, tasks
from office_scheduler.store.validation import (
    clean_text,
    enum_value,
    flag,
    optional_text,
    text_tuple,
)

_TASK_CHANGES = frozenset(
    {
        "title",
        "description",
        "state",
        "assignee_agent_id",
        "requires_approval",
        "reviewers",
        "approvers",
        "executor",
        "project_id",
    }
)


def _state(value: object) -> TaskState:
    return enum_value(TaskState, value, field="state")


def _optional_id(value: object, *, field: str) -> str | None:
    if value is None:
        return None
    return clean_text(value, field=field)


def _task_key(task: Task) -> tuple[datetime, str]:
    return (task.created_at, task.id)


def _change_values(changes: Mapping[str, object]) -> dict[str, Any]:
    """Validate the changes of :meth:`TaskMethods.update_task` (references are checked later)."""
    values: dict[str, Any] = {}
    for key, value in changes.items():
        if key not in _TASK_CHANGES:
            raise InvalidInputError(f"unknown task field {key!r}", field=key)
        if key == "title":
            values[key] = clean_text(value, field=key)
        elif key == "description":
            values[key] = clean_text(value, field=key, required=False)
        elif key == "state":
            values[key] = _state(value).value
        elif key in ("assignee_agent_id", "project_id"):
            values[key] = _optional_id(value, field=key)
        elif key == "requires_approval":
            values[key] = flag(value, field=key)
        elif key in ("reviewers", "approvers"):
            values[key] = list(text_tuple(value, field=key))
        else:
            values[key] = optional_text(value, field=key)
    return values


class TaskMethods:
    """Task methods of :class:`~office_scheduler.store.office.OfficeStore`."""

    _db: Database

    def create_task(
        self,
        *,
        workspace_id: str,
        title: str,
        now: datetime,
        description: str = "",
        project_id: str | None = None,
        parent_id: str | None = None,
        workflow: WorkflowKind = WorkflowKind.OFFICE,
        assignee_agent_id: str | None = None,
        state: TaskState = TaskState.TODO,
        requires_approval: bool = False,
        reviewers: Sequence[str] = (),
        approvers: Sequence[str] = (),
        executor: str | None = None,
        blocked_by: Sequence[str] = (),
    ) -> Task:
        """Create a task (and its blocker links) in one transaction.

        The task goes on the workspace's workflow of kind ``workflow``. A subtask (``parent_id``
        given) inherits the parent's project when ``project_id`` is ``None``.

        Returns:
            The new task.

        Raises:
            InvalidInputError: blank ``title`` or another malformed field (named in ``field``).
            NotFoundError: the workspace or a referenced project, parent, assignee, reviewer,
                approver or blocker does not exist in that workspace; ``field`` is the
                argument's name.
        """
        values: dict[str, Any] = {
            "title": clean_text(title, field="title"),
            "description": clean_text(description, field="description", required=False),
            "state": _state(state).value,
            "project_id": _optional_id(project_id, field="project_id"),
            "parent_id": _optional_id(parent_id, field="parent_id"),
            "assignee_agent_id": _optional_id(assignee_agent_id, field="assignee_agent_id"),
            "requires_approval": flag(requires_approval, field="requires_approval"),
            "reviewers": list(text_tuple(reviewers, field="reviewers")),
            "approvers": list(text_tuple(approvers, field="approvers")),
            "executor": optional_text(executor, field="executor"),
        }
        blockers = text_tuple(blocked_by, field="blocked_by")
        flow_kind = enum_value(WorkflowKind, workflow, field="workflow")
        task_id = new_id()
        with self._db.write() as conn:
            space = workspace_row(conn, workspace_id)

            def check(table: sa.Table, ids: Sequence[str | None], field: str) -> None:
                present = [item for item in ids if item is not None]
                require_in_workspace(conn, table, present, workspace_id=workspace_id, field=field)

            check(projects, [values["project_id"]], "project_id")
            check(tasks, [values["parent_id"]], "parent_id")
            check(agents, [values["assignee_agent_id"]], "assignee_agent_id")
            check(agents, values["reviewers"], "reviewers")
            check(agents, values["approvers"], "approvers")
            check(tasks, blockers, "blocked_by")
            if values["parent_id"] is not None and values["project_id"] is None:
                values["project_id"] = get_task_in(conn, values["parent_id"]).project_id
            conn.execute(
                sa.insert(tasks).values(
                    id=task_id,
                    workspace_id=workspace_id,
                    workflow_id=space[f"{flow_kind.value}_workflow_id"],
                    created_at=now,
                    updated_at=now,
                    **values,
                )
            )
            if blockers:
                conn.execute(
                    sa.insert(task_blockers),
                    [
                        {"task_id": task_id, "blocker_task_id": blocker, "created_at": now}
                        for blocker in blockers
                    ],
                )
            return get_task_in(conn, task_id)

    def task_assignees_in(
        self, workspace_id: str, task_ids: Collection[str]
    ) -> dict[str, str | None]:
        """The assignee (agent id or ``None``) of each of ``task_ids`` in ``workspace_id``.

        Tasks of other workspaces, and unknown ids, are left out (one query).
        """
        wanted = list(dict.fromkeys(task_ids))
        if not wanted:
            return {}
        query = sa.select(tasks.c.id, tasks.c.assignee_agent_id).where(
            tasks.c.workspace_id == workspace_id, tasks.c.id.in_(wanted)
        )
        with self._db.read() as conn:
            return {row.id: row.assignee_agent_id for row in conn.execute(query)}

    def get_task(self, task_id: str) -> Task:
        """Return the task ``task_id``.

        Raises:
            NotFoundError: no such task (field ``task_id``).
        """
        with self._db.read() as conn:
            return get_task_in(conn, task_id)

    def find_task(self, task_id: str) -> Task | None:
        """Return the task ``task_id``, or ``None``."""
        with self._db.read() as conn:
            return find_task_in(conn, task_id)

    def list_tasks(
        self,
        workspace_id: str,
        *,
        state: TaskState | None = None,
        assignee_agent_id: str | None = None,
        parent_id: str | None = None,
        project_id: str | None = None,
        include_archived: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Task]:
        """Return one page of a workspace's tasks, oldest first (by ``created_at``, then id).

        ``None`` filters are not applied; archived tasks are left out unless
        ``include_archived``.

        Returns:
            Up to ``limit`` tasks (capped at 500) and the cursor of the next page.

        Raises:
            InvalidInputError: a bad ``limit``, ``cursor`` or ``state``.
        """
        limit = check_limit(limit)
        query = task_select().where(tasks.c.workspace_id == workspace_id)
        if state is not None:
            query = query.where(tasks.c.state == _state(state).value)
        if assignee_agent_id is not None:
            query = query.where(tasks.c.assignee_agent_id == assignee_agent_id)
        if parent_id is not None:
            query = query.where(tasks.c.parent_id == parent_id)
        if project_id is not None:
            query = query.where(tasks.c.project_id == project_id)
        if not include_archived:
            query = query.where(tasks.c.archived_at.is_(None))
        if cursor is not None:
            after_at, after_id = decode_cursor(cursor, (datetime, str))
            query = query.where(
                sa.or_(
                    tasks.c.created_at > after_at,
                    sa.and_(tasks.c.created_at == after_at, tasks.c.id > after_id),
                )
            )
        query = query.order_by(tasks.c.created_at, tasks.c.id).limit(limit + 1)
        with self._db.read() as conn:
            found = load_tasks(conn, query)
        return make_page(found, limit=limit, key=_task_key)

    def update_task(
        self, task_id: str, *, now: datetime, changes: Mapping[str, object]
    ) -> tuple[Task, Task]:
        """Change a task in one transaction.

        Allowed keys: ``title``, ``description``, ``state``, ``assignee_agent_id`` (``None``
        unassigns), ``requires_approval``, ``reviewers``, ``approvers``, ``executor`` and
        ``project_id``. Referenced agents and projects must be in the task's workspace.

        Returns:
            ``(before, after)``; with no changes both are the stored task.

        Raises:
            NotFoundError: no such task (``task_id``), or a referenced agent or project is not
                in the task's workspace (``field`` names the key).
            InvalidInputError: an unknown key or malformed value (``field`` names the key).
        """
        values = _change_values(changes)
        with self._db.write() as conn:
            before = get_task_in(conn, task_id)
            if not values:
                return before, before
            space = before.workspace_id
            for key, table in (("assignee_agent_id", agents), ("project_id", projects)):
                if values.get(key) is not None:
                    require_in_workspace(conn, table, [values[key]], workspace_id=space, field=key)
            for key in ("reviewers", "approvers"):
                if key in values:
                    require_in_workspace(conn, agents, values[key], workspace_id=space, field=key)
            conn.execute(
                sa.update(tasks).where(tasks.c.id == task_id).values(updated_at=now, **values)
            )
            after = get_task_in(conn, task_id)
            notify_task_done(conn, before, after, now)
            return before, after

    def archive_task(self, task_id: str, *, now: datetime) -> Task:
        """Archive a task (idempotent: an archived task keeps its first ``archived_at``).

        Returns:
            The archived task.

        Raises:
            NotFoundError: no such task (field ``task_id``).
        """
        with self._db.write() as conn:
            task = get_task_in(conn, task_id)
            if task.archived_at is not None:
                return task
            conn.execute(
                sa.update(tasks)
                .where(tasks.c.id == task_id)
                .values(archived_at=now, updated_at=now)
            )
            return get_task_in(conn, task_id)

    def count_actionable_tasks(self, agent_id: str) -> int:
        """Return how many unarchived ``TODO``/``IN_PROGRESS`` tasks are assigned to an agent.

        One indexed count (``ix_tasks_assignee_state``), used by the idle-skip check.
        """
        query = (
            sa.select(sa.func.count())
            .select_from(tasks)
            .where(
                tasks.c.assignee_agent_id == agent_id,
                tasks.c.state.in_([state.value for state in ACTIONABLE_TASK_STATES]),
                tasks.c.archived_at.is_(None),
            )
        )
        with self._db.read() as conn:
            return int(conn.execute(query).scalar_one())
