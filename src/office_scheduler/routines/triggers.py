"""Trigger operations of the routine service: create, change, delete, next ticks."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.cron import parse_schedule
from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.routines import RoutineTrigger, SigningMode, TriggerKind
from office_scheduler.routines import webhooks
from office_scheduler.routines.validation import TRIGGER_FIELDS
from office_scheduler.store.facade import Store
from office_scheduler.store.validation import enum_value, flag

log = structlog.get_logger(__name__)


def _schedule_values(expression: object, timezone: object, now: datetime) -> dict[str, Any]:
    if not isinstance(expression, str):
        raise InvalidInputError("cron_expression must be a string", field="cron_expression")
    if not isinstance(timezone, str):
        raise InvalidInputError("timezone must be a string (an IANA zone)", field="timezone")
    schedule = parse_schedule(expression, timezone)
    return {
        "cron_expression": schedule.expression,
        "timezone": schedule.timezone,
        "next_run_at": schedule.next_fire(now),
    }


class TriggerOps:
    """Trigger methods of :class:`~office_scheduler.routines.service.RoutineService`."""

    _store: Store
    _clock: Clock

    async def add_trigger(
        self, routine_id: str, fields: Mapping[str, object]
    ) -> tuple[RoutineTrigger, str | None]:
        """Add a trigger to a routine.

        Args:
            routine_id: the routine.
            fields: ``kind`` (``schedule``, ``webhook``, ``manual``); for a schedule
                ``cron_expression`` and ``timezone`` (IANA, default UTC); for a webhook
                ``signing_mode`` (``none``, ``bearer``, ``hmac_sha256``, ``github``,
                ``slack``; default ``hmac_sha256``), ``secret`` (``github``: optional, the
                one set in GitHub; ``slack``: required, the app's signing secret),
                ``events`` (``github``: event name → accepted actions) and ``task_id``
                (``slack``: the channel task); ``enabled`` (default true).

        Returns:
            The trigger and, for a signed webhook, its secret: shown this once, never again.

        Raises:
            InvalidInputError: an unknown field, a bad kind, an invalid or never-firing cron
                expression, an unknown zone, a field of another signing mode (``field``
                names it).
            NotFoundError: no such routine, or no such channel task (field ``task_id``).
        """
        unknown = set(fields) - TRIGGER_FIELDS
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidInputError(f"unknown trigger field {name!r}", field=name)
        kind = enum_value(TriggerKind, fields.get("kind"), field="kind")
        values: dict[str, Any] = {
            "kind": kind.value,
            "enabled": flag(fields.get("enabled", True), field="enabled"),
        }
        secret: str | None = None
        if kind is TriggerKind.SCHEDULE:
            values |= _schedule_values(
                fields.get("cron_expression"), fields.get("timezone", ""), self._clock.now()
            )
        elif kind is TriggerKind.WEBHOOK:
            mode = enum_value(
                SigningMode,
                fields.get("signing_mode", SigningMode.HMAC_SHA256.value),
                field="signing_mode",
            )
            options, given = await self._mode_options(routine_id, mode, fields)
            secret = given or (None if mode is SigningMode.NONE else webhooks.new_secret())
            values |= {
                "public_id": webhooks.new_public_id(),
                "signing_mode": mode.value,
                "secret": secret,
                "options": options,
            }
            if given is not None:
                secret = None  # the caller's own secret is not echoed back
        handled = set(values) | ({"events", "task_id"} if kind is TriggerKind.WEBHOOK else set())
        for name in ("cron_expression", "timezone", "signing_mode", "secret", "events", "task_id"):
            if name in fields and name not in handled:
                raise InvalidInputError(
                    f"{name} does not apply to a {kind.value} trigger", field=name
                )
        trigger = await asyncio.to_thread(
            self._store.routines.create_trigger, routine_id, values, now=self._clock.now()
        )
        log.info("routine_trigger_created", routine_id=routine_id, trigger_id=trigger.id)
        return trigger, secret

    async def _mode_options(
        self, routine_id: str, mode: SigningMode, fields: Mapping[str, object]
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The ``options`` column and the caller's own secret of a webhook in ``mode``."""
        allowed = {
            SigningMode.GITHUB: {"secret", "events"},
            SigningMode.SLACK: {"secret", "task_id"},
        }.get(mode, set())
        for name in ("secret", "events", "task_id"):
            if name in fields and name not in allowed:
                raise InvalidInputError(
                    f"{name} does not apply to a {mode.value} webhook", field=name
                )
        secret = fields.get("secret")
        if secret is not None and (not isinstance(secret, str) or not secret.strip()):
            raise InvalidInputError("secret must be a non-empty string", field="secret")
        if mode is SigningMode.GITHUB:
            events = webhooks.check_github_events(fields.get("events"))
            return ({"events": events} if events is not None else None), secret
        if mode is SigningMode.SLACK:
            if secret is None:
                raise InvalidInputError(
                    "a slack webhook needs the Slack app's signing secret", field="secret"
                )
            task_id = fields.get("task_id")
            if not isinstance(task_id, str) or not task_id:
                raise InvalidInputError(
                    "a slack webhook needs task_id: the channel task its messages go to",
                    field="task_id",
                )
            routine = await asyncio.to_thread(self._store.routines.get_routine, routine_id)
            task = await asyncio.to_thread(self._store.office.get_task, task_id)
            if task.workspace_id != routine.workspace_id:
                raise NotFoundError(f"task {task_id} not found", field="task_id")
            return {"task_id": task_id}, secret
        return None, None

    async def update_trigger(
        self, trigger_id: str, changes: Mapping[str, object]
    ) -> RoutineTrigger:
        """Enable/disable a trigger or change its schedule; the next fire is recomputed.

        Raises:
            InvalidInputError: an unknown or malformed field, or a schedule field on a
                trigger that is not a schedule.
            NotFoundError: no such trigger.
        """
        trigger = await asyncio.to_thread(self._store.routines.get_trigger, trigger_id)
        unknown = set(changes) - {"enabled", "cron_expression", "timezone"}
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidInputError(f"trigger field {name!r} cannot be changed", field=name)
        values: dict[str, Any] = {}
        if "enabled" in changes:
            values["enabled"] = flag(changes["enabled"], field="enabled")
        if trigger.kind is TriggerKind.SCHEDULE:
            values |= _schedule_values(
                changes.get("cron_expression", trigger.cron_expression),
                changes.get("timezone", trigger.timezone),
                self._clock.now(),
            )
        elif "cron_expression" in changes or "timezone" in changes:
            field = "cron_expression" if "cron_expression" in changes else "timezone"
            raise InvalidInputError(f"a {trigger.kind.value} trigger has no schedule", field=field)
        return await asyncio.to_thread(self._store.routines.update_trigger, trigger_id, values)

    async def delete_trigger(self, trigger_id: str) -> None:
        """Delete a trigger.

        Raises:
            NotFoundError: no such trigger.
        """
        await asyncio.to_thread(self._store.routines.delete_trigger, trigger_id)

    async def list_triggers(self, routine_id: str) -> list[RoutineTrigger]:
        """A routine's triggers, oldest first."""
        return await asyncio.to_thread(self._store.routines.list_triggers, routine_id)

    async def next_ticks(self, routine_id: str, now: datetime) -> dict[str, datetime]:
        """The first tick after ``now`` of each schedule trigger of the routine, by id."""
        ticks: dict[str, datetime] = {}
        for trigger in await self.list_triggers(routine_id):
            if trigger.kind is TriggerKind.SCHEDULE and trigger.cron_expression:
                values = _schedule_values(trigger.cron_expression, trigger.timezone, now)
                ticks[trigger.id] = values["next_run_at"]
        return ticks
