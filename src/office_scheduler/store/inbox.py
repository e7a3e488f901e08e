"""Inbox items for the people of a workspace: open, list, resolve, dismiss.

Mixed into :class:`~office_scheduler.store.runlog.RunLogStore`; every public method is one
transaction. An item is ``open`` until a person resolves it (the cause was dealt with) or
dismisses it (not worth acting on). Both are final: repeating the same close is a no-op,
and closing an item the other way is a conflict (the first decision stands).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, NotFoundError
from office_scheduler.domain.models import InboxItem
from office_scheduler.domain.status import InboxKind, InboxStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.notifications import queue_notification
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import inbox_from_row
from office_scheduler.store.schema import inbox_items
from office_scheduler.store.sql import all_rows, first_row, insert, missing_reference
from office_scheduler.store.validation import clean_text, enum_value


def inbox_values(
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
) -> dict[str, Any]:
    """The validated column values of one open inbox item (see ``add_inbox_item``).

    Raises:
        InvalidInputError: an unknown ``kind`` or a blank ``title``.
    """
    return {
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


def insert_inbox_item(conn: Connection, values: Mapping[str, Any]) -> InboxItem:
    """Add an inbox item (made by :func:`inbox_values`) inside the caller's transaction.

    An item whose ``dedupe_key`` exists already is not added; the existing one is returned.
    """
    stmt = insert(conn)(inbox_items).values(**values)
    dedupe_key = values.get("dedupe_key")
    if dedupe_key is not None:
        stmt = stmt.on_conflict_do_nothing(index_elements=["dedupe_key"])
    row = first_row(conn, stmt.returning(inbox_items))
    if row is None:
        row = first_row(conn, sa.select(inbox_items).where(inbox_items.c.dedupe_key == dedupe_key))
        assert row is not None
        return inbox_from_row(row)
    item = inbox_from_row(row)
    queue_notification(
        conn,
        workspace_id=item.workspace_id,
        event=item.kind.value,
        data={
            "inbox_item_id": item.id,
            "title": item.title,
            "body": item.body,
            "agent_id": item.agent_id,
            "task_id": item.task_id,
            "approval_id": item.approval_id,
            "details": item.data,
            "dashboard_path": "/inbox",
        },
        now=item.created_at,
    )
    return item


def _inbox_key(item: InboxItem) -> tuple[datetime, int]:
    return (item.created_at, item.id)


class InboxMethods:
    """Inbox methods of :class:`~office_scheduler.store.runlog.RunLogStore`."""

    _db: Database

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
        values = inbox_values(
            workspace_id=workspace_id,
            kind=kind,
            title=title,
            now=now,
            body=body,
            data=data,
            agent_id=agent_id,
            task_id=task_id,
            approval_id=approval_id,
            dedupe_key=dedupe_key,
        )
        message = f"workspace {workspace_id} not found"
        with missing_reference(field="workspace_id", message=message), self._db.write() as conn:
            return insert_inbox_item(conn, values)

    def get_inbox_item(self, item_id: int) -> InboxItem:
        """Return inbox item ``item_id``.

        Raises:
            NotFoundError: no such item (field ``item_id``).
        """
        with self._db.read() as conn:
            row = first_row(conn, sa.select(inbox_items).where(inbox_items.c.id == item_id))
        if row is None:
            raise NotFoundError(f"inbox item {item_id} not found", field="item_id")
        return inbox_from_row(row)

    def list_inbox(
        self,
        workspace_id: str,
        *,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
    ) -> list[InboxItem]:
        """Return all of a workspace's inbox items, newest first, optionally filtered.

        Raises:
            InvalidInputError: an unknown ``status`` or ``kind``.
        """
        items: list[InboxItem] = []
        cursor: str | None = None
        while True:
            page = self.inbox_page(workspace_id, status=status, kind=kind, cursor=cursor)
            items += page.items
            cursor = page.next_cursor
            if cursor is None:
                return items

    def inbox_page(
        self,
        workspace_id: str,
        *,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
        limit: int = 500,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """Return one page of a workspace's inbox, newest first (``created_at``, then id).

        A status filter walks the ``(workspace_id, status)`` index.

        Returns:
            Up to ``limit`` items (capped at 500) and the cursor of the next page.

        Raises:
            InvalidInputError: an unknown ``status`` or ``kind``, a bad ``limit`` or ``cursor``.
        """
        limit = check_limit(limit)
        query = sa.select(inbox_items).where(inbox_items.c.workspace_id == workspace_id)
        if status is not None:
            wanted = enum_value(InboxStatus, status, field="status")
            query = query.where(inbox_items.c.status == wanted.value)
        if kind is not None:
            query = query.where(
                inbox_items.c.kind == enum_value(InboxKind, kind, field="kind").value
            )
        if cursor is not None:
            before_at, before_id = decode_cursor(cursor, (datetime, int))
            query = query.where(
                sa.or_(
                    inbox_items.c.created_at < before_at,
                    sa.and_(inbox_items.c.created_at == before_at, inbox_items.c.id < before_id),
                )
            )
        query = query.order_by(inbox_items.c.created_at.desc(), inbox_items.c.id.desc())
        with self._db.read() as conn:
            found = [inbox_from_row(row) for row in all_rows(conn, query.limit(limit + 1))]
        return make_page(found, limit=limit, key=_inbox_key)

    def resolve_inbox_item(self, item_id: int, *, now: datetime) -> InboxItem:
        """Mark an inbox item resolved (idempotent: the first ``resolved_at`` is kept).

        Returns:
            The resolved item.

        Raises:
            NotFoundError: no such item (field ``item_id``).
            ConflictError: the item was dismissed (field ``status``).
        """
        return self._close_inbox_item(item_id, InboxStatus.RESOLVED, now=now)

    def dismiss_inbox_item(self, item_id: int, *, now: datetime) -> InboxItem:
        """Mark an inbox item dismissed (idempotent); ``resolved_at`` records when.

        Returns:
            The dismissed item.

        Raises:
            NotFoundError: no such item (field ``item_id``).
            ConflictError: the item was resolved (field ``status``).
        """
        return self._close_inbox_item(item_id, InboxStatus.DISMISSED, now=now)

    def _close_inbox_item(self, item_id: int, status: InboxStatus, *, now: datetime) -> InboxItem:
        with self._db.write() as conn:
            conn.execute(
                sa.update(inbox_items)
                .where(inbox_items.c.id == item_id, inbox_items.c.status == InboxStatus.OPEN.value)
                .values(status=status.value, resolved_at=now)
            )
            row = first_row(conn, sa.select(inbox_items).where(inbox_items.c.id == item_id))
            if row is None:
                raise NotFoundError(f"inbox item {item_id} not found", field="item_id")
            item = inbox_from_row(row)
        if item.status is not status:
            raise ConflictError(
                f"inbox item {item_id} is already {item.status.value}", field="status"
            )
        return item
