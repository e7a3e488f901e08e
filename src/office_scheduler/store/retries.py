"""Scheduled retries of failed runs, escalation bookkeeping and the leaked-checkout reaper.

DESIGN §4 and §6: a failed run whose failure budget is not spent waits in
``scheduled_retry`` until its ``not_before``; maintenance then promotes it to ``queued`` or
cancels it when its task moved on. Every public method is one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.models import Agent, Run
from office_scheduler.domain.status import (
    LIVE_RUN_STATUSES,
    AgentRole,
    RunReason,
    RunStatus,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.queue_common import (
    claim_fence,
    earliest_not_before,
    live_run_exists,
    lock_agent_of_run,
    release_checkout_of,
    release_stale_checkout,
    stamp_cooldown,
)
from office_scheduler.store.queue_heads import lock_agents_of_runs, refresh_heads
from office_scheduler.store.rows import agent_from_row, run_from_row
from office_scheduler.store.schema import agents, runs, tasks
from office_scheduler.store.tokens import revoke_run_tokens

_COORDINATOR_ROLES = [role.value for role in AgentRole if role.is_coordinator]
_LIVE = [status.value for status in LIVE_RUN_STATUSES]


def _returning_update(conn: Connection, stmt: sa.Update) -> Run | None:
    row = conn.execute(stmt.returning(*runs.c)).mappings().first()
    return None if row is None else run_from_row(row)


class RetryTransitions:
    """Retry transitions and queries; mixed into the run-queue store."""

    _db: Database

    def schedule_retry(
        self,
        run_id: int,
        *,
        retry_at: datetime,
        reason: RunReason,
        error: str,
        now: datetime,
        result: Mapping[str, Any] | None = None,
        usage: Mapping[str, Any] | None = None,
        exit_code: int | None = None,
        node_id: str | None = None,
        claimed_at: datetime | None = None,
    ) -> Run | None:
        """Move a failed claimed or running run to ``scheduled_retry`` due at ``retry_at``.

        ``retry_count`` grows by one; the failure's reason and error are kept on the run; the
        claim is dropped and the task checkout this run holds is released. A launched session
        stamps the agent's cooldown like any finished session.

        Args:
            run_id: the failed run.
            retry_at: when the retry becomes due (its new ``not_before``).
            reason: why the attempt failed (``agent_failed``, ``timeout``, ...).
            error: the failure text.
            now: the failure instant.
            result: the agent's parsed result JSON of the failed attempt.
            usage: token and cost usage of the failed attempt.
            exit_code: the agent process's exit code.
            node_id: when given, only the node that still holds the claim may do this.
            claimed_at: when given, only the same claim may do this (see ``finish_run``).

        Returns:
            The run now waiting for its retry, or ``None`` when it was no longer ours.
        """
        with self._db.write() as conn:
            agent = lock_agent_of_run(conn, run_id)
            if agent is None:
                return None
            run = _returning_update(
                conn,
                sa.update(runs)
                .where(
                    runs.c.id == run_id,
                    runs.c.status.in_(_LIVE),
                    *claim_fence(node_id, claimed_at),
                )
                .values(
                    status=RunStatus.SCHEDULED_RETRY.value,
                    reason=reason.value,
                    error=error,
                    retry_count=runs.c.retry_count + 1,
                    not_before=retry_at,
                    result=dict(result) if result is not None else None,
                    usage=dict(usage) if usage is not None else None,
                    exit_code=exit_code,
                    claimed_by=None,
                    lease_expires_at=None,
                ),
            )
            if run is None:
                return None
            release_checkout_of(conn, run)
            revoke_run_tokens(conn, run.id, now)
            if run.started_at is not None:
                stamp_cooldown(conn, agent, now)
            return run

    def due_retries(self, *, now: datetime, limit: int = 500) -> list[Run]:
        """Scheduled retries whose ``not_before`` has come, oldest due first."""
        query = (
            sa.select(runs)
            .where(
                runs.c.status == RunStatus.SCHEDULED_RETRY.value,
                runs.c.not_before <= now,
            )
            .order_by(runs.c.not_before, runs.c.id)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [run_from_row(row) for row in conn.execute(query).mappings()]

    def next_retry_at(self) -> datetime | None:
        """The earliest ``not_before`` of any scheduled retry, or ``None`` when none waits."""
        with self._db.read() as conn:
            return earliest_not_before(conn, RunStatus.SCHEDULED_RETRY)

    def promote_retry(self, run_id: int, *, now: datetime) -> Run | None:
        """Put a due scheduled retry back to ``queued`` (the claim gate then applies).

        The failure's reason stays on the run until it is claimed again.

        Returns:
            The queued run, or ``None`` when it was no longer a scheduled retry.
        """
        with self._db.write() as conn:
            owners = lock_agents_of_runs(conn, [run_id])
            promoted = _returning_update(
                conn,
                sa.update(runs)
                .where(runs.c.id == run_id, runs.c.status == RunStatus.SCHEDULED_RETRY.value)
                .values(
                    status=RunStatus.QUEUED.value,
                    claimed_at=None,
                    started_at=None,
                    pid=None,
                ),
            )
            if promoted is not None:
                refresh_heads(conn, owners)
            return promoted

    def cancel_retry(self, run_id: int, *, reason: RunReason, now: datetime) -> Run | None:
        """Cancel a scheduled retry with ``reason``; clear its agent's stale checkout of the task.

        Returns:
            The cancelled run, or ``None`` when it was no longer a scheduled retry.
        """
        with self._db.write() as conn:
            cancelled = self._cancel_retries(conn, runs.c.id == run_id, reason=reason, now=now)
        return cancelled[0] if cancelled else None

    def cancel_pending_retries(
        self, task_id: str, *, agent_id: str, reason: RunReason, now: datetime
    ) -> list[Run]:
        """Cancel every scheduled retry of ``agent_id`` for ``task_id`` (task reassigned).

        The agent's checkout of the task is cleared unless one of its live runs holds it.

        Returns:
            The cancelled runs.
        """
        with self._db.write() as conn:
            where = sa.and_(runs.c.task_id == task_id, runs.c.agent_id == agent_id)
            return self._cancel_retries(conn, where, reason=reason, now=now)

    @staticmethod
    def _cancel_retries(
        conn: Connection, where: sa.ColumnElement[bool], *, reason: RunReason, now: datetime
    ) -> list[Run]:
        rows = (
            conn.execute(
                sa.update(runs)
                .where(where, runs.c.status == RunStatus.SCHEDULED_RETRY.value)
                .values(status=RunStatus.CANCELLED.value, reason=reason.value, finished_at=now)
                .returning(*runs.c)
            )
            .mappings()
            .all()
        )
        cancelled = sorted((run_from_row(row) for row in rows), key=lambda run: run.id)
        for run in cancelled:
            if run.task_id is not None:
                release_stale_checkout(conn, run.task_id, run.agent_id)
        return cancelled

    def coordinator_of(self, workspace_id: str) -> Agent | None:
        """The workspace's coordinator: its first-created ``coordinator`` or ``ceo`` agent."""
        query = (
            sa.select(agents)
            .where(agents.c.workspace_id == workspace_id, agents.c.role.in_(_COORDINATOR_ROLES))
            .order_by(agents.c.created_at, agents.c.id)
            .limit(1)
        )
        with self._db.read() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else agent_from_row(row)

    def escalation_streak(self, agent_id: str) -> int:
        """How many of the agent's runs escalated in a row.

        Counts runs that ended ``failed`` with reason ``retries_exhausted`` after both the
        agent's last successful run (``finished``/``completed``) and its last edit (resuming
        a paused agent, changing its executor, ... starts a new streak).
        """
        last_success = (
            sa.select(sa.func.max(runs.c.finished_at))
            .where(
                runs.c.agent_id == agent_id,
                runs.c.status == RunStatus.FINISHED.value,
                runs.c.reason == RunReason.COMPLETED.value,
            )
            .scalar_subquery()
        )
        with self._db.read() as conn:
            edited = conn.execute(
                sa.select(agents.c.updated_at).where(agents.c.id == agent_id)
            ).scalar()
            success = conn.execute(sa.select(last_success)).scalar()
            baselines = [at for at in (edited, success) if at is not None]
            query = sa.select(sa.func.count()).where(
                runs.c.agent_id == agent_id,
                runs.c.status == RunStatus.FAILED.value,
                runs.c.reason == RunReason.RETRIES_EXHAUSTED.value,
            )
            if baselines:
                query = query.where(runs.c.finished_at > max(baselines))
            return int(conn.execute(query).scalar_one())

    def reap_leaked_checkouts(self) -> list[str]:
        """Release task checkouts held by a run that is not claimed or running (or missing).

        A checkout is taken by a claimed run and released on every exit path; one left
        behind (a crash between two transactions, a run ended by hand) would block the task
        forever.

        Returns:
            The ids of the tasks whose checkout was released.
        """
        leaked = sa.and_(
            tasks.c.checkout_agent_id.is_not(None), ~live_run_exists(tasks.c.checkout_run_id)
        )
        with self._db.write() as conn:
            task_ids = sorted(
                str(task_id)
                for task_id in conn.execute(
                    sa.update(tasks)
                    .where(leaked)
                    .values(checkout_agent_id=None, checkout_run_id=None, checkout_at=None)
                    .returning(tasks.c.id)
                ).scalars()
            )
        return task_ids
