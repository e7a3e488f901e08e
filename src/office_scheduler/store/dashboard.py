"""Read-only aggregate queries of the web dashboard (one read transaction each).

Every query is bounded: aggregates group in SQL over an indexed range, listings fetch one
page. The same SQL runs on SQLite and PostgreSQL (day buckets are computed from UTC bounds
given by the caller, not with a dialect's date functions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import Approval, Run, Task, WakeupRequest
from office_scheduler.domain.status import (
    LIVE_RUN_STATUSES,
    ApprovalStatus,
    InboxStatus,
    RunReason,
    RunStatus,
    TaskState,
)
from office_scheduler.domain.summaries import ContinuationSummary
from office_scheduler.store.agent_health import FailingStreak, failing_streaks
from office_scheduler.store.engine import Database
from office_scheduler.store.listing import MAX_ID
from office_scheduler.store.office_common import load_tasks, office_task_clause, task_select
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import approval_from_row, run_from_row, wakeup_from_row
from office_scheduler.store.schema import (
    activity_log,
    approvals,
    continuation_summaries,
    cost_events,
    inbox_items,
    routine_runs,
    run_events,
    runs,
    tasks,
    wakeup_requests,
    workspaces,
)
from office_scheduler.store.sql import all_rows, first_row

#: Outcome names of :meth:`DashboardStore.runs_per_day`, in chart order.
OUTCOMES = ("completed", "skipped", "failed", "cancelled", "open")

#: Statuses of runs still waiting for a slot (counted as queue depth).
WAITING_STATUSES = (RunStatus.QUEUED.value, RunStatus.SCHEDULED_RETRY.value)


@dataclass(frozen=True, slots=True)
class DayOutcomes:
    """Runs requested on one UTC day, counted by outcome (keys of :data:`OUTCOMES`)."""

    day: datetime
    counts: dict[str, int]

    @property
    def total(self) -> int:
        """All runs of the day."""
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True)
class AgentLoad:
    """What one agent is doing: its live run, waiting runs and its latest wake.

    Attributes:
        current: the newest ``claimed`` or ``running`` run, if any.
        waiting: runs ``queued`` or ``scheduled_retry``.
        last_wake: the agent's newest wakeup request, if any.
        spent_subcents: cost recorded for the agent since the ``since`` instant asked for.
    """

    current: Run | None = None
    waiting: int = 0
    last_wake: WakeupRequest | None = None
    spent_subcents: int = 0


@dataclass(frozen=True, slots=True)
class BoardColumn:
    """One state's column: the most recently updated tasks and how many there are."""

    state: TaskState
    tasks: list[Task] = field(default_factory=list)
    total: int = 0


def _outcome(status: str, completed: bool) -> str:
    if status == RunStatus.FINISHED.value:
        return "completed" if completed else "skipped"
    if status in (RunStatus.FAILED.value, RunStatus.CANCELLED.value):
        return status
    return "open"


def _day_bucket(column: sa.ColumnElement[Any], starts: Sequence[datetime]) -> sa.Case[Any]:
    """A CASE giving the index of the day (``starts[i] <= value < starts[i+1]``)."""
    whens = [(column < start, index - 1) for index, start in enumerate(starts) if index > 0]
    return sa.case(*whens, else_=len(starts) - 1)


class DashboardStore:
    """Aggregates and filtered listings for the dashboard pages (read-only)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def runs_per_day(
        self, workspace_id: str, *, first_day: datetime, days: int
    ) -> list[DayOutcomes]:
        """Runs requested per UTC day from ``first_day`` on, by outcome.

        Args:
            workspace_id: the workspace.
            first_day: aware UTC midnight of the first day.
            days: how many days (1..366).

        Returns:
            One entry per day, oldest first, every outcome of :data:`OUTCOMES` present.
            ``completed``: finished with reason ``completed``; ``skipped``: finished
            without launching work (idle skip, hold, conflict...); ``failed`` and
            ``cancelled``; ``open``: not ended yet.
        """
        if not 1 <= days <= 366:
            raise InvalidInputError("days must be in 1..366", field="days")
        starts = [first_day + timedelta(days=index) for index in range(days)]
        end = first_day + timedelta(days=days)
        bucket = _day_bucket(runs.c.requested_at, starts).label("bucket")
        completed = (runs.c.reason == RunReason.COMPLETED.value).label("completed")
        query = (
            sa.select(bucket, runs.c.status, completed, sa.func.count().label("n"))
            .where(
                runs.c.workspace_id == workspace_id,
                runs.c.requested_at >= first_day,
                runs.c.requested_at < end,
            )
            .group_by(bucket, runs.c.status, completed)
        )
        counts = [dict.fromkeys(OUTCOMES, 0) for _ in starts]
        with self._db.read() as conn:
            for row in all_rows(conn, query):
                counts[int(row["bucket"])][_outcome(row["status"], bool(row["completed"]))] += int(
                    row["n"]
                )
        return [
            DayOutcomes(day=start, counts=count)
            for start, count in zip(starts, counts, strict=True)
        ]

    def failing(self, agent_ids: Sequence[str]) -> dict[str, FailingStreak]:
        """The agents of ``agent_ids`` whose newest attempted run failed, with their streak."""
        return failing_streaks(self._db, agent_ids)

    def agent_loads(
        self, workspace_id: str, agent_ids: Sequence[str], *, spent_since: datetime
    ) -> dict[str, AgentLoad]:
        """Per agent of ``agent_ids``: live run, waiting runs, latest wake and spend.

        Args:
            workspace_id: the agents' workspace.
            agent_ids: the agents to describe.
            spent_since: aware UTC instant from which cost is summed (e.g. the month start).

        Returns:
            An :class:`AgentLoad` for every id of ``agent_ids``.
        """
        found: dict[str, dict[str, Any]] = {agent_id: {} for agent_id in agent_ids}
        if not agent_ids:
            return {}
        with self._db.read() as conn:
            waiting = conn.execute(
                sa.select(runs.c.agent_id, sa.func.count())
                .where(runs.c.agent_id.in_(agent_ids), runs.c.status.in_(WAITING_STATUSES))
                .group_by(runs.c.agent_id)
            )
            for agent_id, count in waiting:
                found[agent_id]["waiting"] = int(count)
            live = all_rows(
                conn,
                sa.select(runs)
                .where(
                    runs.c.agent_id.in_(agent_ids),
                    runs.c.status.in_([status.value for status in LIVE_RUN_STATUSES]),
                )
                .order_by(runs.c.id),
            )
            for row in live:
                found[row["agent_id"]]["current"] = run_from_row(row)
            spend = conn.execute(
                sa.select(cost_events.c.agent_id, sa.func.sum(cost_events.c.cost_subcents))
                .where(
                    cost_events.c.workspace_id == workspace_id,
                    cost_events.c.at >= spent_since,
                    cost_events.c.agent_id.in_(agent_ids),
                )
                .group_by(cost_events.c.agent_id)
            )
            for agent_id, total in spend:
                found[agent_id]["spent_subcents"] = int(total or 0)
            for agent_id in agent_ids:
                # The (agent_id, requested_at) index makes each a one-row lookup.
                last = first_row(
                    conn,
                    sa.select(wakeup_requests)
                    .where(wakeup_requests.c.agent_id == agent_id)
                    .order_by(wakeup_requests.c.requested_at.desc(), wakeup_requests.c.id.desc())
                    .limit(1),
                )
                if last is not None:
                    found[agent_id]["last_wake"] = wakeup_from_row(last)
        return {agent_id: AgentLoad(**values) for agent_id, values in found.items()}

    def board(self, workspace_id: str, *, per_column: int = 50) -> list[BoardColumn]:
        """The workspace's Office tasks (not archived) by state, newest change first.

        Args:
            workspace_id: the workspace.
            per_column: most tasks shown per state (1..500); ``total`` counts them all.

        Returns:
            One column per :class:`TaskState`, in declaration order.
        """
        per_column = check_limit(per_column)
        office = sa.and_(
            tasks.c.workspace_id == workspace_id,
            tasks.c.archived_at.is_(None),
            office_task_clause(),
        )
        columns: list[BoardColumn] = []
        with self._db.read() as conn:
            totals: dict[str, int] = dict(
                conn.execute(
                    sa.select(tasks.c.state, sa.func.count())
                    .select_from(tasks.join(workspaces, tasks.c.workspace_id == workspaces.c.id))
                    .where(office)
                    .group_by(tasks.c.state)
                ).all()
            )
            for state in TaskState:
                query = (
                    task_select()
                    .where(office, tasks.c.state == state.value)
                    .order_by(tasks.c.updated_at.desc(), tasks.c.id)
                    .limit(per_column)
                )
                found = load_tasks(conn, query) if totals.get(state.value) else []
                columns.append(
                    BoardColumn(state=state, tasks=found, total=int(totals.get(state.value, 0)))
                )
        return columns

    def search_runs(
        self,
        workspace_id: str,
        *,
        agent_id: str | None = None,
        status: RunStatus | None = None,
        reason: RunReason | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Run]:
        """One page of a workspace's runs, newest first, filtered (``None`` = any).

        Args:
            workspace_id: the workspace.
            agent_id: only this agent's runs.
            status: only runs in this status.
            reason: only runs that ended with this reason.
            since: requested at or after this aware instant.
            until: requested strictly before this aware instant.
            limit: page size (1..500).
            cursor: ``next_cursor`` of the previous page (a run id).

        Raises:
            InvalidInputError: a bad limit or cursor.
        """
        limit = check_limit(limit)
        query = sa.select(runs).where(runs.c.workspace_id == workspace_id)
        if agent_id is not None:
            query = query.where(runs.c.agent_id == agent_id)
        if status is not None:
            query = query.where(runs.c.status == RunStatus(status).value)
        if reason is not None:
            query = query.where(runs.c.reason == RunReason(reason).value)
        if since is not None:
            query = query.where(runs.c.requested_at >= since)
        if until is not None:
            query = query.where(runs.c.requested_at < until)
        if cursor is not None:
            (before,) = decode_cursor(cursor, (int,))
            if not 0 < before <= MAX_ID:
                raise InvalidInputError(f"invalid cursor {cursor!r}", field="cursor")
            query = query.where(runs.c.id < before)
        query = query.order_by(runs.c.id.desc()).limit(limit + 1)
        with self._db.read() as conn:
            found = [run_from_row(row) for row in all_rows(conn, query)]
        return make_page(found, limit=limit, key=lambda run: (run.id,))

    def run_cost_subcents(self, run_id: int) -> int | None:
        """Cost recorded for a run (sub-cents), ``None`` when none was recorded."""
        with self._db.read() as conn:
            total = conn.execute(
                sa.select(sa.func.sum(cost_events.c.cost_subcents)).where(
                    cost_events.c.run_id == run_id
                )
            ).scalar_one()
        return None if total is None else int(total)

    def change_stamp(self) -> tuple[Any, ...]:
        """A cheap fingerprint that changes whenever something shown on a page changes.

        The newest ids of runs, run events, wakeup requests, activity, inbox items and
        routine runs, the newest task change, and the numbers of pending approvals and open
        inbox items: small indexed lookups, so polling it every second is cheap.
        """
        newest = [
            sa.select(sa.func.max(table.c.id)).scalar_subquery()
            for table in (
                runs,
                run_events,
                wakeup_requests,
                activity_log,
                inbox_items,
                routine_runs,
            )
        ]
        query = sa.select(
            *newest,
            sa.select(sa.func.max(tasks.c.updated_at)).scalar_subquery(),
            sa.select(sa.func.count())
            .select_from(approvals)
            .where(approvals.c.status == ApprovalStatus.PENDING.value)
            .scalar_subquery(),
            sa.select(sa.func.count())
            .select_from(inbox_items)
            .where(inbox_items.c.status == InboxStatus.OPEN.value)
            .scalar_subquery(),
        )
        with self._db.read() as conn:
            row = conn.execute(query).one()
        return tuple(row)

    def task_approvals(self, task_id: str, *, limit: int = 50) -> list[Approval]:
        """The task's approvals, newest first (at most ``limit``, 1..500)."""
        limit = check_limit(limit)
        query = (
            sa.select(approvals)
            .where(approvals.c.task_id == task_id)
            .order_by(approvals.c.created_at.desc(), approvals.c.id.desc())
            .limit(limit)
        )
        with self._db.read() as conn:
            return [approval_from_row(row) for row in all_rows(conn, query)]

    def agent_summaries(self, agent_id: str) -> list[ContinuationSummary]:
        """Every continuation summary of an agent (``agent`` and ``routine:<id>`` scopes)."""
        table = continuation_summaries
        query = sa.select(table).where(table.c.agent_id == agent_id).order_by(table.c.scope)
        with self._db.read() as conn:
            return [
                ContinuationSummary(
                    agent_id=row["agent_id"],
                    scope=row["scope"],
                    content=row["content"],
                    content_tokens=int(row["content_tokens"]),
                    updated_at=row["updated_at"],
                    updated_by_run_id=row["updated_by_run_id"],
                )
                for row in all_rows(conn, query)
            ]
