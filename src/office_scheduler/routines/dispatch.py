"""Dispatching a ``received`` routine run: the concurrency gate, then a task or a wake.

The database work of a dispatch (gate, intake, settling the routine run) is one blocking
call, :meth:`RoutineDispatcher.dispatch_now`, so it can join a larger transaction: the
cron pass claims a trigger's ticks and dispatches their runs in one commit. What others
must hear of (the task created, the wake taken in) is announced only after that commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.events import Event, TaskCreated
from office_scheduler.domain.models import Task, WakeRequest
from office_scheduler.domain.routines import (
    ConcurrencyPolicy,
    Routine,
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
    RoutineStatus,
)
from office_scheduler.domain.status import Classification, WakeSource
from office_scheduler.intake.service import Intake
from office_scheduler.routines.templates import dispatch_fingerprint, render_template
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.reconnect import retry_once_if_connection_lost
from office_scheduler.store.routine_to_fire import RoutineToFire

log = structlog.get_logger(__name__)

Publish = Callable[[Event], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Dispatched:
    """What one dispatch wrote, to announce once its transaction has committed.

    Attributes:
        run: the routine run as it ends up.
        task: the task a heavy routine created (announced with ``TaskCreated``).
        wake: the request a lightweight routine sent and its intake result.
    """

    run: RoutineRun
    task: Task | None = None
    wake: tuple[WakeRequest, IntakeResult] | None = None


class RoutineDispatcher:
    """Takes received routine runs through the policy gate (DESIGN §8).

    Args:
        store: the database.
        clock: time source.
        intake: where a lightweight routine's wake goes.
        publish: the event bus (a heavy routine's task is announced with ``TaskCreated``).
    """

    def __init__(self, store: Store, clock: Clock, *, intake: Intake, publish: Publish) -> None:
        self._store = store
        self._clock = clock
        self._intake = intake
        self._publish = publish

    async def dispatch(self, run: RoutineRun, routine: Routine | None = None) -> RoutineRun:
        """Dispatch ``run`` in one transaction and announce the outcome.

        Safe to repeat (after a crash, or on several nodes): the gate and the final
        transition are compare-and-set on ``received``, and a lightweight wake reuses the
        routine run's idempotency key. A connection lost under the transaction is retried
        once; if the first commit had landed after all, the retry still announces the task
        it created (its assignee's wake comes from that announcement). Returns the routine
        run as it ends up.

        Raises:
            NotFoundError: the routine, or the assignee met by intake, no longer exists.
            InvalidInputError: the wake was refused by intake (its payload is too large).
        """

        def in_one_transaction(recovering: bool) -> Dispatched:
            with self._store.db.transaction():
                return self.dispatch_now(run, routine, recovering=recovering)

        dispatched = await asyncio.to_thread(
            retry_once_if_connection_lost, in_one_transaction, call="routine dispatch"
        )
        return await self.announce(dispatched)

    def dispatch_now(
        self, run: RoutineRun, routine: Routine | None = None, *, recovering: bool = False
    ) -> Dispatched:
        """The database work of :meth:`dispatch`, blocking; call it from a worker thread.

        Inside :meth:`~office_scheduler.store.engine.Database.transaction` every write joins
        the caller's transaction; pass the result to :meth:`announce` after it commits.
        ``recovering``: an earlier attempt may have committed without hearing so; a task
        found created is announced again (its ``task_assigned`` wake is keyed, so an
        announcement heard twice still wakes once).

        Raises:
            NotFoundError, InvalidInputError: as :meth:`dispatch`.
        """
        routine = routine or self._store.routines.get_routine(run.routine_id)
        return self._through_gate(run, routine, recovering=recovering)

    def dispatch_fired(self, run: RoutineRun, held: RoutineToFire) -> Dispatched:
        """:meth:`dispatch_now` of a cron tick's run inserted in the caller's transaction.

        ``held`` is the run's routine as that transaction read and holds it
        (:meth:`~office_scheduler.store.routines.RoutineStore.routines_to_fire`): no other
        process can have seen the run yet, so the gate neither locks the routine nor reads
        the run again, and the assignee check and the wake's coalescing hold come from
        ``held`` instead of a query each.

        Raises:
            NotFoundError, InvalidInputError: as :meth:`dispatch`.
        """
        return self._through_gate(run, held.routine, held=held)

    def _through_gate(
        self,
        run: RoutineRun,
        routine: Routine,
        *,
        recovering: bool = False,
        held: RoutineToFire | None = None,
    ) -> Dispatched:
        routines = self._store.routines
        failure = self._dispatch_problem(routine, held)
        if failure is not None:
            return Dispatched(self._settle(run, RoutineRunStatus.FAILED, failure))
        rendered = (
            render_template(routine.task_template, run.variables) if routine.task_template else None
        )
        if rendered is not None and not rendered.title.strip():
            return Dispatched(self._settle(run, RoutineRunStatus.FAILED, "rendered title is empty"))
        policy = routine.concurrency_policy
        gate = routines.gate(
            run.id,
            routine_id=routine.id,
            fingerprint=dispatch_fingerprint(rendered, routine.assignee_agent_id),
            enforce=policy is not ConcurrencyPolicy.ALWAYS_ENQUEUE,
            coalesce=policy is ConcurrencyPolicy.COALESCE_IF_ACTIVE,
            task=(
                {
                    "workspace_id": routine.workspace_id,
                    "title": rendered.title.strip()[:500],
                    "description": rendered.description,
                    "assignee_agent_id": routine.assignee_agent_id,
                }
                if rendered is not None
                else None
            ),
            now=self._clock.now(),
            fresh=run if held is not None else None,
        )
        if gate.run is None:
            current = routines.get_run(run.id)
            task_id = current.linked_task_id
            if recovering and current.status is RoutineRunStatus.TASK_CREATED and task_id:
                return Dispatched(current, task=self._store.office.find_task(task_id))
            return Dispatched(current)
        if gate.task is not None:
            return Dispatched(gate.run, task=gate.task)
        window = held.coalesce_window if held else None
        if not gate.proceed:
            log.info(
                "routine_run_" + gate.run.status.value,
                routine_id=routine.id,
                routine_run_id=run.id,
                active_routine_run_id=gate.active.id if gate.active else None,
            )
            if gate.run.status is RoutineRunStatus.COALESCED and rendered is None:
                # The fire's payload must reach the agent, not stay on this row: its wake
                # goes through intake like any other, which merges it into the active run
                # while that run has not started, else into one follow-up run that later
                # fires merge into as well.
                request = self._request(routine, gate.run)
                return Dispatched(
                    gate.run, wake=(request, self._intake.persist(request, window=window))
                )
            return Dispatched(gate.run)
        return self._wake(routine, gate.run, window)

    async def announce(self, dispatched: Dispatched) -> RoutineRun:
        """Tell the office what a committed dispatch did; returns its routine run."""
        if dispatched.task is not None:
            log.info(
                "routine_task_created",
                routine_id=dispatched.run.routine_id,
                task_id=dispatched.task.id,
            )
            await self._publish(TaskCreated(task=dispatched.task, by="system"))
        if dispatched.wake is not None:
            await self._intake.announce(*dispatched.wake)
        return dispatched.run

    def _dispatch_problem(self, routine: Routine, held: RoutineToFire | None) -> str | None:
        if routine.status is not RoutineStatus.ACTIVE:
            return f"routine is {routine.status.value}"
        if routine.assignee_agent_id is None:
            return "routine has no assignee"
        exists = (
            held.assignee_exists
            if held is not None
            else self._store.office.find_agent(routine.assignee_agent_id) is not None
        )
        if not exists:
            return f"assignee {routine.assignee_agent_id} no longer exists"
        return None

    @staticmethod
    def _request(routine: Routine, run: RoutineRun) -> WakeRequest:
        """The wake of a lightweight routine run, keyed by the run (safe to send again).

        A catch-up summary (``missed_ticks``) rides on it whichever way intake merges it.
        """
        assert routine.assignee_agent_id is not None  # checked by _dispatch_problem
        payload: dict[str, Any] = {"routine_id": routine.id, "variables": run.variables}
        if run.missed:
            payload["missed_ticks"] = run.missed
        periodic = run.source is RoutineRunSource.CRON
        return WakeRequest(
            workspace_id=routine.workspace_id,
            agent_id=routine.assignee_agent_id,
            source=WakeSource.ROUTINE,
            payload=payload,
            classification=Classification.PERIODIC if periodic else Classification.EVENT,
            idempotency_key=run.idempotency_key,
            hold=run.source is not RoutineRunSource.MANUAL,
        )

    def _wake(self, routine: Routine, run: RoutineRun, window: timedelta | None) -> Dispatched:
        request = self._request(routine, run)
        result = self._intake.persist(request, window=window)
        settled = self._store.routines.settle(
            run.id,
            RoutineRunStatus.DISPATCHED,
            now=self._clock.now(),
            linked_run_id=result.request.run_id,
            fingerprint=run.dispatch_fingerprint,
        )
        return Dispatched(settled or self._store.routines.get_run(run.id), wake=(request, result))

    def _settle(self, run: RoutineRun, status: RoutineRunStatus, reason: str) -> RoutineRun:
        log.warning("routine_run_" + status.value, routine_run_id=run.id, reason=reason)
        settled = self._store.routines.settle(run.id, status, now=self._clock.now(), reason=reason)
        return settled or self._store.routines.get_run(run.id)
