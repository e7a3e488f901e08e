"""Run event log, agent sessions, the workspace activity log and the inbox.

Every public method is one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import ActivityEntry, AgentSession, InboxItem, RunEvent
from office_scheduler.domain.status import InboxKind, InboxStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import (
    activity_from_row,
    inbox_from_row,
    run_event_from_row,
    session_from_row,
)
from office_scheduler.store.schema import activity_log, inbox_items, run_events, sessions
from office_scheduler.store.sql import all_rows, first_row, insert, missing_reference
from office_scheduler.store.validation import clean_text, enum_value

#: Most run events one :meth:`RunLogStore.list_run_events` call returns.
MAX_RUN_EVENTS = 10_000

RunEventRow = tuple[int, str, str, Mapping[str, Any], datetime]


def _activity_key(entry: ActivityEntry) -> tuple[datetime, int]:
    return (entry.at, entry.id)


class RunLogStore:
    """Append-mostly logs: run events, sessions, activity and inbox items."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add_run_event(
        self,
        run_id: int,
        *,
        kind: str,
        message: str = "",
        data: Mapping[str, Any] | None = None,
        now: datetime,
    ) -> None:
        """Append one event to a run's log.

        Raises:
            NotFoundError: no such run (field ``run_id``).
        """
        self.add_run_events([(run_id, kind, message, data or {}, now)])

    def add_run_events(self, events: Sequence[RunEventRow]) -> None:
        """Append many events in one transaction (batched streamed output).

        Args:
            events: ``(run_id, kind, message, data, at)`` tuples, in log order.

        Raises:
            NotFoundError: one of the runs does not exist (field ``run_id``); nothing is stored.
        """
        if not events:
            return
        rows = [
            {"run_id": run_id, "kind": kind, "message": message, "data": dict(data), "at": at}
            for run_id, kind, message, data, at in events
        ]
        with missing_reference(field="run_id", message="run not found"), self._db.write() as conn:
            conn.execute(sa.insert(run_events), rows)

    def list_run_events(
        self, run_id: int, *, after_id: int = 0, limit: int = 1000
    ) -> list[RunEvent]:
        """Return a run's events with an id above ``after_id``, oldest first.

        Returns:
            Up to ``limit`` events (capped at 10,000); an unknown run has none.

        Raises:
            InvalidInputError: ``limit`` is below 1 (field ``limit``).
        """
        limit = check_limit(limit, maximum=MAX_RUN_EVENTS)
        query = (
            sa.select(run_events)
            .where(run_events.c.run_id == run_id, run_events.c.id > after_id)
            .order_by(run_events.c.id)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [run_event_from_row(row) for row in all_rows(conn, query)]

    def create_session(
        self,
        *,
        run_id: int,
        agent_id: str,
        task_id: str | None,
        executor: str,
        cwd: str | None,
        resumed_from: str | None,
        now: datetime,
    ) -> AgentSession:
        """Record an agent session launched for a run.

        Returns:
            The new session (no external session id yet).

        Raises:
            NotFoundError: no such agent (field ``agent_id``).
        """
        session_id = new_id()
        message = f"agent {agent_id} not found"
        with missing_reference(field="agent_id", message=message), self._db.write() as conn:
            conn.execute(
                sa.insert(sessions).values(
                    id=session_id,
                    run_id=run_id,
                    agent_id=agent_id,
                    task_id=task_id,
                    executor=executor,
                    cwd=cwd,
                    resumed_from=resumed_from,
                    created_at=now,
                )
            )
            row = first_row(conn, sa.select(sessions).where(sessions.c.id == session_id))
            assert row is not None
            return session_from_row(row)

    def set_external_session_id(self, session_id: str, external_id: str) -> None:
        """Store the executor's own id of a session (what a later run resumes).

        Raises:
            NotFoundError: no such session (field ``session_id``).
        """
        with self._db.write() as conn:
            changed = conn.execute(
                sa.update(sessions)
                .where(sessions.c.id == session_id)
                .values(external_session_id=external_id)
            ).rowcount
            if changed == 0:
                raise NotFoundError(f"session {session_id} not found", field="session_id")

    def latest_resumable_session(self, task_id: str, agent_id: str) -> AgentSession | None:
        """Return the newest session of ``(task, agent)`` that has an external id, or ``None``.

        Newest means the latest ``created_at``, then the highest run id.
        """
        query = (
            sa.select(sessions)
            .where(
                sessions.c.task_id == task_id,
                sessions.c.agent_id == agent_id,
                sessions.c.external_session_id.is_not(None),
            )
            .order_by(sessions.c.created_at.desc(), sessions.c.run_id.desc())
            .limit(1)
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
            return None if row is None else session_from_row(row)

    def add_activity(
        self,
        *,
        workspace_id: str,
        kind: str,
        message: str,
        now: datetime,
        agent_id: str | None = None,
        task_id: str | None = None,
        run_id: int | None = None,
        data: Mapping[str, Any] | None = None,
        actor: str = "system",
    ) -> ActivityEntry:
        """Append an entry to a workspace's activity log.

        ``actor`` says who did it: ``user``, ``agent:<id>`` or ``system`` (the scheduler).

        Returns:
            The stored entry.

        Raises:
            InvalidInputError: a blank ``kind``.
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        values = {
            "workspace_id": workspace_id,
            "at": now,
            "kind": clean_text(kind, field="kind"),
            "actor": clean_text(actor, field="actor"),
            "agent_id": agent_id,
            "task_id": task_id,
            "run_id": run_id,
            "message": message,
            "data": dict(data or {}),
        }
        message_nf = f"workspace {workspace_id} not found"
        with missing_reference(field="workspace_id", message=message_nf), self._db.write() as conn:
            row = first_row(conn, sa.insert(activity_log).values(values).returning(activity_log))
            assert row is not None
            return activity_from_row(row)

    def list_activity(
        self,
        workspace_id: str,
        *,
        kind: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[ActivityEntry]:
        """Return one page of a workspace's activity, newest first (by ``at``, then id).

        Returns:
            Up to ``limit`` entries (capped at 500) and the cursor of the next page.

        Raises:
            InvalidInputError: a bad ``limit`` or ``cursor``.
        """
        limit = check_limit(limit)
        query = sa.select(activity_log).where(activity_log.c.workspace_id == workspace_id)
        if kind is not None:
            query = query.where(activity_log.c.kind == kind)
        if cursor is not None:
            before_at, before_id = decode_cursor(cursor, (datetime, int))
            query = query.where(
                sa.or_(
                    activity_log.c.at < before_at,
                    sa.and_(activity_log.c.at == before_at, activity_log.c.id < before_id),
                )
            )
        query = query.order_by(activity_log.c.at.desc(), activity_log.c.id.desc()).limit(limit + 1)
        with self._db.read() as conn:
            found = [activity_from_row(row) for row in all_rows(conn, query)]
        return make_page(found, limit=limit, key=_activity_key)

    def add_inbox_item(
        self,
        *,
        workspace_id: str,
        kind: InboxKind,
        title: str,
        now: datetime,
        body: str = "",
        data: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        approval_id: str | None = None,
        dedupe_key: str | None = None,
    ) -> InboxItem:
        """Open an inbox item for the people of a workspace.

        ``dedupe_key`` (e.g. ``budget_alert:<policy_id>:<period>``) makes the call idempotent:
        when an item with that key exists, whatever its status, it is returned unchanged.

        Returns:
            The new item, status ``open`` (or the existing item of ``dedupe_key``).

        Raises:
            InvalidInputError: an unknown ``kind`` or a blank ``title``.
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        values = {
            "workspace_id": workspace_id,
            "kind": enum_value(InboxKind, kind, field="kind").value,
            "status": InboxStatus.OPEN.value,
            "title": clean_text(title, field="title"),
            "body": body,
            "data": dict(data or {}),
            "created_at": now,
            "agent_id": agent_id,
            "task_id": task_id,
            "approval_id": approval_id,
            "dedupe_key": dedupe_key,
        }
        message = f"workspace {workspace_id} not found"
        with missing_reference(field="workspace_id", message=message), self._db.write() as conn:
            stmt = insert(conn)(inbox_items).values(**values)
            if dedupe_key is not None:
                stmt = stmt.on_conflict_do_nothing(index_elements=["dedupe_key"])
            row = first_row(conn, stmt.returning(inbox_items))
            if row is None:
                row = first_row(
                    conn, sa.select(inbox_items).where(inbox_items.c.dedupe_key == dedupe_key)
                )
            assert row is not None
            return inbox_from_row(row)

    def list_inbox(
        self, workspace_id: str, *, status: InboxStatus | None = None
    ) -> list[InboxItem]:
        """Return a workspace's inbox items, newest first, optionally only one status.

        Raises:
            InvalidInputError: an unknown ``status``.
        """
        query = sa.select(inbox_items).where(inbox_items.c.workspace_id == workspace_id)
        if status is not None:
            wanted = enum_value(InboxStatus, status, field="status")
            query = query.where(inbox_items.c.status == wanted.value)
        query = query.order_by(inbox_items.c.created_at.desc(), inbox_items.c.id.desc())
        with self._db.read() as conn:
            return [inbox_from_row(row) for row in all_rows(conn, query)]

    def resolve_inbox_item(self, item_id: int, *, now: datetime) -> InboxItem:
        """Mark an inbox item resolved (idempotent: the first ``resolved_at`` is kept).

        Returns:
            The resolved item.

        Raises:
            NotFoundError: no such item (field ``item_id``).
        """
        with self._db.write() as conn:
            conn.execute(
                sa.update(inbox_items)
                .where(inbox_items.c.id == item_id, inbox_items.c.status == InboxStatus.OPEN.value)
                .values(status=InboxStatus.RESOLVED.value, resolved_at=now)
            )
            row = first_row(conn, sa.select(inbox_items).where(inbox_items.c.id == item_id))
            if row is None:
                raise NotFoundError(f"inbox item {item_id} not found", field="item_id")
            return inbox_from_row(row)
