"""Run event log, agent sessions, the workspace activity log and the inbox.

Every public method is one transaction. Activity and inbox methods live in
:mod:`~office_scheduler.store.activity` and :mod:`~office_scheduler.store.inbox`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import AgentSession, RunEvent
from office_scheduler.store.activity import ActivityMethods
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.inbox import InboxMethods
from office_scheduler.store.pagination import check_limit
from office_scheduler.store.queue_common import insert_run_events
from office_scheduler.store.rows import run_event_from_row, session_from_row
from office_scheduler.store.schema import run_events, sessions
from office_scheduler.store.sql import all_rows, first_row, missing_reference

#: Most run events one :meth:`RunLogStore.list_run_events` call returns.
MAX_RUN_EVENTS = 10_000

RunEventRow = tuple[int, str, str, Mapping[str, Any], datetime]

_INSERT_SESSION = sa.insert(sessions).returning(*sessions.c)
_LATEST_RESUMABLE = (
    sa.select(sessions)
    .where(
        sessions.c.task_id == sa.bindparam("task_id"),
        sessions.c.agent_id == sa.bindparam("agent_id"),
        sessions.c.external_session_id.is_not(None),
    )
    .order_by(sessions.c.created_at.desc(), sessions.c.run_id.desc())
    .limit(1)
)


class RunLogStore(ActivityMethods, InboxMethods):
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
            insert_run_events(conn, rows)

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
            values = {
                "id": session_id,
                "run_id": run_id,
                "agent_id": agent_id,
                "task_id": task_id,
                "executor": executor,
                "cwd": cwd,
                "resumed_from": resumed_from,
                "created_at": now,
            }
            return session_from_row(conn.execute(_INSERT_SESSION, values).mappings().one())

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
        with self._db.read() as conn:
            params = {"task_id": task_id, "agent_id": agent_id}
            row = first_row(conn, _LATEST_RESUMABLE, params)
            return None if row is None else session_from_row(row)
