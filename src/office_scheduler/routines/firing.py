"""One pass of the cron loop: claim due ticks by compare-and-set, then fire them.

A pass (1) gives unscheduled triggers their first tick, (2) claims each due trigger's ticks
by moving its ``next_run_at`` with a compare-and-set that inserts their routine runs in the
same transaction — so two scheduler processes on one PostgreSQL database can never fire a
tick twice — and dispatches them, still in that transaction (each trigger under a
savepoint; on SQLite one commit for up to 25 triggers, on PostgreSQL one per trigger), and
(3) dispatches routine runs a stopped process claimed but never dispatched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from functools import lru_cache

import structlog
from sqlalchemy.engine import Connection

from office_scheduler.clock import Clock
from office_scheduler.cron import CronSchedule, parse_schedule
from office_scheduler.domain.errors import InvalidInputError, NotFoundError, OfficeError
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    Routine,
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
    RoutineTrigger,
)
from office_scheduler.routines.dispatch import Dispatched, RoutineDispatcher
from office_scheduler.routines.templates import builtin_values, resolve_variables
from office_scheduler.routines.ticks import TickPlan, plan_ticks
from office_scheduler.store.engine import in_transaction, is_connection_lost
from office_scheduler.store.facade import Store
from office_scheduler.store.routine_runs import NewRoutineRun
from office_scheduler.store.routine_to_fire import RoutinesToFire, RoutineToFire
from office_scheduler.store.sql import savepoint

log = structlog.get_logger(__name__)

#: A ``received`` routine run older than this was left by a process that stopped.
ABANDONED_AFTER = timedelta(minutes=1)


#: Distinct ``(expression, timezone)`` pairs whose parsed schedules are kept between passes.
SCHEDULES_KEPT = 4096


@lru_cache(maxsize=SCHEDULES_KEPT)
def _schedule(expression: str, timezone: str) -> CronSchedule:
    """``parse_schedule``, remembered: a schedule is immutable and a function of its text.

    Most triggers share a handful of expressions, and parsing one costs more than firing it.
    An invalid pair raises every time (exceptions are not cached).
    """
    return parse_schedule(expression, timezone)


#: Tick plans kept: due triggers that share a schedule, first tick and policy share one.
PLANS_KEPT = 1024
#: :func:`~office_scheduler.routines.ticks.plan_ticks`, remembered. It is a pure function of
#: hashable, immutable arguments (the clock's instant among them), so a kept plan is never
#: stale; triggers on one schedule that came due together (heartbeats) are planned once.
_plan = lru_cache(maxsize=PLANS_KEPT)(plan_ticks)


def _unix_minute(instant: datetime) -> int:
    return int(instant.timestamp()) // 60


@contextmanager
def _alone(event: str, **ids: object) -> Iterator[None]:
    """Log an error of one trigger or routine run as ``event`` and let the pass go on.

    A lost database connection still ends the pass: every other item would fail the same.
    """
    try:
        yield
    except Exception as exc:
        if is_connection_lost(exc):
            raise
        log.exception(event, **ids)


def tick_run(routine: Routine, trigger: RoutineTrigger, tick: datetime) -> NewRoutineRun:
    """The routine run of one cron tick, with its built-ins taken from the tick.

    A required variable without a default makes the run ``failed`` from the start.
    """
    builtins = builtin_values(tick, trigger.timezone)
    run = NewRoutineRun(
        routine_id=routine.id,
        trigger_id=trigger.id,
        source=RoutineRunSource.CRON,
        variables=builtins,
        scheduled_for=tick,
        idempotency_key=f"routine:{routine.id}:{trigger.id}:{_unix_minute(tick)}",
    )
    try:
        return replace(run, variables=resolve_variables(routine.variables, {}, builtins))
    except InvalidInputError as exc:
        return replace(run, status=RoutineRunStatus.FAILED, status_reason=exc.message)


def _runs_of(routine: Routine, trigger: RoutineTrigger, plan: TickPlan) -> list[NewRoutineRun]:
    runs = [tick_run(routine, trigger, tick) for tick in plan.fire]
    summary = plan.missed_summary()
    if summary is None:
        return runs
    if routine.catch_up_policy is CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP and runs:
        runs[0] = replace(runs[0], missed=summary)
        return runs
    assert plan.missed_since is not None  # set whenever a summary exists
    skipped = NewRoutineRun(
        routine_id=routine.id,
        trigger_id=trigger.id,
        source=RoutineRunSource.CRON,
        variables={},
        scheduled_for=plan.missed_since,
        idempotency_key=(
            f"routine:{routine.id}:{trigger.id}:missed:{_unix_minute(plan.missed_since)}"
        ),
        missed=summary,
        status=RoutineRunStatus.SKIPPED,
        status_reason=f"missed {plan.missed_count} ticks since {summary['since']}",
    )
    return [skipped, *runs]


#: Due triggers claimed and dispatched per transaction, by dialect. On SQLite one commit
#: (one ``fsync``) serves many; the writer is alone anyway. PostgreSQL keeps one trigger
#: per transaction: a transaction holds its assignees' agent locks until it commits, and
#: many taken in trigger order could deadlock with intake taking them in another order.
TRIGGERS_PER_TRANSACTION = {"sqlite": 25, "postgresql": 1}


class BatchLostError(RuntimeError):
    """The database rolled back a whole batch of triggers while one of them failed.

    Nothing of the batch was committed or announced; the cron loop logs the pass as failed
    and the next pass fires every tick of the batch once.
    """

    def __init__(self, trigger_id: str) -> None:
        super().__init__(
            f"the transaction of a cron batch was rolled back while trigger {trigger_id} "
            "failed; nothing of the batch was kept"
        )


class _Failed:
    """A trigger's part of a transaction failed for a reason logged where it happened."""


_FAILED = _Failed()

#: What one trigger's part of a transaction came to: its plan and dispatches, ``None`` when
#: another process claimed the ticks first, the ``OfficeError`` to act on, or ``_FAILED``.
_Outcome = tuple[TickPlan, list[Dispatched]] | None | NotFoundError | InvalidInputError | _Failed


class CronFirer:
    """Fires due schedule triggers; the cron loop calls :meth:`fire_due` each pass.

    Args:
        store: the database.
        clock: time source.
        dispatcher: the routine service's dispatcher.
    """

    def __init__(self, store: Store, clock: Clock, dispatcher: RoutineDispatcher) -> None:
        self._store = store
        self._clock = clock
        self._dispatcher = dispatcher

    async def fire_due(self) -> list[RoutineRun]:
        """Fire every tick due at the clock's current time; returns the routine runs made.

        Due triggers are claimed and dispatched in transactions of up to
        :data:`TRIGGERS_PER_TRANSACTION` triggers (one commit for many on SQLite), each
        trigger under a savepoint of its own. One trigger's failure never stops the others:
        a trigger that fails for any other reason than a lost database connection is rolled
        back alone, logged (``routine_trigger_failed``) and tried again by the next pass,
        its ticks unclaimed.

        Raises:
            sqlalchemy.exc.DBAPIError: the database connection was lost (the cron loop
                backs off and tries the pass again; nothing of the unfinished transaction
                was kept).
            BatchLostError: SQLite ended a batch's whole transaction itself (a full disk,
                an I/O error): nothing of that batch was kept or announced, and the next
                pass fires it.
        """
        now = self._clock.now()
        await self._schedule_new(now)
        due = []
        for trigger in await asyncio.to_thread(self._store.routines.due_triggers, now):
            schedule = await self._schedule_of(trigger)
            if schedule is not None:
                due.append((trigger, schedule))
        size = TRIGGERS_PER_TRANSACTION.get(self._store.db.dialect, 1)
        made: list[RoutineRun] = []
        for first in range(0, len(due), size):
            chunk = due[first : first + size]
            outcomes = await asyncio.to_thread(self._claim_and_dispatch_many, chunk, now)
            for trigger, outcome in outcomes:
                with _alone("routine_trigger_failed", trigger_id=trigger.id):
                    made += await self._after_commit(trigger, outcome)
        abandoned = await asyncio.to_thread(
            self._store.routines.received_runs, created_before=now - ABANDONED_AFTER
        )
        for run in abandoned:
            log.warning("routine_run_recovered", routine_run_id=run.id)
            with _alone("routine_run_recovery_failed", routine_run_id=run.id):
                made.append(await self._dispatch_safely(run))
        return made

    async def _after_commit(self, trigger: RoutineTrigger, outcome: _Outcome) -> list[RoutineRun]:
        """Log and announce what one trigger's part of a committed transaction did."""
        if isinstance(outcome, NotFoundError):
            # Deleted between the due query and its claim: nothing left to fire.
            log.info("routine_trigger_vanished", trigger_id=trigger.id)
            return []
        if isinstance(outcome, InvalidInputError):
            await self._disable(trigger, outcome.message)
            return []
        if isinstance(outcome, _Failed):
            return []
        if outcome is None:
            log.info("routine_ticks_claimed_elsewhere", trigger_id=trigger.id)
            return []
        plan, fired = outcome
        log.info(
            "routine_ticks_claimed",
            routine_id=trigger.routine_id,
            trigger_id=trigger.id,
            fired=len(plan.fire),
            missed=plan.missed_count,
            next_run_at=plan.next_run_at.isoformat(),
        )
        return [await self._dispatcher.announce(dispatched) for dispatched in fired]

    async def _schedule_new(self, now: datetime) -> None:
        for trigger in await asyncio.to_thread(self._store.routines.unscheduled_triggers):
            schedule = await self._schedule_of(trigger)
            if schedule is None:
                continue
            try:
                first = schedule.next_fire(now)
                await asyncio.to_thread(self._store.routines.set_first_tick, trigger.id, first)
            except NotFoundError:
                log.info("routine_trigger_vanished", trigger_id=trigger.id)
            except InvalidInputError as exc:
                await self._disable(trigger, exc.message)

    async def _schedule_of(self, trigger: RoutineTrigger) -> CronSchedule | None:
        try:
            return _schedule(trigger.cron_expression or "", trigger.timezone)
        except InvalidInputError as exc:
            await self._disable(trigger, exc.message)
            return None

    async def _disable(self, trigger: RoutineTrigger, reason: str) -> None:
        """Disable a trigger that can no longer fire, so one bad trigger never stops a pass."""
        log.error("routine_trigger_disabled", trigger_id=trigger.id, reason=reason)
        try:
            await asyncio.to_thread(
                self._store.routines.update_trigger, trigger.id, {"enabled": False}
            )
        except NotFoundError:
            log.info("routine_trigger_vanished", trigger_id=trigger.id)

    def _claim_and_dispatch_many(
        self, chunk: list[tuple[RoutineTrigger, CronSchedule]], now: datetime
    ) -> list[tuple[RoutineTrigger, _Outcome]]:
        """Claim and dispatch ``chunk``'s triggers in one transaction, a savepoint each."""
        with self._store.db.transaction() as conn:
            held = self._store.routines.routines_to_fire({t.routine_id for t, _ in chunk})
            return [
                (trigger, self._in_savepoint(conn, trigger, schedule, held, now))
                for trigger, schedule in chunk
            ]

    def _in_savepoint(
        self,
        conn: Connection,
        trigger: RoutineTrigger,
        schedule: CronSchedule,
        held: RoutinesToFire,
        now: datetime,
    ) -> _Outcome:
        """One trigger's claim and dispatch; a failure rolls back its savepoint alone.

        Returns what it came to, the ``OfficeError`` the caller acts on, or
        :data:`_FAILED` (logged here).

        Raises:
            BatchLostError: SQLite ended the whole transaction (the earlier triggers' work
                is gone too: nothing of the batch may be committed or announced).
            sqlalchemy.exc.DBAPIError: the connection was lost.
        """
        try:
            with savepoint(conn):
                return self._claim_and_dispatch(
                    trigger, schedule, held.get(trigger.routine_id), now
                )
        except (NotFoundError, InvalidInputError) as exc:
            return exc
        except Exception as exc:
            if not in_transaction(conn):
                raise BatchLostError(trigger.id) from exc
            if is_connection_lost(exc):
                raise
            log.exception("routine_trigger_failed", trigger_id=trigger.id)
            return _FAILED

    def _claim_and_dispatch(
        self, trigger: RoutineTrigger, schedule: CronSchedule, held: RoutineToFire, now: datetime
    ) -> tuple[TickPlan, list[Dispatched]] | None:
        """Claim the trigger's due ticks and dispatch their runs, in one transaction.

        ``held`` is the trigger's routine as the transaction read (and on PostgreSQL locked) it.

        Returns the plan and what each run's dispatch wrote (to announce once committed),
        or ``None`` when another process claimed the ticks first. A run whose dispatch
        fails is settled ``failed`` and the others still go (a savepoint per run).
        """
        assert trigger.next_run_at is not None  # due triggers have one
        routines = self._store.routines
        with self._store.db.transaction() as conn:
            routine = held.routine
            plan = _plan(
                schedule,
                due_from=trigger.next_run_at,
                now=now,
                policy=routine.catch_up_policy,
                cap=routine.catch_up_max,
            )
            claimed = routines.claim_ticks(
                trigger.id,
                expected_next_run_at=trigger.next_run_at,
                next_run_at=plan.next_run_at,
                last_fired_at=plan.fire[-1] if plan.fire else trigger.last_fired_at,
                runs_to_insert=_runs_of(routine, trigger, plan),
                now=now,
            )
            if claimed is None:
                return None
            fired = []
            for run in claimed:
                if run.status is not RoutineRunStatus.RECEIVED:
                    fired.append(Dispatched(run))
                    continue
                try:
                    with savepoint(conn):
                        fired.append(self._dispatcher.dispatch_fired(run, held))
                except OfficeError as exc:
                    fired.append(Dispatched(self._settle_failed(run, exc)))
            return plan, fired

    def _settle_failed(self, run: RoutineRun, exc: OfficeError) -> RoutineRun:
        log.error("routine_dispatch_failed", routine_run_id=run.id, error=exc.message)
        settled = self._store.routines.settle(
            run.id, RoutineRunStatus.FAILED, now=self._clock.now(), reason=exc.message
        )
        return settled or run

    async def _dispatch_safely(self, run: RoutineRun) -> RoutineRun:
        try:
            return await self._dispatcher.dispatch(run)
        except OfficeError as exc:
            return await asyncio.to_thread(self._settle_failed, run, exc)
