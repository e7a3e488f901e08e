"""Continuation summaries, the inputs their builder reads, and prompt bookkeeping.

One current summary row per (agent, scope), no history (specification "Continuation
summary"). The reads here feed :mod:`office_scheduler.summary` (activity counts, active
blockers) and the resume delta (the prior prompt's snapshot, decided approvals). Every
public method is one transaction.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.status import (
    ACTIONABLE_TASK_STATES,
    TERMINAL_TASK_STATES,
    AgentRole,
    InboxKind,
    RunStatus,
    TaskState,
)
from office_scheduler.domain.summaries import (
    ActiveBlocker,
    ActivityStats,
    ApprovalDecision,
    ContinuationSummary,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import (
    agents,
    approvals,
    continuation_summaries,
    inbox_items,
    run_events,
    runs,
    task_blockers,
    tasks,
)
from office_scheduler.store.sql import PerDialect, Row, all_rows, first_row

#: Largest summary body stored, in UTF-8 bytes (specification: "capped at 8 KB").
MAX_SUMMARY_BYTES = 8192
#: Run event kind whose data holds the snapshot of what a prompt showed.
PROMPT_EVENT = "prompt_built"
#: How many of a run's first events are searched for its ``prompt_built`` event.
_PROMPT_EVENT_WINDOW = 500

_TERMINAL = [state.value for state in TERMINAL_TASK_STATES]
_BUDGET_KINDS = [InboxKind.BUDGET_ALERT.value, InboxKind.BUDGET_EXCEEDED.value]


def _summary_from_row(row: Row) -> ContinuationSummary:
    return ContinuationSummary(
        agent_id=row["agent_id"],
        scope=row["scope"],
        content=row["content"],
        content_tokens=row["content_tokens"],
        updated_at=row["updated_at"],
        updated_by_run_id=row["updated_by_run_id"],
    )


def _count(table: sa.Table, *where: Any) -> sa.ScalarSelect[Any]:
    return sa.select(sa.func.count()).select_from(table).where(*where).scalar_subquery()


def _managed_agents() -> sa.Select[Any]:
    """Ids of the agents ``agent_id`` manages (bound: ``agent_id``).

    The agent itself, the agents whose ``reports_to`` is it, and, when it is a
    coordinator, every agent of its workspace that reports to nobody; none when there is
    no such agent.
    """
    me = agents.alias("me")
    coordinator = me.c.role.in_([role.value for role in AgentRole if role.is_coordinator])
    return (
        sa.select(agents.c.id)
        .join(me, me.c.id == sa.bindparam("agent_id"))
        .where(
            agents.c.workspace_id == me.c.workspace_id,
            sa.or_(
                agents.c.id == me.c.id,
                agents.c.reports_to == me.c.id,
                sa.and_(coordinator, agents.c.reports_to.is_(None)),
            ),
        )
    )


def _activity_counts() -> sa.Select[Any]:
    """The five counts of :meth:`SummaryStore.activity_stats` in one statement."""
    workspace_id: sa.BindParameter[str] = sa.bindparam("workspace_id")
    since = sa.bindparam("since", type_=tasks.c.updated_at.type)
    until = sa.bindparam("until", type_=tasks.c.updated_at.type)
    window_tasks = (tasks.c.updated_at > since, tasks.c.updated_at <= until)
    window_inbox = (inbox_items.c.created_at > since, inbox_items.c.created_at <= until)
    return sa.select(
        _count(
            tasks,
            tasks.c.workspace_id == workspace_id,
            tasks.c.state == TaskState.DONE.value,
            *window_tasks,
        ),
        _count(
            runs,
            runs.c.workspace_id == workspace_id,
            runs.c.status == RunStatus.FAILED.value,
            runs.c.finished_at > since,
            runs.c.finished_at <= until,
        ),
        _count(
            inbox_items,
            inbox_items.c.workspace_id == workspace_id,
            inbox_items.c.kind == InboxKind.AGENT_ERROR.value,
            *window_inbox,
        ),
        _count(
            inbox_items,
            inbox_items.c.workspace_id == workspace_id,
            inbox_items.c.kind.in_(_BUDGET_KINDS),
            *window_inbox,
        ),
        _count(
            tasks,
            tasks.c.workspace_id == workspace_id,
            tasks.c.state.in_([state.value for state in ACTIONABLE_TASK_STATES]),
            tasks.c.archived_at.is_(None),
        ),
    )


def _stuck_queries() -> tuple[sa.Select[Any], sa.Select[Any]]:
    """The stuck tasks of the agents ``agent_id`` manages, and open blockers' titles."""
    blocker = tasks.alias("blocker")
    open_blocker = (
        sa.select(task_blockers.c.task_id)
        .join(blocker, blocker.c.id == task_blockers.c.blocker_task_id)
        .where(blocker.c.state.not_in(_TERMINAL))
    )
    stuck = (
        sa.select(tasks)
        .where(
            tasks.c.assignee_agent_id.in_(_managed_agents()),
            tasks.c.archived_at.is_(None),
            sa.or_(
                tasks.c.state == TaskState.BLOCKED.value,
                sa.and_(tasks.c.state.not_in(_TERMINAL), tasks.c.id.in_(open_blocker)),
            ),
        )
        .order_by(tasks.c.updated_at, tasks.c.id)
        .limit(sa.bindparam("limit"))
    )
    titles = (
        sa.select(task_blockers.c.task_id, blocker.c.title)
        .join(blocker, blocker.c.id == task_blockers.c.blocker_task_id)
        .where(
            task_blockers.c.task_id.in_(sa.bindparam("task_ids", expanding=True)),
            blocker.c.state.not_in(_TERMINAL),
        )
        .order_by(task_blockers.c.task_id, blocker.c.title, blocker.c.id)
    )
    return stuck, titles


_ACTIVITY_COUNTS = _activity_counts()
_STUCK_TASKS, _OPEN_BLOCKER_TITLES = _stuck_queries()
_SUMMARY_OF = sa.select(continuation_summaries).where(
    continuation_summaries.c.agent_id == sa.bindparam("agent_id"),
    continuation_summaries.c.scope == sa.bindparam("scope"),
)


def _upsert_summary(insert: Any) -> sa.Executable:
    stmt = insert(continuation_summaries)
    replaced = ("content", "content_tokens", "updated_at", "updated_by_run_id")
    upsert: sa.Executable = stmt.on_conflict_do_update(
        index_elements=["agent_id", "scope"],
        set_={name: stmt.excluded[name] for name in replaced},
    ).returning(*continuation_summaries.c)
    return upsert


_UPSERT_SUMMARY = PerDialect(_upsert_summary)


class SummaryStore:
    """Continuation summaries and the queries their builder and the resume delta need."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get_summary(self, agent_id: str, scope: str) -> ContinuationSummary | None:
        """Return the current summary of ``(agent, scope)``, or ``None``."""
        with self._db.read() as conn:
            row = first_row(conn, _SUMMARY_OF, {"agent_id": agent_id, "scope": scope})
            return None if row is None else _summary_from_row(row)

    def upsert_summary(
        self,
        *,
        agent_id: str,
        scope: str,
        content: str,
        content_tokens: int,
        run_id: int | None,
        now: datetime,
    ) -> ContinuationSummary:
        """Replace the summary of ``(agent, scope)`` (one current row, no history).

        Returns:
            The stored summary.

        Raises:
            InvalidInputError: ``content`` is over 8 KB of UTF-8 (field ``content``) or the
                scope is blank or over 200 characters (field ``scope``).
        """
        if len(content.encode("utf-8")) > MAX_SUMMARY_BYTES:
            raise InvalidInputError("summary is over 8 KB", field="content")
        if not scope.strip() or len(scope) > 200:
            raise InvalidInputError("scope must be 1..200 characters", field="scope")
        values = {
            "agent_id": agent_id,
            "scope": scope,
            "content": content,
            "content_tokens": content_tokens,
            "updated_at": now,
            "updated_by_run_id": run_id,
        }
        with self._db.write() as conn:
            row = conn.execute(_UPSERT_SUMMARY(conn), values).mappings().one()
            return _summary_from_row(row)

    def activity_stats(
        self, workspace_id: str, *, since: datetime, until: datetime
    ) -> ActivityStats:
        """Count the workspace's activity in ``(since, until]`` (see :class:`ActivityStats`).

        ``open_tasks`` counts the actionable tasks at the time of the query.
        """
        with self._db.read() as conn:  # one round trip for the five counts
            params = {"workspace_id": workspace_id, "since": since, "until": until}
            found = conn.execute(_ACTIVITY_COUNTS, params).one()
            completed, failed, escalations, budget, open_tasks = found
        return ActivityStats(
            since=since,
            until=until,
            completed_tasks=int(completed),
            failed_runs=int(failed),
            agent_error_escalations=int(escalations),
            budget_signals=int(budget),
            open_tasks=int(open_tasks),
        )

    def active_blockers(self, agent_id: str, *, limit: int = 20) -> list[ActiveBlocker]:
        """Stuck tasks of the agents ``agent_id`` manages, oldest change first.

        Managed agents: the agent itself, the agents whose ``reports_to`` is it, and, when
        it is a ``ceo``/``coordinator``, every agent that reports to nobody. A task is stuck
        when it is unarchived and ``BLOCKED``, or open with at least one open blocker (a
        blocker task not ``DONE``/``CANCELLED``). Order: ``updated_at``, then id.
        """
        with self._db.read() as conn:
            stuck = all_rows(conn, _STUCK_TASKS, {"agent_id": agent_id, "limit": limit})
            waiting: dict[str, list[str]] = defaultdict(list)
            if stuck:
                task_ids = [row["id"] for row in stuck]
                for task_id, title in conn.execute(_OPEN_BLOCKER_TITLES, {"task_ids": task_ids}):
                    waiting[task_id].append(title)
        return [
            ActiveBlocker(
                task_id=row["id"],
                title=row["title"],
                state=row["state"],
                assignee_agent_id=row["assignee_agent_id"],
                waiting_on=tuple(waiting[row["id"]]),
                since=row["updated_at"],
            )
            for row in stuck
        ]

    def prompt_snapshot(self, run_id: int) -> dict[str, Any] | None:
        """The ``snapshot`` of the newest ``prompt_built`` event of a run, or ``None``.

        Only the run's first 500 events are searched (the prompt is built before launch).
        """
        first = (
            sa.select(run_events.c.id)
            .where(run_events.c.run_id == run_id)
            .order_by(run_events.c.id)
            .limit(_PROMPT_EVENT_WINDOW)
            .subquery()
        )
        query = (
            sa.select(run_events.c.data)
            .where(run_events.c.id.in_(sa.select(first.c.id)), run_events.c.kind == PROMPT_EVENT)
            .order_by(run_events.c.id.desc())
            .limit(1)
        )
        with self._db.read() as conn:
            data = conn.execute(query).scalar()
        snapshot = dict(data or {}).get("snapshot")
        return dict(snapshot) if isinstance(snapshot, dict) else None

    def decided_approvals(self, task_id: str, *, since: datetime) -> list[ApprovalDecision]:
        """Approvals of a task decided after ``since``, oldest decision first."""
        query = (
            sa.select(approvals)
            .where(
                approvals.c.task_id == task_id,
                approvals.c.resolved_at.is_not(None),
                approvals.c.resolved_at > since,
            )
            .order_by(approvals.c.resolved_at, approvals.c.id)
        )
        with self._db.read() as conn:
            return [
                ApprovalDecision(
                    approval_id=row["id"],
                    title=row["title"],
                    status=row["status"],
                    decision_note=row["decision_note"],
                    decided_by=row["decided_by"],
                    resolved_at=row["resolved_at"],
                )
                for row in all_rows(conn, query)
            ]
