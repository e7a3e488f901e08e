"""The routine service: routine and trigger CRUD, and firing by cron, webhook or hand.

Every fire becomes a routine run (DESIGN §4) that goes through the concurrency policy; a
heavy routine then creates a task on the routine workflow (whose ``task_assigned`` wake
starts the work), a lightweight one sends a taskless ``routine`` wake through intake.
Idempotency keys are those of the specification: ``routine:<id>:<trigger_id>:<unix_minute>``
for cron ticks, ``routine:<id>:webhook:<key>`` for keyed webhook deliveries,
``routine:<id>:webhook:<run_id>`` and ``routine:<id>:manual:<run_id>`` otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import (
    ConflictError,
    IdempotencyKeyReusedError,
    InvalidInputError,
    NotFoundError,
)
from office_scheduler.domain.idempotency import fingerprint
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    Routine,
    RoutineRun,
    RoutineRunSource,
    RoutineStatus,
    RoutineTrigger,
    SigningMode,
)
from office_scheduler.intake.service import Intake
from office_scheduler.routines import webhooks
from office_scheduler.routines.dispatch import Publish, RoutineDispatcher
from office_scheduler.routines.templates import (
    builtin_values,
    check_json,
    resolve_variables,
)
from office_scheduler.routines.triggers import TriggerOps
from office_scheduler.routines.validation import routine_values
from office_scheduler.store.facade import Store
from office_scheduler.store.routine_runs import NewRoutineRun

log = structlog.get_logger(__name__)


_ROUTINE_DEFAULTS: dict[str, object] = {
    "description": "",
    "assignee_agent_id": None,
    "status": RoutineStatus.ACTIVE.value,
    "concurrency_policy": ConcurrencyPolicy.COALESCE_IF_ACTIVE.value,
    "catch_up_policy": CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP.value,
    "catch_up_max": 25,
    "task_template": None,
    "variables": [],
}


class RoutineService(TriggerOps):
    """Routines: CRUD, manual and webhook fires, dispatch (the cron loop uses :meth:`fire_due`).

    Args:
        store: the database.
        clock: time source.
        intake: lightweight routines wake through it.
        publish: the event bus (a heavy routine's task is announced with ``TaskCreated``).

    Attributes:
        dispatcher: takes received routine runs through the concurrency gate;
            ``dispatch`` is its :meth:`~RoutineDispatcher.dispatch`.
    """

    def __init__(self, store: Store, clock: Clock, *, intake: Intake, publish: Publish) -> None:
        self._store = store
        self._clock = clock
        self.dispatcher = RoutineDispatcher(store, clock, intake=intake, publish=publish)
        self.dispatch = self.dispatcher.dispatch

    # -- routines -------------------------------------------------------------------------

    async def _check_assignee(self, workspace_id: str, agent_id: object) -> None:
        if agent_id is None:
            return
        agent = await asyncio.to_thread(self._store.office.find_agent, str(agent_id))
        if agent is None or agent.workspace_id != workspace_id:
            raise NotFoundError(
                f"agent {agent_id} not found in workspace {workspace_id}",
                field="assignee_agent_id",
            )

    async def create_routine(self, workspace_id: str, fields: Mapping[str, object]) -> Routine:
        """Create a routine; unspecified fields take the specification's defaults.

        Args:
            workspace_id: the routine's workspace.
            fields: ``name`` (required) and any of ``description``, ``assignee_agent_id``,
                ``status``, ``concurrency_policy``, ``catch_up_policy``, ``catch_up_max``,
                ``task_template`` (``{"title", "description"}`` or ``None``), ``variables``.

        Raises:
            InvalidInputError: a missing name or a malformed field (named in ``field``).
            NotFoundError: no such workspace or assignee in it.
        """
        if "name" not in fields:
            raise InvalidInputError("name is required", field="name")
        values = routine_values({**_ROUTINE_DEFAULTS, **fields})
        await self._check_assignee(workspace_id, values["assignee_agent_id"])
        routine = await asyncio.to_thread(
            self._store.routines.create_routine,
            {"workspace_id": workspace_id, **values},
            now=self._clock.now(),
        )
        log.info("routine_created", routine_id=routine.id, name=routine.name)
        return routine

    async def update_routine(self, routine_id: str, changes: Mapping[str, object]) -> Routine:
        """Change a routine. Reactivating one reschedules its triggers from now.

        Raises:
            NotFoundError: no such routine or assignee.
            InvalidInputError: a malformed field.
        """
        routine = await self.get_routine(routine_id)
        values = routine_values(
            changes,
            current_template=routine.task_template,
            current_variables=routine.variables,
        )
        if "assignee_agent_id" in values:
            await self._check_assignee(routine.workspace_id, values["assignee_agent_id"])
        now = self._clock.now()
        resuming = values.get("status") == RoutineStatus.ACTIVE.value
        next_runs = await self.next_ticks(routine_id, now) if resuming else None
        return await asyncio.to_thread(
            self._store.routines.update_routine,
            routine_id,
            values,
            now=now,
            next_runs_on_resume=next_runs,
        )

    async def get_routine(self, routine_id: str) -> Routine:
        """The routine ``routine_id``.

        Raises:
            NotFoundError: no such routine.
        """
        return await asyncio.to_thread(self._store.routines.get_routine, routine_id)

    async def delete_routine(self, routine_id: str) -> None:
        """Delete a routine, its triggers and its routine runs.

        Raises:
            NotFoundError: no such routine.
        """
        await asyncio.to_thread(self._store.routines.delete_routine, routine_id)

    # -- fires ----------------------------------------------------------------------------

    async def fire_manual(
        self, routine_id: str, variables: Mapping[str, object] | None = None
    ) -> RoutineRun:
        """Fire a routine now ("fire now"); the wake has no coalescing hold.

        Raises:
            NotFoundError: no such routine.
            ConflictError: the routine is not active.
            InvalidInputError: a variable value of the wrong type or a missing required one.
        """
        routine = await self.get_routine(routine_id)
        self._require_active(routine)
        provided = dict(variables or {})
        check_json(provided, field="variables")
        values = resolve_variables(
            routine.variables, provided, builtin_values(self._clock.now(), "")
        )
        run, _ = await asyncio.to_thread(
            self._store.routines.insert_run,
            NewRoutineRun(
                routine_id=routine.id,
                trigger_id=None,
                source=RoutineRunSource.MANUAL,
                variables=values,
                scheduled_for=None,
                key_prefix=f"routine:{routine.id}:manual:",
            ),
            now=self._clock.now(),
        )
        return await self.dispatch(run, routine)

    async def fire_webhook(
        self, public_id: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[RoutineRun, bool]:
        """Handle ``POST /api/routine-triggers/{public_id}/fire``.

        Args:
            public_id: the trigger's URL id.
            headers: request headers, names in lower case.
            body: the raw body (its JSON object provides the variables).

        Returns:
            ``(routine_run, created)``; ``created`` is false for a repeated
            ``Idempotency-Key`` (the first delivery's run comes back, nothing else happens).

        Raises:
            NotFoundError: no such webhook trigger.
            AuthError: a missing/wrong signature or bearer secret, or a stale timestamp;
                nothing is stored.
            ConflictError: a replayed signed delivery, or a disabled trigger or inactive
                routine.
            InvalidInputError: a malformed body, key or variable.
            IdempotencyKeyReusedError: the ``Idempotency-Key`` came before with another
                body (HTTP 422 naming the key); nothing is stored.
        """
        found = await asyncio.to_thread(self._store.routines.webhook_trigger, public_id)
        if found is None:
            raise NotFoundError("no such webhook trigger", field="public_id")
        trigger, secret = found
        now = self._clock.now()
        mode = trigger.signing_mode or SigningMode.NONE
        signature = webhooks.verify(mode, secret, headers, body, now)
        key = webhooks.idempotency_key(headers)
        provided = webhooks.parse_body(body)
        scoped_key = f"routine:{trigger.routine_id}:webhook:{key}" if key else None
        # The parsed body, so that a redelivery differing only in layout is still one.
        request_fingerprint = fingerprint(provided) if key else None
        try:
            return await self._deliver(
                trigger, provided, now, signature, scoped_key, request_fingerprint
            )
        except IdempotencyKeyReusedError:
            assert key is not None
            raise IdempotencyKeyReusedError(key, field="Idempotency-Key") from None

    async def _deliver(
        self,
        trigger: RoutineTrigger,
        provided: Mapping[str, Any],
        now: datetime,
        signature: str | None,
        scoped_key: str | None,
        request_fingerprint: str | None,
    ) -> tuple[RoutineRun, bool]:
        """:meth:`fire_webhook` once the delivery is authenticated and parsed."""
        if scoped_key is not None:
            earlier = await asyncio.to_thread(
                self._store.routines.find_run_by_key, scoped_key, fingerprint=request_fingerprint
            )
            if earlier is not None:
                return earlier, False  # a redelivery: answered even if paused since
        routine = await self.firing_routine(trigger)
        values = resolve_variables(
            routine.variables, provided, builtin_values(now, trigger.timezone)
        )
        run, created = await asyncio.to_thread(
            self._store.routines.insert_run,
            NewRoutineRun(
                routine_id=routine.id,
                trigger_id=trigger.id,
                source=RoutineRunSource.WEBHOOK,
                variables=values,
                scheduled_for=None,
                idempotency_key=scoped_key,
                key_prefix=f"routine:{routine.id}:webhook:",
                delivery_signature=signature,
                request_fingerprint=request_fingerprint,
            ),
            now=now,
        )
        if not created:
            return run, False
        return await self.dispatch(run, routine), True

    async def firing_routine(self, trigger: RoutineTrigger) -> Routine:
        """The routine a webhook delivery of ``trigger`` fires.

        Raises:
            NotFoundError: the routine is gone.
            ConflictError: the trigger is disabled, or the routine is not active.
        """
        routine = await self.get_routine(trigger.routine_id)
        if not trigger.enabled:
            raise ConflictError("this webhook trigger is disabled", field="enabled")
        self._require_active(routine)
        return routine

    @staticmethod
    def _require_active(routine: Routine) -> None:
        if routine.status is not RoutineStatus.ACTIVE:
            raise ConflictError(
                f"routine {routine.name!r} is {routine.status.value}; only active routines fire",
                field="status",
            )
