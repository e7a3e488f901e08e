"""The run queue: intake transaction, agent-driven claim, and run state transitions.

Every public method is one transaction. Intake and claim lock the agent row on PostgreSQL
(SQLite serialises all writers with ``BEGIN IMMEDIATE``), so the claim-time merge and the
per-agent concurrency limit hold across processes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import ContextEntry, Run, WakeRequest, WakeupRequest
from office_scheduler.domain.status import (
    CLAIMABLE_AGENT_STATUSES,
    LIVE_RUN_STATUSES,
    Classification,
    IntakeOutcome,
    MergeDecision,
    RunReason,
    RunStatus,
    WakeupStatus,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.rows import context_to_json, run_from_row, wakeup_from_row
from office_scheduler.store.schema import agents, runs, tasks, wakeup_requests

MergePolicy = Callable[[WakeRequest, Run | None], MergeDecision]


@dataclass(frozen=True, kw_only=True, slots=True)
class IntakeResult:
    """What one intake transaction did.

    Attributes:
        request: the persisted request (for a duplicate key: the original one).
        run: the run the request created or joined (``None`` when the original was skipped).
        outcome: created a run, coalesced into one, or deduplicated.
    """

    request: WakeupRequest
    run: Run | None
    outcome: IntakeOutcome


def _insert(conn: Connection) -> Any:
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def _lock_agent(conn: Connection, agent_id: str) -> Mapping[Any, Any]:
    row = (
        conn.execute(sa.select(agents).where(agents.c.id == agent_id).with_for_update())
        .mappings()
        .first()
    )
    if row is None:
        raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
    return row


def _get_run(conn: Connection, run_id: int) -> Run:
    row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
    if row is None:
        raise NotFoundError(f"run {run_id} not found", field="run_id")
    return run_from_row(row)


def _in_flight(conn: Connection, request: WakeRequest) -> Run | None:
    scope = (
        runs.c.task_id.is_(None) if request.task_id is None else runs.c.task_id == request.task_id
    )
    for status in (RunStatus.QUEUED, RunStatus.CLAIMED):
        row = (
            conn.execute(
                sa.select(runs)
                .where(runs.c.agent_id == request.agent_id, runs.c.status == status, scope)
                .order_by(runs.c.id.desc())
                .limit(1)
            )
            .mappings()
            .first()
        )
        if row is not None:
            return run_from_row(row)
    return None


class QueueStore:
    """Wakeup requests and runs."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def enqueue(
        self, request: WakeRequest, *, now: datetime, hold: timedelta, decide: MergePolicy
    ) -> IntakeResult:
        """Persist ``request`` and create or join a run, in one transaction (DESIGN §5).

        Args:
            request: the wake; its ``idempotency_key``, when set, is unique forever.
            now: the intake instant (UTC).
            hold: coalescing hold of a run this request creates (ignored when
                ``request.hold`` is false: such a run, or a run it joins, is due at once).
            decide: the merge policy, given the request and the in-flight run.

        Raises:
            NotFoundError: the agent does not exist.
        """
        with self._db.write() as conn:
            _lock_agent(conn, request.agent_id)
            values = {
                "workspace_id": request.workspace_id,
                "agent_id": request.agent_id,
                "task_id": request.task_id,
                "source": request.source.value,
                "classification": request.classification.value,
                "payload": request.payload,
                "idempotency_key": request.idempotency_key,
                "status": WakeupStatus.QUEUED.value,
                "requested_at": now,
            }
            stmt = _insert(conn)(wakeup_requests).values(**values)
            if request.idempotency_key is not None:
                stmt = stmt.on_conflict_do_nothing(index_elements=["idempotency_key"])
            request_id = conn.execute(stmt.returning(wakeup_requests.c.id)).scalar()
            if request_id is None:
                return self._duplicate(conn, request.idempotency_key)

            entry = ContextEntry(
                request_id=request_id,
                source=request.source,
                payload=request.payload,
                requested_at=now,
            )
            in_flight = _in_flight(conn, request)
            decision = decide(request, in_flight)
            if decision is MergeDecision.CREATE or in_flight is None:
                run_id = self._create_run(conn, request, entry, now=now, hold=hold)
                status, outcome = WakeupStatus.CLAIMED, IntakeOutcome.CREATED
            else:
                run_id = self._merge(conn, in_flight, request, entry, decision, now=now)
                status, outcome = WakeupStatus.COALESCED, IntakeOutcome.COALESCED
            conn.execute(
                sa.update(wakeup_requests)
                .where(wakeup_requests.c.id == request_id)
                .values(status=status.value, run_id=run_id)
            )
            row = (
                conn.execute(sa.select(wakeup_requests).where(wakeup_requests.c.id == request_id))
                .mappings()
                .one()
            )
            return IntakeResult(
                request=wakeup_from_row(row), run=_get_run(conn, run_id), outcome=outcome
            )

    def _duplicate(self, conn: Connection, key: str | None) -> IntakeResult:
        row = (
            conn.execute(sa.select(wakeup_requests).where(wakeup_requests.c.idempotency_key == key))
            .mappings()
            .one()
        )
        original = wakeup_from_row(row)
        run = _get_run(conn, original.run_id) if original.run_id is not None else None
        return IntakeResult(request=original, run=run, outcome=IntakeOutcome.DEDUPLICATED)

    def _create_run(
        self,
        conn: Connection,
        request: WakeRequest,
        entry: ContextEntry,
        *,
        now: datetime,
        hold: timedelta,
    ) -> int:
        not_before = now + hold if request.hold else now
        stmt = _insert(conn)(runs).values(
            workspace_id=request.workspace_id,
            agent_id=request.agent_id,
            task_id=request.task_id,
            source=request.source.value,
            classification=request.classification.value,
            status=RunStatus.QUEUED.value,
            idempotency_key=request.idempotency_key,
            context_snapshot=[context_to_json(entry)],
            context_version=1,
            coalesced_count=1,
            requested_at=now,
            not_before=not_before,
        )
        run_id = conn.execute(stmt.returning(runs.c.id)).scalar_one()
        return int(run_id)

    def _merge(
        self,
        conn: Connection,
        run: Run,
        request: WakeRequest,
        entry: ContextEntry,
        decision: MergeDecision,
        *,
        now: datetime,
    ) -> int:
        changes: dict[str, Any] = {
            "context_snapshot": [context_to_json(e) for e in (*run.context, entry)],
            "context_version": run.context_version + 1,
            "coalesced_count": run.coalesced_count + 1,
        }
        if decision is MergeDecision.COALESCE_AND_PROMOTE:
            changes["classification"] = Classification.EVENT.value
            changes["source"] = request.source.value
        if not request.hold and run.status is RunStatus.QUEUED and run.not_before > now:
            changes["not_before"] = now
        result = conn.execute(
            sa.update(runs)
            .where(runs.c.id == run.id, runs.c.status == run.status.value)
            .values(**changes)
        )
        if result.rowcount != 1:
            raise RuntimeError(f"run {run.id} changed under the agent lock")
        return run.id

    def claim(self, *, now: datetime, node_id: str, lease: timedelta, limit: int) -> list[Run]:
        """Claim up to ``limit`` due runs, at most one per agent per call, oldest first.

        Eligible agents are ``idle``/``working``, out of cooldown and below
        ``max_concurrent_sessions`` live (claimed or running) runs; for each, its oldest due
        queued run is a candidate. The query is driven from agents, so runs of busy agents
        at the head of the queue cost nothing. Agent rows are locked (``SKIP LOCKED`` on
        PostgreSQL), so two processes never both claim past an agent's limit.

        Returns:
            The claimed runs (status ``claimed``, lease held by ``node_id``), oldest first.
        """
        live = (
            sa.select(sa.func.count())
            .where(runs.c.agent_id == agents.c.id, runs.c.status.in_(LIVE_RUN_STATUSES))
            .scalar_subquery()
        )
        head = (
            sa.select(runs.c.id)
            .where(
                runs.c.agent_id == agents.c.id,
                runs.c.status == RunStatus.QUEUED.value,
                runs.c.not_before <= now,
            )
            .order_by(runs.c.not_before, runs.c.id)
            .limit(1)
            .scalar_subquery()
        )
        candidates = (
            sa.select(agents.c.id, head.label("run_id"))
            .where(
                agents.c.status.in_(CLAIMABLE_AGENT_STATUSES),
                sa.or_(agents.c.cooldown_until.is_(None), agents.c.cooldown_until <= now),
                live < agents.c.max_concurrent_sessions,
                head.is_not(None),
            )
            .with_for_update(skip_locked=True, of=agents)
        )
        with self._db.write() as conn:
            run_ids = [row.run_id for row in conn.execute(candidates)]
            if not run_ids:
                return []
            ordered = (
                conn.execute(
                    sa.select(runs.c.id)
                    .where(runs.c.id.in_(run_ids))
                    .order_by(runs.c.not_before, runs.c.id)
                    .limit(limit)
                )
                .scalars()
                .all()
            )
            claimed = (
                conn.execute(
                    sa.update(runs)
                    .where(runs.c.id.in_(ordered), runs.c.status == RunStatus.QUEUED.value)
                    .values(
                        status=RunStatus.CLAIMED.value,
                        claimed_at=now,
                        claimed_by=node_id,
                        lease_expires_at=now + lease,
                        reason=None,
                    )
                    .returning(*runs.c)
                )
                .mappings()
                .all()
            )
            return sorted((run_from_row(r) for r in claimed), key=lambda r: (r.not_before, r.id))

    def get_run(self, run_id: int) -> Run:
        """Return run ``run_id``.

        Raises:
            NotFoundError: no such run.
        """
        with self._db.read() as conn:
            return _get_run(conn, run_id)

    def get_wakeup(self, request_id: int) -> WakeupRequest:
        """Return wakeup request ``request_id``.

        Raises:
            NotFoundError: no such request.
        """
        with self._db.read() as conn:
            row = (
                conn.execute(sa.select(wakeup_requests).where(wakeup_requests.c.id == request_id))
                .mappings()
                .first()
            )
        if row is None:
            raise NotFoundError(f"wakeup {request_id} not found", field="wakeup_id")
        return wakeup_from_row(row)

    def mark_running(
        self,
        run_id: int,
        *,
        expected_version: int,
        prompt: str,
        executor: str,
        session_id: str | None,
        now: datetime,
    ) -> bool:
        """Move a claimed run to ``running`` if its context is still ``expected_version``.

        Returns:
            False when a wake merged into the run after its prompt was built (rebuild and
            try again) or the run is no longer claimed.
        """
        with self._db.write() as conn:
            result = conn.execute(
                sa.update(runs)
                .where(
                    runs.c.id == run_id,
                    runs.c.status == RunStatus.CLAIMED.value,
                    runs.c.context_version == expected_version,
                )
                .values(
                    status=RunStatus.RUNNING.value,
                    started_at=now,
                    prompt=prompt,
                    executor=executor,
                    session_id=session_id,
                )
            )
            return result.rowcount == 1

    def set_pid(self, run_id: int, pid: int) -> None:
        """Record the process id of the run's agent session."""
        with self._db.write() as conn:
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(pid=pid))

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

        Returns:
            The ended run, or ``None`` when it was no longer claimed or running (by us).
        """
        assert status.is_terminal
        holder = [] if node_id is None else [runs.c.claimed_by == node_id]
        with self._db.write() as conn:
            current = _get_run(conn, run_id)
            _lock_agent(conn, current.agent_id)
            row = (
                conn.execute(
                    sa.update(runs)
                    .where(runs.c.id == run_id, runs.c.status.in_(LIVE_RUN_STATUSES), *holder)
                    .values(
                        status=status.value,
                        reason=reason.value,
                        error=error,
                        finished_at=now,
                        result=dict(result) if result is not None else None,
                        usage=dict(usage) if usage is not None else None,
                        exit_code=exit_code,
                        lease_expires_at=None,
                    )
                    .returning(*runs.c)
                )
                .mappings()
                .first()
            )
            if row is None:
                return None
            run = run_from_row(row)
            _release_checkouts(conn, [run.id])
            if (
                run.started_at is None
                and seen_version is not None
                and run.context_version > seen_version
            ):
                self._hand_over(conn, run, run.context[seen_version:], now)
            if run.started_at is not None:
                cooldown_s = conn.execute(
                    sa.select(agents.c.cooldown_s).where(agents.c.id == run.agent_id)
                ).scalar_one()
                conn.execute(
                    sa.update(agents)
                    .where(agents.c.id == run.agent_id)
                    .values(
                        last_wakeup_finished_at=now,
                        cooldown_until=now + timedelta(seconds=cooldown_s),
                    )
                )
            return run

    def _hand_over(
        self, conn: Connection, run: Run, entries: Sequence[ContextEntry], now: datetime
    ) -> None:
        stmt = _insert(conn)(runs).values(
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
        _release_checkouts(conn, run_ids)
        return int(result.rowcount)

    def renew_leases(
        self, run_ids: Sequence[int], *, node_id: str, now: datetime, lease: timedelta
    ) -> None:
        """Extend the leases this node holds on ``run_ids``."""
        if not run_ids:
            return
        with self._db.write() as conn:
            conn.execute(
                sa.update(runs)
                .where(
                    runs.c.id.in_(list(run_ids)),
                    runs.c.claimed_by == node_id,
                    runs.c.status.in_(LIVE_RUN_STATUSES),
                )
                .values(lease_expires_at=now + lease)
            )

    def recover_expired_leases(self, *, now: datetime, alive: Sequence[int] = ()) -> list[int]:
        """Requeue live runs whose lease expired (their node died); returns their ids.

        Args:
            now: the current instant.
            alive: runs the calling node is still executing; never recovered, whatever
                their lease says (a wall-clock jump must not run a session twice).
        """
        query = sa.select(runs.c.id).where(
            runs.c.status.in_(LIVE_RUN_STATUSES), runs.c.lease_expires_at < now
        )
        if alive:
            query = query.where(runs.c.id.not_in(list(alive)))
        with self._db.write() as conn:
            run_ids = [int(r) for r in conn.execute(query).scalars()]
            if run_ids:
                self._requeue(conn, run_ids, reason=RunReason.LEASE_EXPIRED, now=now)
            return run_ids

    def checkout_task(self, task_id: str, *, agent_id: str, run_id: int, now: datetime) -> bool:
        """Take the task's exclusive checkout for this run (CAS on ``checkout_agent_id``).

        Returns:
            False when another agent or run already holds it.
        """
        with self._db.write() as conn:
            result = conn.execute(
                sa.update(tasks)
                .where(tasks.c.id == task_id, tasks.c.checkout_agent_id.is_(None))
                .values(checkout_agent_id=agent_id, checkout_run_id=run_id, checkout_at=now)
            )
            return result.rowcount == 1

    def next_due_at(self) -> datetime | None:
        """The earliest ``not_before`` of any queued run, or ``None`` when none is queued."""
        with self._db.read() as conn:
            value: datetime | None = conn.execute(
                sa.select(sa.func.min(runs.c.not_before)).where(
                    runs.c.status == RunStatus.QUEUED.value
                )
            ).scalar()
        return value

    def next_wake_at(self, *, now: datetime) -> datetime | None:
        """When a queued run may next become claimable without any other change.

        The earliest future ``not_before`` of a queued run, or the earliest future end of
        a cooldown of an agent with queued runs; ``None`` when neither exists. Runs that
        wait for a busy agent's slot become claimable when a run ends, which pokes the
        loop, so they are not counted here.
        """
        held = sa.select(sa.func.min(runs.c.not_before)).where(
            runs.c.status == RunStatus.QUEUED.value, runs.c.not_before > now
        )
        cooling = sa.select(sa.func.min(agents.c.cooldown_until)).where(
            agents.c.cooldown_until > now,
            sa.exists().where(
                runs.c.agent_id == agents.c.id, runs.c.status == RunStatus.QUEUED.value
            ),
        )
        with self._db.read() as conn:
            values = [conn.execute(held).scalar(), conn.execute(cooling).scalar()]
        found = [v for v in values if v is not None]
        return min(found) if found else None


def _release_checkouts(conn: Connection, run_ids: Sequence[int]) -> None:
    conn.execute(
        sa.update(tasks)
        .where(tasks.c.checkout_run_id.in_(list(run_ids)))
        .values(checkout_agent_id=None, checkout_run_id=None, checkout_at=None)
    )
