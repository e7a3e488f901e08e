"""Task blockers, subtasks and comments of the office store."""

from __future__ import annotations

import hashlib
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.models import Comment, Task
from office_scheduler.domain.status import AuthorKind, TaskState
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.office_common import (
    get_task_in,
    load_tasks,
    require_in_workspace,
    require_task,
    task_select,
)
from office_scheduler.store.rows import comment_from_row
from office_scheduler.store.schema import agents, comments, task_blockers, tasks
from office_scheduler.store.sql import all_rows, first_row
from office_scheduler.store.validation import clean_text, enum_value

_OPEN_BLOCKERS = (
    sa.select(task_blockers.c.blocker_task_id)
    .join(tasks, tasks.c.id == task_blockers.c.blocker_task_id)
    .where(
        task_blockers.c.task_id == sa.bindparam("task_id"),
        tasks.c.state.not_in([TaskState.DONE.value, TaskState.CANCELLED.value]),
        tasks.c.archived_at.is_(None),
    )
    .order_by(task_blockers.c.blocker_task_id)
)
_CHILDREN = (
    task_select()
    .where(tasks.c.parent_id == sa.bindparam("parent_id"))
    .order_by(tasks.c.created_at, tasks.c.id)
)
_COMMENTS_OF = (
    sa.select(comments)
    .where(comments.c.task_id == sa.bindparam("task_id"))
    .order_by(comments.c.created_at, comments.c.id)
)


def _blocks_transitively(conn: Connection, start_id: str, target_id: str) -> bool:
    """Whether ``target_id`` is among the blockers of ``start_id``, directly or transitively."""
    chain = (
        sa.select(task_blockers.c.blocker_task_id.label("id"))
        .where(task_blockers.c.task_id == start_id)
        .cte("blocker_chain", recursive=True)
    )
    chain = chain.union(
        sa.select(task_blockers.c.blocker_task_id).join(
            chain, task_blockers.c.task_id == chain.c.id
        )
    )
    query = sa.select(chain.c.id).where(chain.c.id == target_id).limit(1)
    return conn.execute(query).first() is not None


def _comment_row_or_raise(conn: Connection, comment_id: str) -> Comment:
    query = sa.select(comments).where(comments.c.id == comment_id)
    row = first_row(conn, query)
    if row is None:
        raise NotFoundError(f"comment {comment_id} not found", field="comment_id")
    return comment_from_row(row)


def insert_comment(
    conn: Connection,
    task: Task,
    *,
    body: str,
    author_kind: AuthorKind,
    author_agent_id: str | None,
    now: datetime,
    channel: str | None = None,
    external_author: str | None = None,
) -> Comment:
    """Add a comment to ``task`` inside the caller's transaction (inputs already checked)."""
    comment_id = new_id()
    conn.execute(
        sa.insert(comments).values(
            id=comment_id,
            task_id=task.id,
            workspace_id=task.workspace_id,
            author_kind=author_kind.value,
            author_agent_id=author_agent_id,
            body=body,
            created_at=now,
            channel=channel,
            external_author=external_author,
        )
    )
    return _comment_row_or_raise(conn, comment_id)


def lock_workspace_links(conn: Connection, workspace_id: str) -> None:
    """Serialize blocker changes of one workspace until the transaction ends.

    PostgreSQL runs at READ COMMITTED, so two concurrent ``add_blocker(x, y)`` and
    ``add_blocker(y, x)`` would both pass the cycle check; a transaction-scoped advisory
    lock per workspace makes the second wait and then see the first's link. SQLite
    serializes writers already, so nothing is needed there.
    """
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"task_blockers:{workspace_id}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


class LinkMethods:
    """Blocker, subtask and comment methods of the office store."""

    _db: Database

    def add_blocker(self, task_id: str, blocker_task_id: str, *, now: datetime) -> Task:
        """Record that ``blocker_task_id`` blocks ``task_id`` (idempotent).

        Returns:
            The blocked task with its updated ``blocked_by``.

        Raises:
            NotFoundError: no such task (``task_id``), or the blocker is missing or in another
                workspace (``blocker_task_id``).
            InvalidInputError: the task would block itself, directly or through a cycle
                (field ``blocker_task_id``). The check runs under a per-workspace lock
                (:func:`lock_workspace_links`), so of two concurrent links that would close
                a cycle exactly one is stored.
        """
        if task_id == blocker_task_id:
            raise InvalidInputError("a task cannot block itself", field="blocker_task_id")
        with self._db.write() as conn:
            task = get_task_in(conn, task_id)
            require_in_workspace(
                conn,
                tasks,
                [blocker_task_id],
                workspace_id=task.workspace_id,
                field="blocker_task_id",
            )
            lock_workspace_links(conn, task.workspace_id)
            task = get_task_in(conn, task_id)
            if blocker_task_id in task.blocked_by:
                return task
            if _blocks_transitively(conn, blocker_task_id, task_id):
                raise InvalidInputError(
                    f"task {blocker_task_id} already waits on {task_id}: that would be a cycle",
                    field="blocker_task_id",
                )
            conn.execute(
                sa.insert(task_blockers).values(
                    task_id=task_id, blocker_task_id=blocker_task_id, created_at=now
                )
            )
            conn.execute(sa.update(tasks).where(tasks.c.id == task_id).values(updated_at=now))
            return get_task_in(conn, task_id)

    def remove_blocker(self, task_id: str, blocker_task_id: str) -> Task:
        """Remove a blocker link (idempotent).

        Returns:
            The task with its updated ``blocked_by``.

        Raises:
            NotFoundError: no such task (field ``task_id``).
        """
        with self._db.write() as conn:
            get_task_in(conn, task_id)
            conn.execute(
                sa.delete(task_blockers).where(
                    task_blockers.c.task_id == task_id,
                    task_blockers.c.blocker_task_id == blocker_task_id,
                )
            )
            return get_task_in(conn, task_id)

    def open_blocker_ids(self, task_id: str) -> list[str]:
        """Return the ids of the task's blockers that have not ended, sorted.

        A blocker ends when it reaches ``DONE`` or ``CANCELLED`` or is archived: a cancelled
        blocker resolves the dependency (specification "Manual status changes": moving a
        task to Done or Cancelled resolves blocker dependencies), and the specification
        counts ARCHIVED as terminal too.

        Raises:
            NotFoundError: no such task (field ``task_id``).
        """
        with self._db.read() as conn:
            found = list(conn.execute(_OPEN_BLOCKERS, {"task_id": task_id}).scalars())
            if not found:
                require_task(conn, task_id)
            return found

    def list_blocked_by(self, blocker_task_id: str) -> list[Task]:
        """Return the tasks that ``blocker_task_id`` blocks, oldest first."""
        query = (
            task_select()
            .join(task_blockers, task_blockers.c.task_id == tasks.c.id)
            .where(task_blockers.c.blocker_task_id == blocker_task_id)
            .order_by(tasks.c.created_at, tasks.c.id)
        )
        with self._db.read() as conn:
            return load_tasks(conn, query)

    def list_children(self, task_id: str, *, require: bool = True) -> list[Task]:
        """Return the subtasks of a task, archived ones included, oldest first.

        Args:
            task_id: the parent task.
            require: check that the task exists when it has no subtasks (one more
                query); ``False`` for a caller that read the task in the same snapshot.

        Raises:
            NotFoundError: no such task (field ``task_id``), when ``require``.
        """
        with self._db.read() as conn:
            found = load_tasks(conn, _CHILDREN, {"parent_id": task_id})
            if not found and require:
                require_task(conn, task_id)
            return found

    def add_comment(
        self,
        *,
        task_id: str,
        body: str,
        author_kind: AuthorKind,
        author_agent_id: str | None,
        now: datetime,
        channel: str | None = None,
        external_author: str | None = None,
    ) -> Comment:
        """Add a comment to a task (the body is stored as given).

        ``channel`` and ``external_author`` record a message from a chat integration.

        An agent comment names its author, who must belong to the task's workspace; a user
        comment names no agent.

        Returns:
            The new comment.

        Raises:
            NotFoundError: no such task (``task_id``) or author agent in the task's workspace
                (``author_agent_id``).
            InvalidInputError: a blank ``body``, an unknown ``author_kind``, or an agent comment
                without author / a user comment with one (``author_agent_id``).
        """
        clean_text(body, field="body")
        kind = enum_value(AuthorKind, author_kind, field="author_kind")
        if (kind is AuthorKind.AGENT) != (author_agent_id is not None):
            raise InvalidInputError(
                "agent comments name their author agent; user comments name none",
                field="author_agent_id",
            )
        with self._db.write() as conn:
            task = get_task_in(conn, task_id)
            if author_agent_id is not None:
                require_in_workspace(
                    conn,
                    agents,
                    [author_agent_id],
                    workspace_id=task.workspace_id,
                    field="author_agent_id",
                )
            return insert_comment(
                conn,
                task,
                body=body,
                author_kind=kind,
                author_agent_id=author_agent_id,
                now=now,
                channel=channel,
                external_author=external_author,
            )

    def get_comment(self, comment_id: str) -> Comment:
        """Return the comment ``comment_id``.

        Raises:
            NotFoundError: no such comment (field ``comment_id``).
        """
        with self._db.read() as conn:
            return _comment_row_or_raise(conn, comment_id)

    def list_comments(self, task_id: str, *, require: bool = True) -> list[Comment]:
        """Return a task's comments, oldest first.

        Args:
            task_id: the task.
            require: check that the task exists when it has no comments (one more query);
                ``False`` for a caller that read the task in the same snapshot.

        Raises:
            NotFoundError: no such task (field ``task_id``), when ``require``.
        """
        with self._db.read() as conn:
            rows = all_rows(conn, _COMMENTS_OF, {"task_id": task_id})
            if not rows and require:
                require_task(conn, task_id)
            return [comment_from_row(row) for row in rows]
