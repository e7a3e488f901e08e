"""Reads and writes of the runaway limits (DESIGN §15): causes, counts, held wakes.

Every method runs in the caller's transaction when there is one (intake's), else in its
own. The counts intake makes on each wake are bounded (``LIMIT cap + 1`` under the
count) and walk an index: ``ix_wakeup_requests_agent_source_requested``,
``ix_runs_agent_requested``, ``ix_runs_workspace_requested`` and
``ix_routine_runs_routine_created``; the held wakes have a partial index of their own.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import WakeupRequest
from office_scheduler.domain.status import (
    AuthorKind,
    TaskState,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.rows import wakeup_from_row
from office_scheduler.store.schema import (
    activity_log,
    agents,
    comments,
    routine_runs,
    runs,
    tasks,
    wakeup_requests,
    workspace_settings,
)
from office_scheduler.store.sql import all_rows, first_row

_RUN_CAUSE = sa.select(
    runs.c.id, runs.c.agent_id, runs.c.causation_depth, runs.c.human_rooted, runs.c.caused_by_run_id
).where(runs.c.id == sa.bindparam("run_id"))
_LIMITS = (
    sa.select(
        agents.c.runaway_limits.label("agent_limits"),
        workspace_settings.c.runaway_limits.label("workspace_limits"),
    )
    .select_from(
        agents.outerjoin(
            workspace_settings, workspace_settings.c.workspace_id == agents.c.workspace_id
        )
    )
    .where(agents.c.id == sa.bindparam("agent_id"))
)
#: The chain shown with a held wake stops after this many runs.
MAX_CHAIN = 30


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainLink:
    """One run of a causation chain: its id, agent and depth."""

    run_id: int
    agent_id: str
    depth: int

    def as_json(self) -> dict[str, Any]:
        """The link as stored in an inbox item's data."""
        return {"run_id": self.run_id, "agent_id": self.agent_id, "depth": self.depth}


@dataclass(frozen=True, kw_only=True, slots=True)
class RecentRun:
    """One of an agent's latest runs on a task, for the no-progress rule."""

    id: int
    status: str
    since: datetime
    causing_agent_id: str | None


def _bounded_count(conn: Connection, query: sa.Select[Any], cap: int) -> int:
    """``min(count(query), cap + 1)``: stops reading rows once the cap is passed."""
    limited = query.limit(cap + 1).subquery()
    return int(conn.execute(sa.select(sa.func.count()).select_from(limited)).scalar_one())


class RunawayStore:
    """Causes, limit counts, held wakes and the limit settings."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # --- causes ---------------------------------------------------------------------

    def run_cause(self, run_id: int) -> Mapping[str, Any] | None:
        """Run ``run_id``'s ``agent_id``, ``causation_depth``, ``human_rooted`` (or ``None``)."""
        with self._db.read() as conn:
            return first_row(conn, _RUN_CAUSE, {"run_id": run_id})

    def chain(self, run_id: int | None) -> list[ChainLink]:
        """The runs that led to a wake, newest first (at most :data:`MAX_CHAIN`)."""
        links: list[ChainLink] = []
        seen: set[int] = set()
        with self._db.read() as conn:
            while run_id is not None and run_id not in seen and len(links) < MAX_CHAIN:
                seen.add(run_id)
                row = first_row(conn, _RUN_CAUSE, {"run_id": run_id})
                if row is None:
                    break
                links.append(
                    ChainLink(
                        run_id=row["id"], agent_id=row["agent_id"], depth=row["causation_depth"]
                    )
                )
                run_id = row["caused_by_run_id"]
        return links

    # --- limits ---------------------------------------------------------------------

    def limit_settings(self, agent_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The stored limits of ``agent_id``'s workspace and the agent's overrides."""
        with self._db.read() as conn:
            row = first_row(conn, _LIMITS, {"agent_id": agent_id})
        if row is None:
            return {}, {}
        return dict(row["workspace_limits"] or {}), dict(row["agent_limits"] or {})

    def workspace_limits(self, workspace_id: str) -> dict[str, Any]:
        """The limits set for a workspace (empty: the defaults).

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        query = sa.select(workspace_settings.c.runaway_limits).where(
            workspace_settings.c.workspace_id == workspace_id
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
        if row is None:
            raise NotFoundError(f"workspace {workspace_id} not found", field="workspace_id")
        return dict(row["runaway_limits"] or {})

    def set_workspace_limits(
        self,
        workspace_id: str,
        limits: Mapping[str, int | None],
        *,
        remove: Collection[str] = (),
        now: datetime,
    ) -> dict[str, Any]:
        """Merge ``limits`` (validated) into the workspace's, drop those named in ``remove``.

        Returns the stored result.

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        with self._db.write() as conn:
            query = (
                sa.select(workspace_settings.c.runaway_limits)
                .where(workspace_settings.c.workspace_id == workspace_id)
                .with_for_update()
            )
            row = first_row(conn, query)
            if row is None:
                raise NotFoundError(f"workspace {workspace_id} not found", field="workspace_id")
            merged = {**(row["runaway_limits"] or {}), **limits}
            for key in remove:
                merged.pop(key, None)
            conn.execute(
                sa.update(workspace_settings)
                .where(workspace_settings.c.workspace_id == workspace_id)
                .values(runaway_limits=merged, updated_at=now)
            )
        return merged

    def agent_limits(self, agent_id: str) -> dict[str, Any]:
        """The agent's overrides (empty: none).

        Raises:
            NotFoundError: no such agent (field ``agent_id``).
        """
        query = sa.select(agents.c.runaway_limits).where(agents.c.id == agent_id)
        with self._db.read() as conn:
            row = first_row(conn, query)
        if row is None:
            raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
        return dict(row["runaway_limits"] or {})

    def set_agent_limits(
        self,
        agent_id: str,
        limits: Mapping[str, int | None],
        *,
        remove: Collection[str] = (),
        now: datetime,
    ) -> dict[str, Any]:
        """Merge ``limits`` into the agent's overrides and drop those named in ``remove``.

        Raises:
            NotFoundError: no such agent (field ``agent_id``).
        """
        with self._db.write() as conn:
            query = (
                sa.select(agents.c.runaway_limits).where(agents.c.id == agent_id).with_for_update()
            )
            row = first_row(conn, query)
            if row is None:
                raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
            merged = {**(row["runaway_limits"] or {}), **limits}
            for key in remove:
                merged.pop(key, None)
            conn.execute(
                sa.update(agents)
                .where(agents.c.id == agent_id)
                .values(runaway_limits=merged or None, updated_at=now)
            )
        return merged

    # --- counts ---------------------------------------------------------------------

    def count_self_wakes(self, agent_id: str, *, since: datetime, cap: int) -> int:
        """The agent's self-wakes requested at or after ``since`` and not held (≤ cap + 1)."""
        query = sa.select(wakeup_requests.c.id).where(
            wakeup_requests.c.agent_id == agent_id,
            wakeup_requests.c.source == WakeSource.SELF.value,
            wakeup_requests.c.requested_at >= since,
            wakeup_requests.c.status.not_in([WakeupStatus.HELD.value, WakeupStatus.RELEASED.value]),
        )
        with self._db.read() as conn:
            return _bounded_count(conn, query, cap)

    def count_agent_runs(self, agent_id: str, *, since: datetime, cap: int) -> int:
        """The agent's runs requested at or after ``since`` (≤ cap + 1)."""
        query = sa.select(runs.c.id).where(
            runs.c.agent_id == agent_id, runs.c.requested_at >= since
        )
        with self._db.read() as conn:
            return _bounded_count(conn, query, cap)

    def count_workspace_runs(self, workspace_id: str, *, since: datetime, cap: int) -> int:
        """The workspace's runs requested at or after ``since`` (≤ cap + 1)."""
        query = sa.select(runs.c.id).where(
            runs.c.workspace_id == workspace_id, runs.c.requested_at >= since
        )
        with self._db.read() as conn:
            return _bounded_count(conn, query, cap)

    def count_routine_runs(
        self, routine_id: str, *, since: datetime, cap: int, besides: int | None = None
    ) -> int:
        """The routine's runs since ``since`` that made a task or made or joined a run.

        ``besides``: a routine run not to count (the one being judged). At most cap + 1.
        """
        query = sa.select(routine_runs.c.id).where(
            routine_runs.c.routine_id == routine_id,
            routine_runs.c.created_at >= since,
            sa.or_(
                routine_runs.c.linked_run_id.is_not(None),
                routine_runs.c.linked_task_id.is_not(None),
            ),
        )
        if besides is not None:
            query = query.where(routine_runs.c.id != besides)
        with self._db.read() as conn:
            return _bounded_count(conn, query, cap)

    def routine_of_task(self, task_id: str) -> tuple[str, int] | None:
        """``(routine id, routine run id)`` of the routine run that created ``task_id``."""
        query = (
            sa.select(routine_runs.c.routine_id, routine_runs.c.id)
            .where(routine_runs.c.linked_task_id == task_id)
            .limit(1)
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
        return None if row is None else (row["routine_id"], row["id"])

    # --- no progress ------------------------------------------------------------------

    def recent_task_runs(self, agent_id: str, task_id: str, *, count: int) -> list[RecentRun]:
        """The agent's ``count`` latest launched runs on ``task_id``, newest first.

        Each with the agent of the run that caused it; the run still running whose action
        makes the new wake is one of them.
        """
        cause = runs.alias("cause")
        query = (
            sa.select(
                runs.c.id,
                runs.c.status,
                runs.c.started_at.label("since"),
                cause.c.agent_id.label("causing_agent_id"),
            )
            .select_from(runs.outerjoin(cause, cause.c.id == runs.c.caused_by_run_id))
            .where(
                runs.c.task_id == task_id,
                runs.c.agent_id == agent_id,
                runs.c.started_at.is_not(None),
            )
            .order_by(runs.c.id.desc())
            .limit(count)
        )
        with self._db.read() as conn:
            return [
                RecentRun(
                    id=row["id"],
                    status=row["status"],
                    since=row["since"],
                    causing_agent_id=row["causing_agent_id"],
                )
                for row in all_rows(conn, query)
            ]

    def task_progressed(self, task_id: str, agent_id: str, *, since: datetime) -> bool:
        """Whether ``task_id`` changed since ``since`` other than by ``agent_id``'s talk.

        A change is a state move, a comment by any author but ``agent_id``, or a subtask
        finished (``DONE``).
        """
        task_row = sa.select(tasks.c.workspace_id).where(tasks.c.id == task_id)
        with self._db.read() as conn:
            found = first_row(conn, task_row)
            if found is None:
                return True  # a vanished task is the pipeline's business, not a loop
            moved = sa.select(activity_log.c.id).where(
                activity_log.c.workspace_id == found["workspace_id"],
                activity_log.c.kind == "task_moved",
                activity_log.c.at >= since,
                activity_log.c.task_id == task_id,
            )
            other_comment = sa.select(comments.c.id).where(
                comments.c.task_id == task_id,
                comments.c.created_at >= since,
                sa.or_(
                    comments.c.author_kind != AuthorKind.AGENT.value,
                    comments.c.author_agent_id.is_(None),
                    comments.c.author_agent_id != agent_id,
                ),
            )
            child_done = sa.select(tasks.c.id).where(
                tasks.c.parent_id == task_id,
                tasks.c.state == TaskState.DONE.value,
                tasks.c.updated_at >= since,
            )
            for query in (moved, other_comment, child_done):
                if first_row(conn, query.limit(1)) is not None:
                    return True
        return False

    # --- held wakes -------------------------------------------------------------------

    def held_wakes(
        self,
        *,
        workspace_id: str | None = None,
        agent_id: str | None = None,
        reason: str | None = None,
        ids: Collection[int] | None = None,
    ) -> list[WakeupRequest]:
        """Held wakeup requests, oldest first, filtered by the arguments given."""
        query = sa.select(wakeup_requests).where(
            wakeup_requests.c.status == WakeupStatus.HELD.value
        )
        if workspace_id is not None:
            query = query.where(wakeup_requests.c.workspace_id == workspace_id)
        if agent_id is not None:
            query = query.where(wakeup_requests.c.agent_id == agent_id)
        if reason is not None:
            query = query.where(wakeup_requests.c.status_reason == reason)
        if ids is not None:
            query = query.where(wakeup_requests.c.id.in_(sorted(set(ids))))
        with self._db.read() as conn:
            return [
                wakeup_from_row(row) for row in all_rows(conn, query.order_by(wakeup_requests.c.id))
            ]

    def held_counts(self, workspace_id: str) -> dict[str, int]:
        """How many wakes of each agent of the workspace are held (agents with none left out)."""
        query = (
            sa.select(wakeup_requests.c.agent_id, sa.func.count())
            .where(
                wakeup_requests.c.workspace_id == workspace_id,
                wakeup_requests.c.status == WakeupStatus.HELD.value,
            )
            .group_by(wakeup_requests.c.agent_id)
        )
        with self._db.read() as conn:
            return {agent_id: int(count) for agent_id, count in conn.execute(query)}

    def take_held(self, ids: Collection[int]) -> list[WakeupRequest]:
        """Turn those of ``ids`` still ``held`` to ``released`` and return them, oldest first.

        A compare-and-set: of two releases of one wake, only one gets it back.
        """
        if not ids:
            return []
        with self._db.write() as conn:
            held = [
                wakeup_from_row(row)
                for row in all_rows(
                    conn,
                    sa.update(wakeup_requests)
                    .where(
                        wakeup_requests.c.id.in_(sorted(set(ids))),
                        wakeup_requests.c.status == WakeupStatus.HELD.value,
                    )
                    .values(status=WakeupStatus.RELEASED.value)
                    .returning(*wakeup_requests.c),
                )
            ]
        return sorted(held, key=lambda request: request.id)

    def link_released(self, wakeup_id: int, run_id: int | None) -> None:
        """Record the run a released wake's successor made or joined."""
        with self._db.write() as conn:
            conn.execute(
                sa.update(wakeup_requests)
                .where(wakeup_requests.c.id == wakeup_id)
                .values(run_id=run_id)
            )
