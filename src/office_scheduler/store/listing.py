"""Filtered, paginated listings of runs and wakeup requests (newest first).

Every public method is one read transaction. Pages are ordered by id, descending: ids grow
with insertion, so this is newest first, and the cursor is the id of the last item shown.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import Run, WakeupRequest
from office_scheduler.domain.status import LIVE_RUN_STATUSES, RunStatus, WakeSource, WakeupStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import run_from_row, wakeup_from_row
from office_scheduler.store.schema import (
    agents,
    approvals,
    budget_policies,
    comments,
    inbox_items,
    projects,
    routines,
    runs,
    tasks,
    wakeup_requests,
    workspaces,
)
from office_scheduler.store.sql import all_rows
from office_scheduler.store.validation import enum_value

#: Collections whose string ids may be given by a unique prefix (``GET /ids/{prefix}``).
PREFIX_TABLES: dict[str, sa.Table] = {
    "workspaces": workspaces,
    "projects": projects,
    "agents": agents,
    "tasks": tasks,
    "comments": comments,
    "approvals": approvals,
    "routines": routines,
    "inbox": inbox_items,
    "budgets": budget_policies,
}
#: Shortest prefix accepted (the dashboard shows 8 characters).
MIN_PREFIX = 6

#: Largest id a cursor may name (a signed 64-bit integer, like the id columns).
MAX_ID = 2**63 - 1


def _run_key(run: Run) -> tuple[int]:
    return (run.id,)


def _wakeup_key(request: WakeupRequest) -> tuple[int]:
    return (request.id,)


def _before_cursor(
    query: sa.Select[Any], id_column: sa.Column[Any], cursor: str | None
) -> sa.Select[Any]:
    """Restrict ``query`` to ids below the one a cursor names."""
    if cursor is None:
        return query
    (before_id,) = decode_cursor(cursor, (int,))
    if not 0 < before_id <= MAX_ID:
        raise InvalidInputError(f"invalid cursor {cursor!r}", field="cursor")
    return query.where(id_column < before_id)


class ListingStore:
    """Read-only listings of the queue for the API and the CLI."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def list_runs(
        self,
        *,
        workspace_id: str | None = None,
        agent_id: str | None = None,
        task_id: str | None = None,
        status: RunStatus | None = None,
        source: WakeSource | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Run]:
        """Return one page of runs, newest first (by id, descending).

        ``None`` filters are not applied.

        Args:
            workspace_id: only runs of this workspace.
            agent_id: only runs of this agent.
            task_id: only runs about this task.
            status: only runs in this status.
            source: only runs created by a wake of this source.
            limit: page size (capped at 500).
            cursor: the ``next_cursor`` of the previous page.

        Returns:
            Up to ``limit`` runs and the cursor of the next page.

        Raises:
            InvalidInputError: a bad ``limit``, ``cursor``, ``status`` or ``source``.
        """
        limit = check_limit(limit)
        query = sa.select(runs)
        if workspace_id is not None:
            query = query.where(runs.c.workspace_id == workspace_id)
        if agent_id is not None:
            query = query.where(runs.c.agent_id == agent_id)
        if task_id is not None:
            query = query.where(runs.c.task_id == task_id)
        if status is not None:
            query = query.where(
                runs.c.status == enum_value(RunStatus, status, field="status").value
            )
        if source is not None:
            query = query.where(
                runs.c.source == enum_value(WakeSource, source, field="source").value
            )
        query = _before_cursor(query, runs.c.id, cursor)
        query = query.order_by(runs.c.id.desc()).limit(limit + 1)
        with self._db.read() as conn:
            found = [run_from_row(row) for row in all_rows(conn, query)]
        return make_page(found, limit=limit, key=_run_key)

    def live_runs(self) -> list[Run]:
        """Every ``claimed`` or ``running`` run, oldest first (startup recovery reads them)."""
        query = (
            sa.select(runs)
            .where(runs.c.status.in_([status.value for status in LIVE_RUN_STATUSES]))
            .order_by(runs.c.id)
        )
        with self._db.read() as conn:
            return [run_from_row(row) for row in all_rows(conn, query)]

    def list_wakeups(
        self,
        *,
        workspace_id: str | None = None,
        agent_id: str | None = None,
        status: WakeupStatus | None = None,
        run_id: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[WakeupRequest]:
        """Return one page of wakeup requests, newest first (by id, descending).

        ``None`` filters are not applied.

        Args:
            workspace_id: only requests of this workspace.
            agent_id: only requests waking this agent.
            status: only requests in this status.
            run_id: only requests that created or joined this run.
            limit: page size (capped at 500).
            cursor: the ``next_cursor`` of the previous page.

        Returns:
            Up to ``limit`` requests and the cursor of the next page.

        Raises:
            InvalidInputError: a bad ``limit``, ``cursor`` or ``status``.
        """
        limit = check_limit(limit)
        table = wakeup_requests
        query = sa.select(table)
        if workspace_id is not None:
            query = query.where(table.c.workspace_id == workspace_id)
        if agent_id is not None:
            query = query.where(table.c.agent_id == agent_id)
        if status is not None:
            query = query.where(
                table.c.status == enum_value(WakeupStatus, status, field="status").value
            )
        if run_id is not None:
            query = query.where(table.c.run_id == run_id)
        query = _before_cursor(query, table.c.id, cursor)
        query = query.order_by(table.c.id.desc()).limit(limit + 1)
        with self._db.read() as conn:
            found = [wakeup_from_row(row) for row in all_rows(conn, query)]
        return make_page(found, limit=limit, key=_wakeup_key)

    def ids_with_prefix(
        self, kind: str, prefix: str, *, workspace_id: str | None = None, limit: int = 10
    ) -> list[str]:
        """The ids of ``kind`` (a key of :data:`PREFIX_TABLES`) that start with ``prefix``.

        Args:
            kind: the collection, e.g. ``tasks``.
            prefix: at least :data:`MIN_PREFIX` lowercase hex digits.
            workspace_id: only records of this workspace (``None``: every workspace).
            limit: most ids returned, sorted.

        Raises:
            InvalidInputError: an unknown ``kind`` (field ``kind``) or a prefix that is
                shorter than :data:`MIN_PREFIX` or not hex (field ``prefix``).
        """
        table = PREFIX_TABLES.get(kind)
        if table is None:
            raise InvalidInputError(
                f"kind must be one of {', '.join(sorted(PREFIX_TABLES))}", field="kind"
            )
        if len(prefix) < MIN_PREFIX or len(prefix) > 32 or prefix.strip("0123456789abcdef"):
            raise InvalidInputError(
                f"an id prefix is {MIN_PREFIX} to 32 lowercase hex digits", field="prefix"
            )
        query = sa.select(table.c.id).where(table.c.id.startswith(prefix, autoescape=True))
        if workspace_id is not None:
            column = table.c.id if table is workspaces else table.c.workspace_id
            query = query.where(column == workspace_id)
        query = query.order_by(table.c.id).limit(limit)
        with self._db.read() as conn:
            return [str(found) for found in conn.execute(query).scalars()]

    def run_status_counts(self, statuses: tuple[str, ...]) -> dict[str, int]:
        """How many runs are in each of ``statuses`` (absent: none), for the metrics."""
        query = (
            sa.select(runs.c.status, sa.func.count())
            .where(runs.c.status.in_(statuses))
            .group_by(runs.c.status)
        )
        with self._db.read() as conn:
            return {str(status): int(count) for status, count in conn.execute(query)}

    def ping(self) -> bool:
        """Run a trivial query; returns ``True`` when the database answers (health checks)."""
        with self._db.read() as conn:
            return conn.execute(sa.select(sa.literal(1))).scalar_one() == 1
