"""The run queue: intake transaction, agent-driven claim, and run state transitions.

Every public method is one transaction. Intake and claim lock the agent row on PostgreSQL
(SQLite serialises all writers with ``BEGIN IMMEDIATE``), so the claim-time merge and the
per-agent concurrency limit hold across processes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import IdempotencyKeyReusedError, NotFoundError
from office_scheduler.domain.idempotency import conflicts
from office_scheduler.domain.models import Run, WakeRequest, WakeupRequest
from office_scheduler.domain.runaway import Causation
from office_scheduler.domain.status import (
    CLAIMABLE_AGENT_STATUSES,
    Classification,
    HoldReason,
    IntakeOutcome,
    MergeDecision,
    RunStatus,
    WakeupStatus,
)
from office_scheduler.store.activity import activity_values
from office_scheduler.store.engine import Database
from office_scheduler.store.queue_common import get_run, insert_run_events, lock_agent
from office_scheduler.store.queue_heads import reconcile_heads, refresh_heads
from office_scheduler.store.recovery import RecoveryQueries
from office_scheduler.store.retries import RetryTransitions
from office_scheduler.store.rows import run_from_row, wakeup_from_row
from office_scheduler.store.run_transitions import RunTransitions
from office_scheduler.store.run_wakes import RunWakesQueries
from office_scheduler.store.schema import (
    AGENT_CLAIMABLE_AT,
    LIVE_RUNS_PREDICATE,
    agents,
    runs,
    wakeup_requests,
)
from office_scheduler.store.shared_writes import SharedWrites
from office_scheduler.store.sql import PerDialect, constants

MergePolicy = Callable[[WakeRequest, Run | None], MergeDecision]


def _coalesce_activity(
    request: WakeRequest, request_id: int, run: Run, now: datetime
) -> dict[str, Any]:
    """Activity ``wakeup_coalesced``: a wake merged into an in-flight run (same transaction)."""
    return activity_values(
        workspace_id=request.workspace_id,
        kind="wakeup_coalesced",
        message=f"{request.source.value} wake merged into run {run.id}",
        now=now,
        agent_id=request.agent_id,
        task_id=request.task_id,
        run_id=run.id,
        data={
            "wakeup_id": request_id,
            "source": request.source.value,
            "coalesced_count": run.coalesced_count + 1,
        },
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class IntakeResult:
    """What one intake transaction did.

    Attributes:
        request: the persisted request (for a duplicate key: the original one).
        run: the run the request created or joined (``None`` when the original was skipped).
        outcome: created a run, coalesced into one, or deduplicated.
        due: when the run may first be claimed, aware UTC (its coalescing hold or the
            agent's cooldown); ``None`` when it may be claimed now, or for a duplicate.
    """

    request: WakeupRequest
    run: Run | None
    outcome: IntakeOutcome
    due: datetime | None = None


def _in_flight_query(*, task_bound: bool) -> sa.Select[Any]:
    scope = runs.c.task_id == sa.bindparam("task_id") if task_bound else runs.c.task_id.is_(None)
    queued_first = sa.case((runs.c.status == RunStatus.QUEUED.value, 0), else_=1)
    return (
        sa.select(runs)
        .where(
            runs.c.agent_id == sa.bindparam("agent_id"),
            runs.c.status.in_(constants((RunStatus.QUEUED, RunStatus.CLAIMED))),
            scope,
        )
        .order_by(queued_first, runs.c.id.desc())
        .limit(1)
    )


_IN_FLIGHT_OF_TASK = _in_flight_query(task_bound=True)
_IN_FLIGHT_UNBOUND = _in_flight_query(task_bound=False)
_INSERT_WAKEUP = PerDialect(
    lambda insert: (
        insert(wakeup_requests)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(*wakeup_requests.c)
    )
)
_INSERT_RUN = sa.insert(runs).returning(*runs.c)
_WAKEUP_BY_KEY = sa.select(wakeup_requests).where(
    wakeup_requests.c.idempotency_key == sa.bindparam("key")
)
#: One merged wake: a counter and (in the parameters) the classification, source and hold.
#: What was merged before is never rewritten: the wake is its own wakeup request row.
_MERGE_RUN = (
    sa.update(runs)
    .where(runs.c.id == sa.bindparam("run_id"), runs.c.status == sa.bindparam("read_status"))
    .values(
        context_version=runs.c.context_version + 1,
        coalesced_count=runs.c.coalesced_count + 1,
    )
    .returning(*runs.c)
)


def _request_columns(request: WakeRequest, causation: Causation) -> dict[str, Any]:
    """The columns a wakeup request and the run it creates both copy from the wake."""
    return {
        "workspace_id": request.workspace_id,
        "agent_id": request.agent_id,
        "task_id": request.task_id,
        "source": request.source.value,
        "classification": request.classification.value,
        "idempotency_key": request.idempotency_key,
        **causation.columns(),
    }


def _in_flight(conn: Connection, request: WakeRequest) -> Run | None:
    """The run a wake may join: the newest queued run of its scope, else the newest claimed."""
    if request.task_id is None:
        found = conn.execute(_IN_FLIGHT_UNBOUND, {"agent_id": request.agent_id})
    else:
        params = {"agent_id": request.agent_id, "task_id": request.task_id}
        found = conn.execute(_IN_FLIGHT_OF_TASK, params)
    row = found.mappings().first()
    return None if row is None else run_from_row(row)


def _head(now: sa.BindParameter[datetime]) -> sa.ScalarSelect[Any]:
    """The oldest due queued run of the agent row in the enclosing query."""
    return (
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


def _agent_eligible(now: sa.BindParameter[datetime]) -> list[sa.ColumnElement[bool]]:
    """An agent that may start a session now: claimable status, no cooldown, a free slot."""
    live = (
        sa.select(sa.func.count())
        .where(runs.c.agent_id == agents.c.id, LIVE_RUNS_PREDICATE)
        .scalar_subquery()
    )
    return [
        agents.c.status.in_(constants(CLAIMABLE_AGENT_STATUSES)),
        sa.or_(agents.c.cooldown_until.is_(None), agents.c.cooldown_until <= now),
        live < agents.c.max_concurrent_sessions,
    ]


#: Reads of the in-flight run per intake; each lost race means the run left the in-flight
#: states, which happens at most twice (claimed → running → ended) under the agent lock.
_MERGE_ATTEMPTS = 3


def _claim_statements() -> tuple[sa.Select[Any], sa.Update]:
    """The two statements of :meth:`QueueStore.claim` (bound: ``now``, ``limit``, ids).

    1. Lock up to ``limit`` eligible agents with due work, the one claimable longest first.
       Agents are walked in :data:`~office_scheduler.store.schema.AGENT_CLAIMABLE_AT`
       order (queue head, or cooldown end if later) through ``ix_agents_claimable_at``, up
       to ``now``: agents cooling down lie beyond that range and are never visited. The
       walk stops at the limit, so its cost follows the agents at their concurrency limit
       passed on the way, not all agents or all queued runs. Agents locked by another
       claimer are skipped.
    2. Claim the head of each locked agent that is still eligible under a snapshot taken
       after the locks are held.
    """
    now: sa.BindParameter[datetime] = sa.bindparam("now", type_=runs.c.not_before.type)
    lock_candidates = (
        sa.select(agents.c.id)
        .where(AGENT_CLAIMABLE_AT <= now, *_agent_eligible(now))  # noqa: SIM300 (an expression)
        .order_by(AGENT_CLAIMABLE_AT, agents.c.id)
        .limit(sa.bindparam("limit"))
        .with_for_update(skip_locked=True, of=agents)
    )
    eligible_heads = sa.select(_head(now)).where(
        agents.c.id.in_(sa.bindparam("agent_ids", expanding=True)), *_agent_eligible(now)
    )
    claim = (
        sa.update(runs)
        .where(runs.c.id.in_(eligible_heads), runs.c.status == RunStatus.QUEUED.value)
        .values(status=RunStatus.CLAIMED.value, reason=None)
        .returning(*runs.c)
    )
    return lock_candidates, claim


_LOCK_CANDIDATES, _CLAIM_HEADS = _claim_statements()
#: What intake needs of the agent it locks.
_INTAKE_AGENT_COLUMNS = (agents.c.id, agents.c.workspace_id, agents.c.cooldown_until)
_LOCK_FREE_AGENTS = (
    sa.select(*_INTAKE_AGENT_COLUMNS)
    .where(agents.c.id.in_(sa.bindparam("agent_ids", expanding=True)))
    .order_by(agents.c.id)
    .with_for_update(skip_locked=True)
)
_AGENT_WORKSPACES = sa.select(agents.c.id, agents.c.workspace_id).where(
    agents.c.id.in_(sa.bindparam("agent_ids", expanding=True))
)
_LOCK_INTAKE_AGENT = (
    sa.select(*_INTAKE_AGENT_COLUMNS)
    .where(agents.c.id == sa.bindparam("agent_id"))
    .with_for_update()
)


def _first_claimable(run: Run, cooldown_until: datetime | None, now: datetime) -> datetime | None:
    """When ``run`` may first be claimed: after its hold and the agent's cooldown (``None``: now).

    A run waiting for a busy agent's free slot counts as due: the run that frees the slot
    pokes its own process when it ends.
    """
    due = run.not_before
    if cooldown_until is not None and cooldown_until > due:
        due = cooldown_until
    return due if due > now else None


def _claim_event(run: Run, node_id: str, now: datetime) -> dict[str, Any]:
    """The ``run_events`` row that records one claim (read by the scale-out checks)."""
    return {
        "run_id": run.id,
        "kind": "claimed",
        "message": f"claimed by {node_id}",
        "data": {
            "node_id": node_id,
            "claimed_at": now.isoformat(),
            "source": run.source.value,
            # The attempt this claim launches (DESIGN §4), and the failures retried so far.
            "attempt": run.attempt + 1,
            "retry_count": run.retry_count,
        },
        "at": now,
    }


class QueueStore(RunTransitions, RetryTransitions, RecoveryQueries, RunWakesQueries):
    """Wakeup requests and runs: intake, claim, lookups, transitions, retries, recovery.

    Also the bounded read of a run's merged wakes (:class:`RunWakesQueries`).
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def enqueue(
        self,
        request: WakeRequest,
        *,
        now: datetime,
        hold: timedelta,
        decide: MergePolicy,
        locked: Mapping[Any, Any] | None = None,
        shared: SharedWrites | None = None,
        causation: Causation | None = None,
        held: HoldReason | None = None,
    ) -> IntakeResult:
        """Persist ``request`` and create or join a run, in one transaction (DESIGN §5).

        Args:
            request: the wake; its ``idempotency_key``, when set, is unique forever.
            now: the intake instant (UTC).
            hold: coalescing hold of a run this request creates (ignored when
                ``request.hold`` is false: such a run, or a run it joins, is due at once).
            decide: the merge policy, given the request and the in-flight run.
            locked: the agent's row as :meth:`lock_free_agents` returned it in the
                caller's transaction (the lock is held; saves taking it again).
            shared: when given, the request's outcome, the queue-head refresh, the
                activity entry and the notification are collected there, for the caller
                to write once for all the wakes of its transaction
                (:meth:`SharedWrites.flush` before it commits); it also keeps the run
                each wake wrote, so the next wake of the same scope need not read it.
            causation: what caused the wake (DESIGN §15), stored with the request and the
                run it creates; a merged wake with a shorter chain shortens the run's.
            held: a runaway limit holds the wake: the request is written ``held`` with
                this reason and makes or joins no run (outcome ``held``).

        Raises:
            NotFoundError: the agent does not exist, or not in ``request.workspace_id``.
            IdempotencyKeyReusedError: the key exists with another request's fingerprint;
                nothing of this wake was written.
        """
        cause = causation or Causation()
        # Alone, the shared writes are this wake's own, written before it returns.
        writes = SharedWrites() if shared is None else shared
        with self._db.write() as conn:
            agent = (
                lock_agent(conn, request.agent_id, _LOCK_INTAKE_AGENT) if locked is None else locked
            )
            if agent["workspace_id"] != request.workspace_id:
                raise NotFoundError(
                    f"agent {request.agent_id} not found in workspace {request.workspace_id}",
                    field="agent_id",
                )
            values = {
                **_request_columns(request, cause),
                "payload": request.payload,
                "request_fingerprint": request.fingerprint,
                "status": WakeupStatus.QUEUED.value if held is None else WakeupStatus.HELD.value,
                "status_reason": None if held is None else held.value,
                "requested_at": now,
            }
            inserted = conn.execute(_INSERT_WAKEUP(conn), values).mappings().first()
            if inserted is None:
                writes.write_outcomes(conn)  # the original may be one of this group's wakes
                return self._duplicate(conn, request)
            stored = wakeup_from_row(inserted)
            if held is not None:
                return IntakeResult(request=stored, run=None, outcome=IntakeOutcome.HELD)
            merged: Run | None = None
            in_flight: Run | None = None
            # The agent lock keeps other intakes out, but a pipeline may still move the
            # in-flight run on (claimed → running/ended) between our read and our merge;
            # the merge is a compare-and-set on its status, so read and decide again.
            # Within a group, the run an earlier wake of this scope wrote is the in-flight
            # run as of that write (only intake, under the agent lock, adds runs or context).
            scope = (request.agent_id, request.task_id)
            known = writes.in_flight.pop(scope, None)
            for _attempt in range(_MERGE_ATTEMPTS):
                in_flight = known or _in_flight(conn, request)
                known = None
                decision = decide(request, in_flight)
                if decision is MergeDecision.CREATE or in_flight is None:
                    break
                merged = self._merge(conn, in_flight, request, decision, now=now, cause=cause)
                if merged is not None:
                    writes.activities.append(_coalesce_activity(request, stored.id, in_flight, now))
                    break
            if merged is None:
                run = self._create_run(conn, request, now=now, hold=hold, cause=cause)
                status, outcome = WakeupStatus.CLAIMED, IntakeOutcome.CREATED
            else:
                run = merged
                status, outcome = WakeupStatus.COALESCED, IntakeOutcome.COALESCED
            writes.outcomes.append(
                {"wakeup_id": stored.id, "status": status.value, "run_id": run.id}
            )
            writes.in_flight[scope] = run
            made_due = in_flight is not None and run.not_before < in_flight.not_before
            due = _first_claimable(run, agent["cooldown_until"], now)
            if merged is None or made_due:
                # Idle processes should look again (a merge into a run already due or
                # claimed changes nothing for them). Delivered when this transaction commits.
                writes.queue_changed(request.agent_id, due)
            if shared is None:
                writes.flush(conn, self._db.schema)
            return IntakeResult(
                request=replace(stored, status=status, run_id=run.id),
                run=run,
                outcome=outcome,
                due=due,
            )

    def write_shared(self, shared: SharedWrites) -> None:
        """Write what :meth:`enqueue` collected in ``shared`` (inside the same transaction)."""
        with self._db.write() as conn:
            shared.flush(conn, self._db.schema)

    def _duplicate(self, conn: Connection, request: WakeRequest) -> IntakeResult:
        """The original of a duplicate key; refused when it came with another request.

        A concurrent first delivery of the key waits here for the other transaction
        (PostgreSQL) or behind the write lock (SQLite), so of two deliveries with two
        bodies one is written and the other refused.
        """
        key = request.idempotency_key
        row = conn.execute(_WAKEUP_BY_KEY, {"key": key}).mappings().one()
        if key is not None and conflicts(row["request_fingerprint"], request.fingerprint):
            raise IdempotencyKeyReusedError(key)
        original = wakeup_from_row(row)
        run = get_run(conn, original.run_id) if original.run_id is not None else None
        return IntakeResult(request=original, run=run, outcome=IntakeOutcome.DEDUPLICATED)

    def _create_run(
        self,
        conn: Connection,
        request: WakeRequest,
        *,
        now: datetime,
        hold: timedelta,
        cause: Causation,
    ) -> Run:
        values = {
            **_request_columns(request, cause),
            "status": RunStatus.QUEUED.value,
            "context_version": 1,
            "coalesced_count": 1,
            "requested_at": now,
            "not_before": now + hold if request.hold else now,
        }
        return run_from_row(conn.execute(_INSERT_RUN, values).mappings().one())

    def _merge(
        self,
        conn: Connection,
        run: Run,
        request: WakeRequest,
        decision: MergeDecision,
        *,
        now: datetime,
        cause: Causation,
    ) -> Run | None:
        """Count ``request`` into ``run`` if it is still in the status it was read in.

        O(1) whatever the run already carries: the wake itself is its wakeup request
        (pointed at the run by the caller's outcome write); the run only gains one in
        ``context_version`` and ``coalesced_count``, and maybe a promotion and an earlier
        ``not_before``.

        Returns:
            The merged run, or ``None`` when the run moved on meanwhile (nothing written).
        """
        changes: dict[str, Any] = {}
        if decision is MergeDecision.COALESCE_AND_PROMOTE:
            changes["classification"] = Classification.EVENT.value
            changes["source"] = request.source.value
        if not request.hold and run.status is RunStatus.QUEUED and run.not_before > now:
            changes["not_before"] = now
        if (cause.depth, not cause.human_rooted) < (run.causation_depth, not run.human_rooted):
            changes.update(cause.columns())  # a shorter chain (a person's wake) resets the run's
        params = {"run_id": run.id, "read_status": run.status.value, **changes}
        row = conn.execute(_MERGE_RUN, params).mappings().first()
        return None if row is None else run_from_row(row)

    def lock_free_agents(self, agent_ids: Collection[str]) -> dict[str, Mapping[Any, Any]]:
        """Lock those of ``agent_ids`` that exist and no other transaction holds.

        Returns their rows by id (``id``, ``workspace_id``, ``cooldown_until``), to pass to
        :meth:`enqueue` as ``locked``.

        Call it inside :meth:`~office_scheduler.store.engine.Database.transaction`: the locks
        last until that transaction ends. On PostgreSQL the rows are locked in id order
        with ``FOR UPDATE SKIP LOCKED``, so the call never waits and never deadlocks; a
        group of wakes writes those whose agents it got and leaves the others to wait on
        their own. On SQLite the transaction's write lock already excludes every other
        writer: every existing agent is returned.
        """
        if not agent_ids:
            return {}
        with self._db.write() as conn:
            found = conn.execute(_LOCK_FREE_AGENTS, {"agent_ids": sorted(set(agent_ids))})
            return {row["id"]: row for row in found.mappings()}

    def agent_workspaces(self, agent_ids: Collection[str]) -> dict[str, str]:
        """The workspace of each of ``agent_ids`` that is an agent (no lock taken).

        Inside the caller's transaction, if any.
        """
        if not agent_ids:
            return {}
        with self._db.write() as conn:
            found = conn.execute(_AGENT_WORKSPACES, {"agent_ids": sorted(set(agent_ids))})
            return {agent_id: workspace_id for agent_id, workspace_id in found}

    def claim(self, *, now: datetime, node_id: str, lease: timedelta, limit: int) -> list[Run]:
        """Claim up to ``limit`` due runs, at most one per agent per call, oldest first.

        Eligible agents are ``idle``/``working``, out of cooldown and below
        ``max_concurrent_sessions`` live (claimed or running) runs; for each, its oldest due
        queued run is a candidate. The query is driven from agents, so runs of busy agents
        at the head of the queue cost nothing.

        One transaction, two statements (DESIGN §7, ``reference/perf-notes.md``):

        1. lock the agent rows of the ``limit`` oldest candidates (``FOR UPDATE SKIP
           LOCKED`` on PostgreSQL, so concurrent claimers take disjoint agents and never
           wait on each other; SQLite serialises writers with ``BEGIN IMMEDIATE``);
        2. one ``UPDATE … RETURNING`` that re-checks each locked agent's eligibility and
           claims its oldest due run. This statement's snapshot is taken *after* the locks
           are held, so a claim another process committed for the same agent is counted:
           checking the limit in the locking statement itself would read a snapshot taken
           before the lock and could let two processes both claim for one agent.

        Each claim is recorded in ``run_events`` (kind ``claimed``, data ``node_id`` and
        ``claimed_at``) in the same transaction, so the event log holds every claim even
        when the claiming process dies right after the commit.

        Returns:
            The claimed runs (status ``claimed``, lease held by ``node_id``), oldest first.
        """
        if limit <= 0:
            return []
        with self._db.write() as conn:
            found = conn.execute(_LOCK_CANDIDATES, {"now": now, "limit": limit})
            agent_ids = list(found.scalars())
            if not agent_ids:
                return []
            params = {
                "now": now,
                "agent_ids": agent_ids,
                "claimed_at": now,
                "claimed_by": node_id,
                "lease_expires_at": now + lease,
            }
            claimed = conn.execute(_CLAIM_HEADS, params).mappings().all()
            refresh_heads(conn, agent_ids)  # claimed heads left; stale heads are corrected
            result = sorted((run_from_row(r) for r in claimed), key=lambda r: (r.not_before, r.id))
            if result:
                insert_run_events(conn, [_claim_event(r, node_id, now) for r in result])
            return result

    def reconcile_heads(self) -> int:
        """Correct every agent's queue head that is later than its queued runs.

        Returns:
            How many heads were late (see :mod:`office_scheduler.store.queue_heads`).
        """
        with self._db.write() as conn:
            return reconcile_heads(conn)

    def get_run(self, run_id: int) -> Run:
        """Return run ``run_id``.

        Raises:
            NotFoundError: no such run.
        """
        with self._db.read() as conn:
            return get_run(conn, run_id)

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
