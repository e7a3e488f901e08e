"""Routine runs: idempotent inserts, the tick claim and the concurrency-policy gate.

One transaction per method. The trigger compare-and-set that claims cron ticks inserts their
routine runs in the same transaction; the gate decides and settles a routine run (creating a
heavy routine's task) in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, NotFoundError
from office_scheduler.domain.models import Task
from office_scheduler.domain.routines import (
    LINKED_ROUTINE_RUN_STATUSES,
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
)
from office_scheduler.domain.status import TERMINAL_RUN_STATUSES, TERMINAL_TASK_STATES, TaskState
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.office_common import get_task_in, workspace_row
from office_scheduler.store.routine_rows import routine_row, routine_run_from_row
from office_scheduler.store.schema import routine_runs, routine_triggers, runs, tasks
from office_scheduler.store.sql import PerDialect, all_rows, constants, first_row


@dataclass(frozen=True, kw_only=True, slots=True)
class NewRoutineRun:
    """A routine run to insert.

    ``idempotency_key`` ``None`` gives the run the key ``key_prefix + str(id)`` (manual fires
    and unkeyed webhook deliveries stay distinct, as the specification asks).
    """

    routine_id: str
    trigger_id: str | None
    source: RoutineRunSource
    variables: Mapping[str, Any]
    scheduled_for: datetime | None
    idempotency_key: str | None = None
    key_prefix: str = ""
    missed: Mapping[str, Any] | None = None
    delivery_signature: str | None = None
    status: RoutineRunStatus = RoutineRunStatus.RECEIVED
    status_reason: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class GateResult:
    """Outcome of :meth:`RoutineStore.gate`.

    ``run`` is the routine run after the gate (``None`` when another process settled it
    first); ``active`` the instance it met; ``task`` the task a heavy run created.
    """

    run: RoutineRun | None
    active: RoutineRun | None = None
    task: Task | None = None

    @property
    def proceed(self) -> bool:
        """True when a lightweight run should now be dispatched to intake.

        The gate leaves only such a run ``received``; a heavy one is ``task_created``.
        """
        return self.run is not None and self.run.status is RoutineRunStatus.RECEIVED


_RUN_BY_ID = sa.select(routine_runs).where(routine_runs.c.id == sa.bindparam("routine_run_id"))
_RUN_BY_KEY = sa.select(routine_runs).where(routine_runs.c.idempotency_key == sa.bindparam("key"))
_INSERT_RUN = sa.insert(routine_runs).returning(*routine_runs.c)
#: Insert a keyed run unless its idempotency key exists: no row comes back then.
_INSERT_RUN_UNLESS_KEY_EXISTS = PerDialect(
    lambda insert: (
        insert(routine_runs)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(*routine_runs.c)
    )
)
#: Compare-and-set from ``received`` (the gate and settle transitions); the row after it.
_SETTLE_RECEIVED = (
    sa.update(routine_runs)
    .where(
        routine_runs.c.id == sa.bindparam("routine_run_id"),
        routine_runs.c.status == RoutineRunStatus.RECEIVED.value,
    )
    .returning(*routine_runs.c)
)
_KEY_BY_ID = (
    sa.update(routine_runs)
    .where(routine_runs.c.id == sa.bindparam("routine_run_id"))
    .returning(*routine_runs.c)
)
_CLAIM_TICKS = sa.update(routine_triggers).where(
    routine_triggers.c.id == sa.bindparam("trigger_id"),
    routine_triggers.c.next_run_at == sa.bindparam("expected_next_run_at"),
)


def _run_in(conn: Connection, run_id: int) -> RoutineRun:
    row = first_row(conn, _RUN_BY_ID, {"routine_run_id": run_id})
    if row is None:
        raise NotFoundError(f"routine run {run_id} not found", field="routine_run_id")
    return routine_run_from_row(row)


def _active_clause() -> sa.ColumnElement[bool]:
    """A linked task that is live (exists, not archived, not terminal) or a live run."""
    return sa.or_(
        sa.and_(
            routine_runs.c.linked_task_id.is_not(None),
            tasks.c.id.is_not(None),
            tasks.c.archived_at.is_(None),
            tasks.c.state.not_in(constants(TERMINAL_TASK_STATES)),
        ),
        sa.and_(
            routine_runs.c.linked_task_id.is_(None),
            runs.c.id.is_not(None),
            runs.c.status.not_in(constants(TERMINAL_RUN_STATUSES)),
        ),
    )


def _active_query() -> sa.Select[Any]:
    return (
        sa.select(routine_runs)
        .select_from(
            routine_runs.outerjoin(tasks, tasks.c.id == routine_runs.c.linked_task_id).outerjoin(
                runs, runs.c.id == routine_runs.c.linked_run_id
            )
        )
        .where(
            routine_runs.c.routine_id == sa.bindparam("routine_id"),
            routine_runs.c.dispatch_fingerprint == sa.bindparam("fingerprint"),
            routine_runs.c.status.in_(constants(LINKED_ROUTINE_RUN_STATUSES)),
            routine_runs.c.id != sa.bindparam("other_than"),
            _active_clause(),
        )
        .order_by(routine_runs.c.id.desc())
        .limit(1)
    )


_ACTIVE_INSTANCE = _active_query()


def _find_active(
    conn: Connection, routine_id: str, fingerprint: str, *, other_than: int
) -> RoutineRun | None:
    params = {"routine_id": routine_id, "fingerprint": fingerprint, "other_than": other_than}
    row = first_row(conn, _ACTIVE_INSTANCE, params)
    return routine_run_from_row(row) if row else None


def _run_values(new: NewRoutineRun, now: datetime) -> dict[str, Any]:
    terminal = new.status is not RoutineRunStatus.RECEIVED
    return {
        "routine_id": new.routine_id,
        "trigger_id": new.trigger_id,
        "source": new.source.value,
        "status": new.status.value,
        "status_reason": new.status_reason,
        "trigger_payload": {
            "variables": dict(new.variables),
            "missed": dict(new.missed) if new.missed else None,
            **({"warnings": list(new.warnings)} if new.warnings else {}),
        },
        "scheduled_for": new.scheduled_for,
        "idempotency_key": new.idempotency_key,
        "delivery_signature": new.delivery_signature,
        "created_at": now,
        "completed_at": now if terminal else None,
    }


def _insert_run(conn: Connection, new: NewRoutineRun, now: datetime) -> RoutineRun:
    row = conn.execute(_INSERT_RUN, _run_values(new, now)).mappings().one()
    if new.idempotency_key is None:
        key = {"routine_run_id": row["id"], "idempotency_key": f"{new.key_prefix}{row['id']}"}
        row = conn.execute(_KEY_BY_ID, key).mappings().one()
    return routine_run_from_row(row)


def _insert_unless_key_exists(
    conn: Connection, new: NewRoutineRun, now: datetime
) -> RoutineRun | None:
    """Insert ``new`` (one statement when keyed); ``None`` when its idempotency key exists."""
    if new.idempotency_key is None:
        return _insert_run(conn, new, now)
    statement = _INSERT_RUN_UNLESS_KEY_EXISTS(conn)
    row = conn.execute(statement, _run_values(new, now)).mappings().first()
    return routine_run_from_row(row) if row is not None else None


def _existing_by_key(conn: Connection, key: str | None) -> RoutineRun | None:
    if key is None:
        return None
    row = first_row(conn, _RUN_BY_KEY, {"key": key})
    return routine_run_from_row(row) if row else None


def _replayed(conn: Connection, new: NewRoutineRun) -> bool:
    if new.delivery_signature is None:
        return False
    query = sa.select(routine_runs.c.id).where(
        routine_runs.c.trigger_id == new.trigger_id,
        routine_runs.c.delivery_signature == new.delivery_signature,
    )
    return conn.execute(query).first() is not None


class RoutineRunMethods:
    """Routine-run methods of :class:`~office_scheduler.store.routines.RoutineStore`."""

    _db: Database

    def claim_ticks(
        self,
        trigger_id: str,
        *,
        expected_next_run_at: datetime,
        next_run_at: datetime | None,
        last_fired_at: datetime | None,
        runs_to_insert: Sequence[NewRoutineRun],
        now: datetime,
    ) -> list[RoutineRun] | None:
        """Claim a trigger's due ticks: compare-and-set ``next_run_at``, insert their runs.

        The update matches only while ``next_run_at`` still equals ``expected_next_run_at``,
        so of several cron loops (processes, nodes) exactly one claims each tick. The routine
        runs are inserted ``received`` in the same transaction: a crash right after the claim
        leaves them for :meth:`received_runs`, never loses them.

        Returns:
            The inserted routine runs (a tick whose key already exists is left out), or
            ``None`` when another loop claimed the ticks first.
        """
        with self._db.write() as conn:
            params = {
                "trigger_id": trigger_id,
                "expected_next_run_at": expected_next_run_at,
                "next_run_at": next_run_at,
                "last_fired_at": last_fired_at,
            }
            claimed = conn.execute(_CLAIM_TICKS, params).rowcount
            if claimed != 1:
                return None
            inserted = (_insert_unless_key_exists(conn, new, now) for new in runs_to_insert)
            return [run for run in inserted if run is not None]

    # -- routine runs ---------------------------------------------------------------------

    def insert_run(self, new: NewRoutineRun, *, now: datetime) -> tuple[RoutineRun, bool]:
        """Insert a routine run unless its idempotency key exists.

        Returns:
            ``(run, True)`` for a new run; ``(existing, False)`` for a duplicate key.

        Raises:
            NotFoundError: no such routine.
            ConflictError: a signed delivery whose signature was already used (a replay).
        """
        for _attempt in range(2):
            try:
                with self._db.write() as conn:
                    routine_row(conn, new.routine_id)
                    existing = _existing_by_key(conn, new.idempotency_key)
                    if existing is not None:
                        return existing, False
                    if _replayed(conn, new):
                        raise ConflictError(
                            "this signed request was already delivered (replay)",
                            field="X-Signature-256",
                        )
                    return _insert_run(conn, new, now), True
            except sa.exc.IntegrityError:
                continue  # a concurrent insert won; the next attempt sees its row
        raise ConflictError("concurrent delivery of the same request", field="Idempotency-Key")

    def find_run_by_key(self, key: str) -> RoutineRun | None:
        """The routine run with idempotency key ``key``, or ``None``."""
        with self._db.read() as conn:
            return _existing_by_key(conn, key)

    def get_run(self, run_id: int) -> RoutineRun:
        """The routine run ``run_id``.

        Raises:
            NotFoundError: no such routine run (field ``routine_run_id``).
        """
        with self._db.read() as conn:
            return _run_in(conn, run_id)

    def list_runs(self, routine_id: str, *, limit: int = 100) -> list[RoutineRun]:
        """A routine's runs, newest first, at most ``limit``."""
        query = (
            sa.select(routine_runs)
            .where(routine_runs.c.routine_id == routine_id)
            .order_by(routine_runs.c.id.desc())
            .limit(limit)
        )
        with self._db.read() as conn:
            return [routine_run_from_row(row) for row in all_rows(conn, query)]

    def received_runs(self, *, created_before: datetime, limit: int = 100) -> list[RoutineRun]:
        """Routine runs still ``received`` that were created before ``created_before``.

        These were claimed by a process that stopped before dispatching them.
        """
        query = (
            sa.select(routine_runs)
            .where(
                routine_runs.c.status == RoutineRunStatus.RECEIVED.value,
                routine_runs.c.created_at < created_before,
            )
            .order_by(routine_runs.c.id)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [routine_run_from_row(row) for row in all_rows(conn, query)]

    def gate(
        self,
        run_id: int,
        *,
        routine_id: str | None = None,
        fingerprint: str,
        enforce: bool,
        coalesce: bool,
        task: Mapping[str, Any] | None,
        now: datetime,
        fresh: RoutineRun | None = None,
    ) -> GateResult:
        """Apply the concurrency policy to a ``received`` routine run, in one transaction.

        With ``enforce``, an active instance (same routine and fingerprint, linked task or run
        not terminal; an archived or missing task is inactive) settles the run ``coalesced``
        (``coalesce``) or ``skipped``. Otherwise a heavy run (``task`` given: ``workspace_id``,
        ``title``, ``description``, ``assignee_agent_id``) creates its task on the routine
        workflow and becomes ``task_created``; a lightweight one stays ``received`` for the
        caller to dispatch (:attr:`GateResult.proceed`). The routine row is locked on
        PostgreSQL, so concurrent fires of one routine are gated one at a time.

        ``routine_id``, when the caller knows it, saves reading the run before the lock.

        ``fresh``: the ``received`` run itself, when the caller inserted it in the
        transaction this call joins and holds its routine's row there
        (:meth:`routines_to_fire`). No other process can have seen it, so the gate neither
        locks the routine nor reads the run; a lightweight run that proceeds comes back
        unwritten, with the ``dispatch_fingerprint`` for the caller's :meth:`settle` to
        store with the outcome (one write instead of two).
        """
        with self._db.write() as conn:
            if fresh is not None:
                held_routine_id = fresh.routine_id
            else:
                routine_row(conn, routine_id or _run_in(conn, run_id).routine_id, lock=True)
                current = _run_in(conn, run_id)  # read again under the lock
                if current.status is not RoutineRunStatus.RECEIVED:
                    return GateResult(run=None)
                held_routine_id = current.routine_id
            active = (
                _find_active(conn, held_routine_id, fingerprint, other_than=run_id)
                if enforce
                else None
            )
            if fresh is not None and active is None and task is None:
                return GateResult(run=replace(fresh, dispatch_fingerprint=fingerprint))
            values: dict[str, Any] = {"dispatch_fingerprint": fingerprint}
            created: Task | None = None
            if active is not None:
                status = RoutineRunStatus.COALESCED if coalesce else RoutineRunStatus.SKIPPED
                values |= {
                    "status": status.value,
                    "status_reason": f"routine run {active.id} is still active",
                    "coalesced_into_run_id": active.id if coalesce else None,
                    "completed_at": now,
                }
            elif task is not None:
                created = _insert_routine_task(conn, task, now)
                values |= {
                    "status": RoutineRunStatus.TASK_CREATED.value,
                    "linked_task_id": created.id,
                }
            params = {"routine_run_id": run_id, **values}
            settled = first_row(conn, _SETTLE_RECEIVED, params)
            if settled is None:
                raise ConflictError("routine run was dispatched concurrently")  # rolls back
            return GateResult(run=routine_run_from_row(settled), active=active, task=created)

    def settle(
        self,
        run_id: int,
        status: RoutineRunStatus,
        *,
        now: datetime,
        reason: str | None = None,
        linked_run_id: int | None = None,
        fingerprint: str | None = None,
    ) -> RoutineRun | None:
        """Move a ``received`` routine run to ``status`` (compare-and-set).

        ``fingerprint``: the ``dispatch_fingerprint`` to store with the outcome (the one
        :meth:`gate` gave a ``fresh`` run that proceeded).

        Returns:
            The updated run, or ``None`` when it was no longer ``received``.
        """
        values: dict[str, Any] = {"status": status.value, "status_reason": reason}
        if linked_run_id is not None:
            values["linked_run_id"] = linked_run_id
        if fingerprint is not None:
            values["dispatch_fingerprint"] = fingerprint
        if status not in LINKED_ROUTINE_RUN_STATUSES:
            values["completed_at"] = now
        with self._db.write() as conn:
            settled = first_row(conn, _SETTLE_RECEIVED, {"routine_run_id": run_id, **values})
            return routine_run_from_row(settled) if settled is not None else None

    def end_linked(
        self,
        status: RoutineRunStatus,
        *,
        now: datetime,
        task_id: str | None = None,
        run_id: int | None = None,
        reason: str | None = None,
    ) -> int:
        """End the ``task_created``/``dispatched`` routine runs linked to a task or run.

        Returns:
            How many routine runs ended.
        """
        query = sa.update(routine_runs).where(
            routine_runs.c.status.in_([item.value for item in LINKED_ROUTINE_RUN_STATUSES])
        )
        if task_id is not None:
            query = query.where(routine_runs.c.linked_task_id == task_id)
        elif run_id is not None:
            query = query.where(
                routine_runs.c.linked_run_id == run_id, routine_runs.c.linked_task_id.is_(None)
            )
        else:
            return 0
        with self._db.write() as conn:
            values = {"status": status.value, "status_reason": reason, "completed_at": now}
            return int(conn.execute(query.values(values)).rowcount)


def _insert_routine_task(conn: Connection, task: Mapping[str, Any], now: datetime) -> Task:
    space = workspace_row(conn, task["workspace_id"])
    task_id = new_id()
    conn.execute(
        sa.insert(tasks).values(
            id=task_id,
            workspace_id=task["workspace_id"],
            workflow_id=space["routine_workflow_id"],
            title=task["title"],
            description=task["description"],
            state=TaskState.TODO.value,
            assignee_agent_id=task["assignee_agent_id"],
            reviewers=[],
            approvers=[],
            created_at=now,
            updated_at=now,
        )
    )
    return get_task_in(conn, task_id)
