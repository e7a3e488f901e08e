"""Importing routines: upsert by name, triggers reconciled with the file.

Works on the store alone (no running service): values go through the routine service's
validators (:func:`~office_scheduler.routines.validation.routine_values`) and straight into
:class:`~office_scheduler.store.routines.RoutineStore`.

Matching. A routine file matches the workspace's routine of the same name; when several
share it (every coordinator gets its own "Coordinator heartbeat"), the one with the same
assignee is preferred, then the oldest. Triggers are matched within the routine: schedule
triggers by ``(cron, timezone)``, webhook triggers by signing mode, manual ones by kind.
Matched triggers are kept (a webhook keeps its public id and secret; ``enabled`` is updated
in place), triggers the file lacks are deleted and new ones created. Routines the config
does not mention are left alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from office_scheduler.cron import parse_schedule
from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.routines import (
    Routine,
    RoutineStatus,
    RoutineTrigger,
    SigningMode,
    TriggerKind,
)
from office_scheduler.files.model import Action, Change, NewWebhook, RoutineSpec, TriggerSpec
from office_scheduler.routines import webhooks
from office_scheduler.routines.validation import routine_values
from office_scheduler.store.facade import Store

#: Routine fields compared by a plan, in the config's language.
ROUTINE_KEYS = (
    "description",
    "assignee",
    "status",
    "concurrency_policy",
    "catch_up_policy",
    "catch_up_max",
    "task_template",
    "variables",
)


def routine_label(spec: RoutineSpec, specs: Sequence[RoutineSpec]) -> str:
    """The routine's name in a plan: with its assignee when another routine shares it."""
    shared = sum(other.name == spec.name for other in specs) > 1
    return f"{spec.name} ({spec.assignee or 'no assignee'})" if shared else spec.name


def _spec_key(spec: TriggerSpec) -> tuple[str, ...]:
    if spec.kind is TriggerKind.SCHEDULE:
        return (spec.kind.value, spec.cron or "", spec.timezone or "UTC")
    if spec.kind is TriggerKind.WEBHOOK:
        mode = (spec.signing_mode or SigningMode.HMAC_SHA256).value
        return (spec.kind.value, mode, json.dumps(spec.events, sort_keys=True))
    return (spec.kind.value,)


def _trigger_key(trigger: RoutineTrigger) -> tuple[str, ...]:
    if trigger.kind is TriggerKind.SCHEDULE:
        return (trigger.kind.value, trigger.cron_expression or "", trigger.timezone or "UTC")
    if trigger.kind is TriggerKind.WEBHOOK:
        mode = (trigger.signing_mode or SigningMode.NONE).value
        return (trigger.kind.value, mode, json.dumps(trigger.events, sort_keys=True))
    return (trigger.kind.value,)


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggerSync:
    """How a routine's stored triggers become the file's."""

    keep: tuple[tuple[RoutineTrigger, TriggerSpec], ...] = ()
    create: tuple[TriggerSpec, ...] = ()
    delete: tuple[RoutineTrigger, ...] = ()

    @property
    def changed(self) -> bool:
        """True when a trigger is added, removed, enabled or disabled."""
        return bool(
            self.create
            or self.delete
            or any(trigger.enabled != spec.enabled for trigger, spec in self.keep)
        )


def match_triggers(
    existing: Sequence[RoutineTrigger], wanted: Sequence[TriggerSpec]
) -> TriggerSync:
    """Pair stored triggers with the file's (same key, preferably the same ``enabled``)."""
    available = list(existing)
    paired: dict[int, RoutineTrigger] = {}
    for exact in (True, False):
        for index, spec in enumerate(wanted):
            if index in paired:
                continue
            for trigger in available:
                same = _trigger_key(trigger) == _spec_key(spec)
                if same and (not exact or trigger.enabled == spec.enabled):
                    paired[index] = trigger
                    available.remove(trigger)
                    break
    return TriggerSync(
        keep=tuple((paired[i], spec) for i, spec in enumerate(wanted) if i in paired),
        create=tuple(spec for i, spec in enumerate(wanted) if i not in paired),
        delete=tuple(available),
    )


def match_routines(
    existing: Sequence[Routine], specs: Sequence[RoutineSpec], agent_names: Mapping[str, str]
) -> list[Routine | None]:
    """The stored routine each spec updates (``None``: create one); see the module docstring.

    Args:
        existing: the workspace's routines, oldest first.
        specs: the config's routines.
        agent_names: agent id → name in the workspace.
    """
    available = list(existing)
    found: list[Routine | None] = [None] * len(specs)
    for by_assignee in (True, False):
        for index, spec in enumerate(specs):
            if found[index] is not None:
                continue
            for routine in available:
                assignee = agent_names.get(routine.assignee_agent_id or "")
                if routine.name == spec.name and (not by_assignee or assignee == spec.assignee):
                    found[index] = routine
                    available.remove(routine)
                    break
    return found


def _wanted(spec: RoutineSpec) -> dict[str, object]:
    return {
        "description": spec.description,
        "assignee": spec.assignee,
        "status": spec.status,
        "concurrency_policy": spec.concurrency_policy,
        "catch_up_policy": spec.catch_up_policy,
        "catch_up_max": spec.catch_up_max,
        "task_template": spec.task_template,
        "variables": spec.variables,
    }


def routine_diff(routine: Routine, spec: RoutineSpec, agent_names: Mapping[str, str]) -> list[str]:
    """The config keys of ``spec`` that differ from the stored ``routine``."""
    current = {
        key: (
            agent_names.get(routine.assignee_agent_id or "")
            if key == "assignee"
            else getattr(routine, key)
        )
        for key in ROUTINE_KEYS
    }
    return [key for key, value in _wanted(spec).items() if current[key] != value]


def plan_routines(
    store: Store, workspace_id: str | None, specs: Sequence[RoutineSpec]
) -> list[Change]:
    """One ``routine`` change per spec, in the config's order."""
    if workspace_id is None:
        return [
            Change(kind="routine", name=routine_label(spec, specs), action=Action.CREATE)
            for spec in specs
        ]
    agent_names = {agent.id: agent.name for agent in store.office.list_agents(workspace_id)}
    matches = match_routines(store.routines.list_routines(workspace_id), specs, agent_names)
    changes = []
    for spec, routine in zip(specs, matches, strict=True):
        label = routine_label(spec, specs)
        if routine is None:
            changes.append(Change(kind="routine", name=label, action=Action.CREATE))
            continue
        fields = routine_diff(routine, spec, agent_names)
        if match_triggers(store.routines.list_triggers(routine.id), spec.triggers).changed:
            fields.append("triggers")
        action = Action.UPDATE if fields else Action.UNCHANGED
        changes.append(Change(kind="routine", name=label, action=action, fields=tuple(fields)))
    return changes


def _column_values(
    spec: RoutineSpec, keys: Sequence[str], agent_ids: Mapping[str, str]
) -> dict[str, Any]:
    changes: dict[str, object] = {}
    for key in keys:
        if key == "assignee":
            if spec.assignee is not None and spec.assignee not in agent_ids:
                raise NotFoundError(f"agent {spec.assignee!r} not found", field="assignee")
            changes["assignee_agent_id"] = agent_ids[spec.assignee] if spec.assignee else None
        elif key in ("task_template", "variables"):
            changes["task_template"] = spec.task_template
            changes["variables"] = list(spec.variables)
        else:
            value = getattr(spec, key)
            changes[key] = value.value if key.endswith(("status", "policy")) else value
    return routine_values(changes)


def _trigger_values(spec: TriggerSpec, now: datetime) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {"kind": spec.kind.value, "enabled": spec.enabled}
    if spec.kind is TriggerKind.SCHEDULE:
        schedule = parse_schedule(spec.cron or "", spec.timezone)
        values |= {
            "cron_expression": schedule.expression,
            "timezone": schedule.timezone,
            "next_run_at": schedule.next_fire(now),
        }
    elif spec.kind is TriggerKind.WEBHOOK:
        mode = spec.signing_mode or SigningMode.HMAC_SHA256
        secret = None if mode is SigningMode.NONE else webhooks.new_secret()
        values |= {
            "public_id": webhooks.new_public_id(),
            "signing_mode": mode.value,
            "secret": secret,
            "timezone": "",
            "options": None if spec.events is None else {"events": spec.events},
        }
        return values, secret
    return values, None


def _sync_triggers(
    store: Store, routine: Routine, spec: RoutineSpec, now: datetime, *, reschedule: bool
) -> list[NewWebhook]:
    """Make the routine's triggers the file's; returns the webhooks it created."""
    sync = match_triggers(store.routines.list_triggers(routine.id), spec.triggers)
    for trigger in sync.delete:
        store.routines.delete_trigger(trigger.id)
    for trigger, wanted in sync.keep:
        values: dict[str, Any] = {}
        if trigger.enabled != wanted.enabled:
            values["enabled"] = wanted.enabled
        schedule = trigger.kind is TriggerKind.SCHEDULE and trigger.cron_expression
        if schedule and wanted.enabled and (reschedule or not trigger.enabled):
            # From now on, like the service: ticks missed while off are not caught up.
            cron = parse_schedule(trigger.cron_expression or "", trigger.timezone)
            values["next_run_at"] = cron.next_fire(now)
        if values:
            store.routines.update_trigger(trigger.id, values)
    created = []
    for wanted in sync.create:
        values, secret = _trigger_values(wanted, now)
        trigger = store.routines.create_trigger(routine.id, values, now=now)
        if trigger.kind is TriggerKind.WEBHOOK and trigger.public_id is not None:
            created.append(
                NewWebhook(
                    routine=routine.name,
                    public_id=trigger.public_id,
                    signing_mode=trigger.signing_mode or SigningMode.NONE,
                    secret=secret,
                )
            )
    return created


def apply_routines(
    store: Store,
    workspace_id: str,
    specs: Sequence[RoutineSpec],
    changes: Sequence[Change],
    now: datetime,
) -> list[NewWebhook]:
    """Create or update the routines of a plan (``changes`` pairs with ``specs``).

    Matching is redone against the store: a routine planned as new that exists by now is
    updated instead. That is how a "Coordinator heartbeat" file meets the routine installed
    with its coordinator earlier in the same import. A routine planned as unchanged is
    compared again too: a role change earlier in the import pauses or resumes the agent's
    heartbeat, and the file's status is put back.

    Returns:
        The webhook triggers created, with their secrets (shown this once).

    Raises:
        NotFoundError: a routine planned for update was removed meanwhile.
    """
    agents = store.office.list_agents(workspace_id)
    agent_ids = {agent.name: agent.id for agent in agents}
    agent_names = {agent.id: agent.name for agent in agents}
    matches = match_routines(store.routines.list_routines(workspace_id), specs, agent_names)
    created: list[NewWebhook] = []
    for spec, change, routine in zip(specs, changes, matches, strict=True):
        if change.action is Action.UNCHANGED and (
            # An agent's role change earlier in this import may have paused or resumed its
            # heartbeat: the file still wins, so the next plan is empty.
            routine is None or not routine_diff(routine, spec, agent_names)
        ):
            continue
        if routine is None:
            if change.action is Action.UPDATE:
                raise NotFoundError(f"routine {spec.name!r} not found", field="routine")
            values = _column_values(spec, ("name", *ROUTINE_KEYS), agent_ids)
            routine = store.routines.create_routine(
                {"workspace_id": workspace_id, **values}, now=now
            )
            reschedule = False
        else:
            keys = routine_diff(routine, spec, agent_names)
            reschedule = (
                routine.status is not RoutineStatus.ACTIVE and spec.status is RoutineStatus.ACTIVE
            )
            if keys:
                values = _column_values(spec, keys, agent_ids)
                routine = store.routines.update_routine(routine.id, values, now=now)
        created += _sync_triggers(store, routine, spec, now, reschedule=reschedule)
    return created
