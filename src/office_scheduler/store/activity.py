"""The workspace activity log: append entries, list them with filters.

Mixed into :class:`~office_scheduler.store.runlog.RunLogStore`; every public method is one
transaction. :func:`insert_activity` lets another store method add an entry inside its own
transaction (intake logs a coalesce that way, at the cost of one insert).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import ActivityEntry, Run
from office_scheduler.domain.status import SKIP_OR_CANCEL_REASONS, RunStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import activity_from_row
from office_scheduler.store.schema import activity_log, wakeup_requests
from office_scheduler.store.sql import all_rows, first_row, missing_reference
from office_scheduler.store.validation import clean_text

#: The actor of what the scheduler does on its own.
SYSTEM_ACTOR = "system"
#: The actor of what a person does (an admin token).
USER_ACTOR = "user"

#: Most wakeup ids a ``run_skipped``/``run_cancelled`` entry names (the newest).
MAX_SKIP_WAKEUP_IDS = 50
_NEWEST_WAKEUP_IDS = (
    sa.select(wakeup_requests.c.id)
    .where(wakeup_requests.c.run_id == sa.bindparam("run_id"))
    .order_by(wakeup_requests.c.id.desc())
    .limit(MAX_SKIP_WAKEUP_IDS)
)


def agent_actor(agent_id: str) -> str:
    """The actor string of an agent (``agent:<id>``)."""
    return f"agent:{agent_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ActivityFilter:
    """What :meth:`ActivityMethods.list_activity` keeps; ``None`` fields do not filter.

    Attributes:
        actor: ``system``, ``user`` or ``agent:<id>`` (exact match).
        kind: the action, e.g. ``run_skipped`` (exact match).
        agent_id: entries about this agent.
        task_id: entries about this task.
        run_id: entries about this run.
        since: entries at or after this aware instant.
        until: entries strictly before this aware instant.
    """

    actor: str | None = None
    kind: str | None = None
    agent_id: str | None = None
    task_id: str | None = None
    run_id: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    def clauses(self) -> list[sa.ColumnElement[bool]]:
        """The SQL conditions of this filter.

        Raises:
            InvalidInputError: a naive ``since``/``until``, or ``since`` after ``until``.
        """
        for name, instant in (("since", self.since), ("until", self.until)):
            if instant is not None and instant.tzinfo is None:
                raise InvalidInputError(f"{name} must carry a time zone (UTC)", field=name)
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InvalidInputError("since must not be after until", field="since")
        column = activity_log.c
        pairs = (
            (column.actor, self.actor),
            (column.kind, self.kind),
            (column.agent_id, self.agent_id),
            (column.task_id, self.task_id),
            (column.run_id, self.run_id),
        )
        found: list[sa.ColumnElement[bool]] = [
            col == value for col, value in pairs if value is not None
        ]
        if self.since is not None:
            found.append(column.at >= self.since)
        if self.until is not None:
            found.append(column.at < self.until)
        return found


def _activity_key(entry: ActivityEntry) -> tuple[datetime, int]:
    return (entry.at, entry.id)


def activity_values(
    *,
    workspace_id: str,
    kind: str,
    message: str,
    now: datetime,
    actor: str = SYSTEM_ACTOR,
    agent_id: str | None = None,
    task_id: str | None = None,
    run_id: int | None = None,
    data: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The validated column values of one activity entry.

    Raises:
        InvalidInputError: a blank ``kind`` or ``actor``.
    """
    return {
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


_INSERT_ACTIVITY = sa.insert(activity_log)


def insert_activity(conn: Connection, values: Mapping[str, Any]) -> None:
    """Add one entry (made by :func:`activity_values`) inside the caller's transaction."""
    conn.execute(_INSERT_ACTIVITY, dict(values))


def insert_activities(conn: Connection, entries: Sequence[Mapping[str, Any]]) -> None:
    """Add entries (made by :func:`activity_values`) in one statement, in order (no-op if none)."""
    if entries:
        conn.execute(_INSERT_ACTIVITY, [dict(values) for values in entries])


class ActivityMethods:
    """Activity-log methods of :class:`~office_scheduler.store.runlog.RunLogStore`."""

    _db: Database

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
        actor: str = SYSTEM_ACTOR,
    ) -> ActivityEntry:
        """Append an entry to a workspace's activity log.

        ``actor`` says who did it: ``user``, ``agent:<id>`` or ``system`` (the scheduler).

        Returns:
            The stored entry.

        Raises:
            InvalidInputError: a blank ``kind`` or ``actor``.
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        values = activity_values(
            workspace_id=workspace_id,
            kind=kind,
            message=message,
            now=now,
            actor=actor,
            agent_id=agent_id,
            task_id=task_id,
            run_id=run_id,
            data=data,
        )
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
        where: ActivityFilter | None = None,
    ) -> Page[ActivityEntry]:
        """Return one page of a workspace's activity, newest first (by ``at``, then id).

        The scan walks the ``(workspace_id, at)`` index (``(workspace_id, kind, at)`` when a
        kind is given) newest first and stops after one page; the other filters are applied
        to the rows it meets.

        Args:
            workspace_id: the workspace.
            kind: only this action (same as ``where.kind``; kept for existing callers).
            limit: page size (capped at 500).
            cursor: ``next_cursor`` of the previous page.
            where: further filters (actor, target, time range).

        Returns:
            Up to ``limit`` entries and the cursor of the next page.

        Raises:
            InvalidInputError: a bad ``limit``, ``cursor`` or time range.
        """
        limit = check_limit(limit)
        query = sa.select(activity_log).where(activity_log.c.workspace_id == workspace_id)
        if kind is not None:
            query = query.where(activity_log.c.kind == kind)
        if where is not None:
            query = query.where(*where.clauses())
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

    def log_run_skip(
        self, run: Run, *, now: datetime, wakeup_ids: Sequence[int] | None = None
    ) -> ActivityEntry | None:
        """Log a run that ended without launching because a guard stopped it.

        Kind ``run_cancelled`` for a cancelled run, ``run_skipped`` otherwise; actor
        ``system``; ``data`` holds ``reason``, ``status``, ``source``, ``wakeup_count``
        (the run's merged wakes) and ``wakeup_ids`` (the newest
        :data:`MAX_SKIP_WAKEUP_IDS` of them; read here when the caller does not pass
        them). Reasons outside :data:`SKIP_OR_CANCEL_REASONS` (completions, failures, the
        idle skip that logs itself) are not logged.

        Returns:
            The entry, or ``None`` when the run's reason is not a skip or cancel.
        """
        if run.reason not in SKIP_OR_CANCEL_REASONS:
            return None
        assert run.reason is not None
        cancelled = run.status is RunStatus.CANCELLED
        verb = "cancelled" if cancelled else "skipped"
        if wakeup_ids is None:
            with self._db.read() as conn:
                found = conn.execute(_NEWEST_WAKEUP_IDS, {"run_id": run.id}).scalars()
                wakeup_ids = sorted(found)
        return self.add_activity(
            workspace_id=run.workspace_id,
            kind=f"run_{verb}",
            message=f"run {run.id} {verb} without launching: {run.reason.value}",
            now=now,
            agent_id=run.agent_id,
            task_id=run.task_id,
            run_id=run.id,
            data={
                "reason": run.reason.value,
                "status": run.status.value,
                "source": run.source.value,
                "wakeup_count": run.coalesced_count,
                "wakeup_ids": list(wakeup_ids)[-MAX_SKIP_WAKEUP_IDS:],
            },
        )
