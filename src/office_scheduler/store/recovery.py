"""Queries of the Office recovery sweep: assigned Office tasks whose wake was lost.

Specification "Recovery sweep (unstarted Office tasks)": authoritative Office ``TODO`` tasks
created inside their workspace's ``recovery_lookback_hours``, with an assignee, and no run of
that (task, assignee) in ``queued``/``claimed``/``running``/``scheduled_retry``/``finished``.
Only the task's creation time is bounded by the lookback; matching runs are not, so a task
that already started is never taken for unstarted because its run is old. Failed and
cancelled runs do not block recovery.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from office_scheduler.domain.status import (
    CLAIMABLE_AGENT_STATUSES,
    RECOVERY_BLOCKING_RUN_STATUSES,
    RunStatus,
    TaskState,
    WakeSource,
)
from office_scheduler.store.budgets import budget_blocked_clause
from office_scheduler.store.engine import Database
from office_scheduler.store.office_common import office_task_clause
from office_scheduler.store.schema import (
    agents,
    runs,
    tasks,
    wakeup_requests,
    workspace_settings,
    workspaces,
)

#: The marker of a recovery re-dispatch's idempotency key (``task_assigned:T:A:recovery:n``).
RECOVERY_KEY_MARKER = ":recovery:"


def assigned_key(task_id: str, agent_id: str) -> str:
    """The idempotency key of a task's creation-time ``task_assigned`` wake."""
    return f"task_assigned:{task_id}:{agent_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecoveryCandidate:
    """An Office task whose assignee never got (or lost) its ``task_assigned`` wake.

    Attributes:
        assigned_key_used: a wake with the creation key :func:`assigned_key` exists (the
            wake was delivered and its runs all failed or were cancelled).
        redispatches: recovery re-dispatches already made for this (task, assignee).
    """

    task_id: str
    workspace_id: str
    agent_id: str
    created_at: datetime
    assigned_key_used: bool
    redispatches: int


class RecoveryQueries:
    """Recovery sweep reads; mixed into :class:`~office_scheduler.store.queue.QueueStore`."""

    _db: Database

    def office_adopted(self) -> bool:
        """Whether any workspace has adopted Office (has at least one agent)."""
        with self._db.read() as conn:
            return conn.execute(sa.select(agents.c.id).limit(1)).first() is not None

    def recovery_candidates(
        self, *, now: datetime, limit: int, max_redispatches: int
    ) -> list[RecoveryCandidate]:
        """Assigned Office tasks whose ``task_assigned`` wake was lost, oldest first.

        Besides the selection of the module docstring: the assignee is ``idle`` or
        ``working`` (paused, stopped and pending agents are skipped), no blocking budget of
        the task's scopes fired its action this period, no run of the task
        (for anyone) is queued, and a task whose wake did arrive (its creation key exists)
        is re-dispatched at most ``max_redispatches`` times. The scan is bounded by the
        ``tasks(state, created_at)`` index.

        Args:
            now: the sweep instant; tasks created after it are not considered.
            limit: most candidates returned.
            max_redispatches: re-dispatch cap of tasks whose creation wake exists.
        """
        with self._db.read() as conn:
            by_hours: dict[int, list[str]] = defaultdict(list)
            windows = conn.execute(
                sa.select(
                    workspace_settings.c.workspace_id,
                    workspace_settings.c.recovery_lookback_hours,
                ).where(
                    sa.exists().where(agents.c.workspace_id == workspace_settings.c.workspace_id)
                )
            )
            for workspace_id, hours in windows:
                by_hours[int(hours)].append(str(workspace_id))
            if not by_hours:
                return []
            oldest = now - timedelta(hours=max(by_hours))
            in_window = sa.or_(
                *(
                    sa.and_(
                        tasks.c.workspace_id.in_(ids),
                        tasks.c.created_at >= now - timedelta(hours=hours),
                    )
                    for hours, ids in sorted(by_hours.items())
                )
            )
            rows = conn.execute(_candidates(in_window, oldest, now, limit, max_redispatches))
            return [
                RecoveryCandidate(
                    task_id=row.id,
                    workspace_id=row.workspace_id,
                    agent_id=row.assignee_agent_id,
                    created_at=row.created_at,
                    assigned_key_used=bool(row.assigned_key_used),
                    redispatches=int(row.redispatches),
                )
                for row in rows
            ]


def _candidates(
    in_window: sa.ColumnElement[bool],
    oldest: datetime,
    now: datetime,
    limit: int,
    max_redispatches: int,
) -> sa.Select[tuple[str, str, str, datetime, bool, int]]:
    assignee = tasks.c.assignee_agent_id
    blocking = sa.exists().where(
        runs.c.task_id == tasks.c.id,
        runs.c.agent_id == assignee,
        runs.c.status.in_([status.value for status in RECOVERY_BLOCKING_RUN_STATUSES]),
    )
    # "Skip if a wakeup is already queued for this task": a queued run of anyone.
    queued = sa.exists().where(
        runs.c.task_id == tasks.c.id, runs.c.status == RunStatus.QUEUED.value
    )
    key = sa.literal("task_assigned:", sa.String) + tasks.c.id + sa.literal(":", sa.String)
    key_used = sa.exists().where(wakeup_requests.c.idempotency_key == key + assignee)
    redispatches = (
        sa.select(sa.func.count())
        .where(
            wakeup_requests.c.agent_id == assignee,
            wakeup_requests.c.task_id == tasks.c.id,
            wakeup_requests.c.source == WakeSource.TASK_ASSIGNED.value,
            wakeup_requests.c.idempotency_key.contains(RECOVERY_KEY_MARKER, autoescape=True),
        )
        .scalar_subquery()
    )
    return (
        sa.select(
            tasks.c.id,
            tasks.c.workspace_id,
            assignee,
            tasks.c.created_at,
            key_used.label("assigned_key_used"),
            redispatches.label("redispatches"),
        )
        .select_from(
            tasks.join(workspaces, workspaces.c.id == tasks.c.workspace_id).join(
                agents, agents.c.id == assignee
            )
        )
        .where(
            tasks.c.state == TaskState.TODO.value,
            tasks.c.created_at >= oldest,
            tasks.c.created_at <= now,
            in_window,
            tasks.c.archived_at.is_(None),
            office_task_clause(),
            agents.c.status.in_([status.value for status in CLAIMABLE_AGENT_STATUSES]),
            ~blocking,
            ~queued,
            # "Skip if the agent's invocation budget is exhausted" (a fired blocking budget).
            ~budget_blocked_clause(tasks.c.workspace_id, tasks.c.project_id, assignee, now=now),
            sa.or_(~key_used, redispatches < max_redispatches),
        )
        .order_by(tasks.c.created_at, tasks.c.id)
        .limit(limit)
    )
