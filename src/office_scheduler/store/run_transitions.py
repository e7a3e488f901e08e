"""Run state transitions after the claim: launch, finish, requeue, leases, checkout."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import ContextEntry, Run
from office_scheduler.domain.notifications import NotificationEvent
from office_scheduler.domain.status import LIVE_RUN_STATUSES, RunReason, RunStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.notifications import queue_notification
from office_scheduler.store.notify import notify_wake
from office_scheduler.store.queue_common import (
    claim_fence,
    earliest_not_before,
    insert_run_events,
    lock_agent_of_run,
    release_checkout_of,
    release_checkouts,
    stamp_cooldown,
)
from office_scheduler.store.queue_heads import lock_agents_of_runs, refresh_heads
from office_scheduler.store.rows import context_to_json, run_from_row
from office_scheduler.store.schema import agents, runs, tasks, wakeup_requests
from office_scheduler.store.sql import insert
from office_scheduler.store.tokens import revoke_run_tokens


@cache
def _mark_running(*, fence_node: bool, fence_claim: bool) -> sa.Update:
    """The compare-and-set ``claimed`` → ``running`` (fenced by the claim when asked)."""
    fence = claim_fence(
        sa.bindparam("fence_node") if fence_node else None,
        sa.bindparam("fence_claimed_at", type_=runs.c.claimed_at.type) if fence_claim else None,
    )
    return (
        sa.update(runs)
        .where(
            runs.c.id == sa.bindparam("run_id"),
            runs.c.status == RunStatus.CLAIMED.value,
            runs.c.context_version == sa.bindparam("expected_version"),
            *fence,
        )
        .returning(*runs.c)
    )


_SET_PID = sa.update(runs).where(runs.c.id == sa.bindparam("run_id"))
_CHECKOUT_TASK = sa.update(tasks).where(
    tasks.c.id == sa.bindparam("task_id"), tasks.c.checkout_agent_id.is_(None)
)
#: The same, only while the run is still held by the claim ``(fence_node, fence_claimed_at)``.
_CHECKOUT_TASK_FENCED = _CHECKOUT_TASK.where(
    sa.exists().where(
        runs.c.id == sa.bindparam("fence_run_id"),
        runs.c.status.in_(LIVE_RUN_STATUSES),
        *claim_fence(
            sa.bindparam("fence_node"),
            sa.bindparam("fence_claimed_at", type_=runs.c.claimed_at.type),
        ),
    )
)


def _next_wake_query() -> sa.Select[Any]:
    now = sa.bindparam("now", type_=runs.c.not_before.type)
    held = (
        sa.select(sa.func.min(runs.c.not_before))
        .where(runs.c.status == RunStatus.QUEUED.value, runs.c.not_before > now)
        .scalar_subquery()
    )
    cooling = (
        sa.select(sa.func.min(agents.c.cooldown_until))
        .where(
            agents.c.cooldown_until > now,
            sa.exists().where(
                runs.c.agent_id == agents.c.id, runs.c.status == RunStatus.QUEUED.value
            ),
        )
        .scalar_subquery()
    )
    return sa.select(held, cooling)


_NEXT_WAKE = _next_wake_query()


@cache
def _finish_update(*, fence_node: bool, fence_claim: bool) -> sa.Update:
    """The fenced ``UPDATE … RETURNING`` that ends a live run (see :func:`claim_fence`)."""
    fence = claim_fence(
        sa.bindparam("fence_node") if fence_node else None,
        sa.bindparam("fence_claimed_at", type_=runs.c.claimed_at.type) if fence_claim else None,
    )
    return (
        sa.update(runs)
        .where(runs.c.id == sa.bindparam("run_id"), runs.c.status.in_(LIVE_RUN_STATUSES), *fence)
        .returning(*runs.c)
    )


class RunTransitions:
    """Transitions of claimed and running runs; mixed into :class:`QueueStore`."""

    _db: Database

    def mark_running(
        self,
        run_id: int,
        *,
        expected_version: int,
        prompt: str,
        executor: str,
        session_id: str | None,
        now: datetime,
        prompt_kind: str | None = None,
        node_id: str | None = None,
        claimed_at: datetime | None = None,
    ) -> Run | None:
        """Move a claimed run to ``running`` if its context is still ``expected_version``.

        Args:
            run_id: the claimed run.
            expected_version: the ``context_version`` the prompt was built from.
            prompt: the prompt the session gets.
            executor: the executor configuration's name.
            session_id: the session record of this launch.
            now: the start instant (UTC).
            prompt_kind: ``full`` or a resume ``delta`` (recorded with the prompt).
            node_id: when given, only the node that holds the claim may start it.
            claimed_at: when given, only the same claim may start it: an attempt whose
                run was requeued (its lease lost) and claimed again never launches.

        Returns:
            The running run, or ``None`` when a wake merged into the run after its prompt
            was built (rebuild and try again) or the run is no longer claimed (by us).
        """
        values: dict[str, Any] = {
            "status": RunStatus.RUNNING.value,
            "started_at": now,
            "prompt": prompt,
            "executor": executor,
            "session_id": session_id,
        }
        if prompt_kind is not None:
            values["prompt_kind"] = prompt_kind
        params = {"run_id": run_id, "expected_version": expected_version, **values}
        if node_id is not None:
            params["fence_node"] = node_id
        if claimed_at is not None:
            params["fence_claimed_at"] = claimed_at
        update = _mark_running(fence_node=node_id is not None, fence_claim=claimed_at is not None)
        with self._db.write() as conn:
            row = conn.execute(update, params).mappings().first()
            return None if row is None else run_from_row(row)

    def set_pid(self, run_id: int, pid: int, *, now: datetime) -> None:
        """Record the process id of the run's agent session, and log it (one transaction)."""
        with self._db.write() as conn:
            conn.execute(_SET_PID, {"run_id": run_id, "pid": pid})
            event = {
                "run_id": run_id,
                "kind": "process_started",
                "message": f"pid {pid}",
                "data": {"pid": pid},
                "at": now,
            }
            insert_run_events(conn, event)

    def finish_run(
        self,
        run_id: int,
        *,
        status: RunStatus,
        reason: RunReason,
        now: datetime,
        error: str | None = None,
        result: Mapping[str, Any] | None = None,
        usage: Mapping[str, Any] | None = None,
        exit_code: int | None = None,
        node_id: str | None = None,
        seen_version: int | None = None,
        claimed_at: datetime | None = None,
    ) -> Run | None:
        """End a claimed or running run with a terminal ``status`` and its ``reason``.

        Releases the task checkout held by this run. When a session was launched, stamps
        the agent's ``last_wakeup_finished_at`` and cooldown. When the run ends before
        launch and wakes merged into it after the pipeline read its context
        (``context_version > seen_version``), those wakes move to a new queued run, so a
        merged wake always reaches the agent.

        Args:
            run_id: the run to end.
            status: terminal status (``finished``, ``failed`` or ``cancelled``).
            reason: why it ended.
            now: the end instant (UTC).
            error: failure message, if any.
            result: the agent's parsed result JSON.
            usage: token and cost usage.
            exit_code: the agent process's exit code.
            node_id: when given, the run is ended only if this node still holds its claim.
            seen_version: the context version the pipeline's decision was based on.
            claimed_at: when given, the run is ended only if it is still the same claim (a
                run requeued after a lost lease and claimed again has a new ``claimed_at``,
                so the late result of the first attempt is rejected).

        Returns:
            The ended run, or ``None`` when it was no longer claimed or running (by us).
        """
        assert status.is_terminal
        update = _finish_update(fence_node=node_id is not None, fence_claim=claimed_at is not None)
        params: dict[str, Any] = {
            "run_id": run_id,
            "status": status.value,
            "reason": reason.value,
            "error": error,
            "finished_at": now,
            "result": dict(result) if result is not None else None,
            "usage": dict(usage) if usage is not None else None,
            "exit_code": exit_code,
            "lease_expires_at": None,
        }
        if node_id is not None:
            params["fence_node"] = node_id
        if claimed_at is not None:
            params["fence_claimed_at"] = claimed_at
        with self._db.write() as conn:
            agent = lock_agent_of_run(conn, run_id)
            if agent is None:
                raise NotFoundError(f"run {run_id} not found", field="run_id")
            row = conn.execute(update, params).mappings().first()
            if row is None:
                return None
            run = run_from_row(row)
            release_checkout_of(conn, run)
            revoke_run_tokens(conn, run.id, now)
            if (
                run.started_at is None
                and seen_version is not None
                and run.context_version > seen_version
            ):
                self._hand_over(conn, run, run.context[seen_version:], now)
            if run.started_at is not None:
                stamp_cooldown(conn, agent, now)
            if run.status is RunStatus.FAILED:
                queue_notification(
                    conn,
                    workspace_id=run.workspace_id,
                    event=NotificationEvent.RUN_FAILED,
                    data={
                        "run_id": run.id,
                        "agent_id": run.agent_id,
                        "task_id": run.task_id,
                        "reason": run.reason.value if run.reason else None,
                        "error": (run.error or "")[:1000],
                        "dashboard_path": f"/runs/{run.id}",
                    },
                    now=now,
                )
            return run

    def _hand_over(
        self, conn: Connection, run: Run, entries: Sequence[ContextEntry], now: datetime
    ) -> None:
        stmt = insert(conn)(runs).values(
            workspace_id=run.workspace_id,
            agent_id=run.agent_id,
            task_id=run.task_id,
            source=entries[0].source.value,
            classification=run.classification.value,
            status=RunStatus.QUEUED.value,
            context_snapshot=[context_to_json(e) for e in entries],
            context_version=1,
            coalesced_count=len(entries),
            requested_at=now,
            not_before=now,
        )
        new_id = conn.execute(stmt.returning(runs.c.id)).scalar_one()
        conn.execute(
            sa.update(wakeup_requests)
            .where(wakeup_requests.c.id.in_([e.request_id for e in entries]))
            .values(run_id=new_id)
        )
        refresh_heads(conn, [run.agent_id])  # the caller holds the agent lock

    def cancel_queued(self, run_id: int, *, reason: RunReason, now: datetime) -> Run | None:
        """End ``run_id`` ``cancelled`` with ``reason`` if it is still ``queued``.

        A conditional update: a claim that wins the race leaves the run untouched. The
        agent's queue head may be left early, which the next claim corrects.

        Returns:
            The cancelled run, or ``None`` when it was no longer queued.
        """
        with self._db.write() as conn:
            row = (
                conn.execute(
                    sa.update(runs)
                    .where(runs.c.id == run_id, runs.c.status == RunStatus.QUEUED.value)
                    .values(status=RunStatus.CANCELLED.value, reason=reason.value, finished_at=now)
                    .returning(*runs.c)
                )
                .mappings()
                .first()
            )
        return None if row is None else run_from_row(row)

    def requeue(self, run_ids: Sequence[int], *, reason: RunReason, now: datetime) -> int:
        """Put claimed or running runs back to ``queued`` (shutdown, lost lease); not a failure.

        Returns:
            How many runs went back to the queue.
        """
        if not run_ids:
            return 0
        with self._db.write() as conn:
            return self._requeue(conn, list(run_ids), reason=reason, now=now)

    def _requeue(
        self, conn: Connection, run_ids: list[int], *, reason: RunReason, now: datetime
    ) -> int:
        owners = lock_agents_of_runs(conn, run_ids)
        result = conn.execute(
            sa.update(runs)
            .where(runs.c.id.in_(run_ids), runs.c.status.in_(LIVE_RUN_STATUSES))
            .values(
                status=RunStatus.QUEUED.value,
                reason=reason.value,
                not_before=now,
                claimed_at=None,
                claimed_by=None,
                lease_expires_at=None,
                started_at=None,
                pid=None,
            )
        )
        release_checkouts(conn, run_ids)
        refresh_heads(conn, owners)
        if result.rowcount:
            notify_wake(conn, self._db.schema)  # due now: any idle process may take them
        return int(result.rowcount)

    def renew_leases(
        self, run_ids: Sequence[int], *, node_id: str, now: datetime, lease: timedelta
    ) -> list[int]:
        """Extend the leases this node holds on ``run_ids``; returns the ids renewed.

        One statement renews every run no other transaction holds right now (``SKIP
        LOCKED`` on PostgreSQL); each run that was held (an intake merging into it, its own
        start or end) is then renewed in a statement of its own, which waits for it. A
        renewal therefore never holds one run while waiting for another, so it cannot
        close a lock cycle (a deadlock), and no run misses its renewal.

        A run left out of the answer is no longer claimed or running by ``node_id``
        (ended, or requeued after its lease expired): the caller has lost it.
        """
        if not run_ids:
            return []
        held_by_us = [runs.c.claimed_by == node_id, runs.c.status.in_(LIVE_RUN_STATUSES)]
        free = (
            sa.select(runs.c.id)
            .where(runs.c.id.in_(list(run_ids)), *held_by_us)
            .with_for_update(skip_locked=True)
        )
        with self._db.write() as conn:
            renewed = set(
                conn.execute(
                    sa.update(runs)
                    .where(runs.c.id.in_(free.scalar_subquery()))
                    .values(lease_expires_at=now + lease)
                    .returning(runs.c.id)
                ).scalars()
            )
        for run_id in sorted(set(run_ids) - renewed):
            with self._db.write() as conn:
                done = conn.execute(
                    sa.update(runs)
                    .where(runs.c.id == run_id, *held_by_us)
                    .values(lease_expires_at=now + lease)
                )
                if done.rowcount:
                    renewed.add(run_id)
        return sorted(renewed)

    def runs_by_id(self, run_ids: Sequence[int]) -> dict[int, Run]:
        """The runs of ``run_ids`` that exist, by id (one read)."""
        if not run_ids:
            return {}
        with self._db.read() as conn:
            rows = conn.execute(sa.select(runs).where(runs.c.id.in_(list(run_ids)))).mappings()
            return {int(row["id"]): run_from_row(row) for row in rows}

    def recover_expired_leases(
        self,
        *,
        now: datetime,
        alive: Sequence[int] = (),
        before_requeue: Callable[[list[Run]], object] | None = None,
    ) -> list[int]:
        """Requeue live runs whose lease expired (their node died); returns their ids.

        Args:
            now: the current instant.
            alive: runs the calling node is still executing; never recovered, whatever
                their lease says (a wall-clock jump must not run a session twice).
            before_requeue: called with the expired runs inside the transaction, before
                any of them can be claimed again (the scheduler kills their orphaned
                agent processes there, so a run never executes twice at once).
        """
        expired_lease = [runs.c.status.in_(LIVE_RUN_STATUSES), runs.c.lease_expires_at < now]
        if alive:
            expired_lease.append(runs.c.id.not_in(list(alive)))
        with self._db.write() as conn:
            candidates = list(conn.execute(sa.select(runs.c.id).where(*expired_lease)).scalars())
            if not candidates:
                return []
            # Agents first, then their runs (the order intake and the claim lock in), and
            # the runs read again under the lock: a renewal committed since the first look
            # keeps its run, and its agent process, alive.
            lock_agents_of_runs(conn, candidates)
            query = (
                sa.select(runs)
                .where(runs.c.id.in_(candidates), *expired_lease)
                .order_by(runs.c.id)
                .with_for_update()
            )
            expired = [run_from_row(row) for row in conn.execute(query).mappings()]
            if not expired:
                return []
            if before_requeue is not None:
                before_requeue(expired)
            run_ids = [run.id for run in expired]
            self._requeue(conn, run_ids, reason=RunReason.INTERRUPTED, now=now)
            return run_ids

    def checkout_task(
        self,
        task_id: str,
        *,
        agent_id: str,
        run_id: int,
        now: datetime,
        node_id: str | None = None,
        claimed_at: datetime | None = None,
    ) -> bool:
        """Take the task's exclusive checkout for this run (CAS on ``checkout_agent_id``).

        Args:
            task_id: the task to check out.
            agent_id: the run's agent.
            run_id: the run taking it.
            now: the instant (UTC).
            node_id: with ``claimed_at``, only while the run is still claimed or running
                under that claim (a lost attempt never takes the checkout from the run's
                next attempt).
            claimed_at: see ``node_id``.

        Returns:
            False when another agent or run already holds it, or the claim was lost.
        """
        params: dict[str, Any] = {
            "task_id": task_id,
            "checkout_agent_id": agent_id,
            "checkout_run_id": run_id,
            "checkout_at": now,
        }
        statement = _CHECKOUT_TASK
        if node_id is not None and claimed_at is not None:
            statement = _CHECKOUT_TASK_FENCED
            params.update(fence_run_id=run_id, fence_node=node_id, fence_claimed_at=claimed_at)
        with self._db.write() as conn:
            return conn.execute(statement, params).rowcount == 1

    def next_due_at(self) -> datetime | None:
        """The earliest ``not_before`` of any queued run, or ``None`` when none is queued."""
        with self._db.read() as conn:
            return earliest_not_before(conn, RunStatus.QUEUED)

    def next_wake_at(self, *, now: datetime) -> datetime | None:
        """When a queued run may next become claimable without any other change.

        The earliest future ``not_before`` of a queued run, or the earliest future end of
        a cooldown of an agent with queued runs; ``None`` when neither exists. Runs that
        wait for a busy agent's slot become claimable when a run ends, which pokes the
        loop, so they are not counted here.
        """
        with self._db.read() as conn:
            row = conn.execute(_NEXT_WAKE, {"now": now}).one()
        found = [v for v in row if v is not None]
        return min(found) if found else None
