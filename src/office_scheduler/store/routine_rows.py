"""Row ↔ record mapping of routines, triggers and routine runs, and their row lookups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    Routine,
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
    RoutineStatus,
    RoutineTrigger,
    RoutineVariable,
    SigningMode,
    TaskTemplate,
    TriggerKind,
    VariableType,
)
from office_scheduler.store.rows import Row
from office_scheduler.store.schema import routine_triggers, routines
from office_scheduler.store.sql import first_row


def variables_to_json(variables: Sequence[RoutineVariable]) -> list[dict[str, Any]]:
    """Serialise declarations for the ``routines.variables`` column."""
    return [
        {
            "name": item.name,
            "type": item.type.value,
            "default": item.default,
            "required": item.required,
            "options": list(item.options),
            **({"path": item.path} if item.path else {}),
        }
        for item in variables
    ]


def template_to_json(template: TaskTemplate | None) -> dict[str, str] | None:
    """Serialise a task template (``None`` for a lightweight routine)."""
    if template is None:
        return None
    return {"title": template.title, "description": template.description}


def routine_from_row(row: Row) -> Routine:
    """Build a :class:`Routine` from its row."""
    template = row["task_template"]
    return Routine(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        description=row["description"],
        assignee_agent_id=row["assignee_agent_id"],
        status=RoutineStatus(row["status"]),
        concurrency_policy=ConcurrencyPolicy(row["concurrency_policy"]),
        catch_up_policy=CatchUpPolicy(row["catch_up_policy"]),
        catch_up_max=row["catch_up_max"],
        task_template=(
            TaskTemplate(title=template["title"], description=template.get("description", ""))
            if template
            else None
        ),
        variables=tuple(
            RoutineVariable(
                name=item["name"],
                type=VariableType(item["type"]),
                default=item.get("default"),
                required=bool(item.get("required", False)),
                options=tuple(item.get("options") or ()),
                path=item.get("path"),
            )
            for item in row["variables"]
        ),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def trigger_from_row(row: Row) -> RoutineTrigger:
    """Build a :class:`RoutineTrigger` from its row (the secret stays in the store)."""
    return RoutineTrigger(
        id=row["id"],
        routine_id=row["routine_id"],
        kind=TriggerKind(row["kind"]),
        enabled=bool(row["enabled"]),
        cron_expression=row["cron_expression"],
        timezone=row["timezone"],
        next_run_at=row["next_run_at"],
        last_fired_at=row["last_fired_at"],
        public_id=row["public_id"],
        signing_mode=SigningMode(row["signing_mode"]) if row["signing_mode"] else None,
        created_at=row["created_at"],
        events=(row["options"] or {}).get("events"),
        channel_task_id=(row["options"] or {}).get("task_id"),
    )


def routine_run_from_row(row: Row) -> RoutineRun:
    """Build a :class:`RoutineRun` from its row."""
    payload = row["trigger_payload"] or {}
    return RoutineRun(
        id=row["id"],
        routine_id=row["routine_id"],
        trigger_id=row["trigger_id"],
        source=RoutineRunSource(row["source"]),
        status=RoutineRunStatus(row["status"]),
        status_reason=row["status_reason"],
        variables=dict(payload.get("variables") or {}),
        missed=payload.get("missed"),
        warnings=tuple(payload.get("warnings") or ()),
        idempotency_key=row["idempotency_key"],
        linked_task_id=row["linked_task_id"],
        linked_run_id=row["linked_run_id"],
        coalesced_into_run_id=row["coalesced_into_run_id"],
        dispatch_fingerprint=row["dispatch_fingerprint"],
        scheduled_for=row["scheduled_for"],
        created_at=row["created_at"],
        completed_at=row["completed_at"],
    )


_ROUTINE_BY_ID = sa.select(routines).where(routines.c.id == sa.bindparam("routine_id"))
_LOCK_ROUTINE = _ROUTINE_BY_ID.with_for_update()


def routine_row(conn: Connection, routine_id: str, *, lock: bool = False) -> dict[str, Any]:
    """The routine's row (locked ``FOR UPDATE`` on PostgreSQL with ``lock``).

    Raises:
        NotFoundError: no such routine (field ``routine_id``).
    """
    query = _LOCK_ROUTINE if lock and conn.dialect.name == "postgresql" else _ROUTINE_BY_ID
    row = first_row(conn, query, {"routine_id": routine_id})
    if row is None:
        raise NotFoundError(f"routine {routine_id} not found", field="routine_id")
    return dict(row)


def trigger_row(conn: Connection, trigger_id: str) -> dict[str, Any]:
    """The trigger's row (with its secret).

    Raises:
        NotFoundError: no such trigger (field ``trigger_id``).
    """
    row = first_row(conn, sa.select(routine_triggers).where(routine_triggers.c.id == trigger_id))
    if row is None:
        raise NotFoundError(f"trigger {trigger_id} not found", field="trigger_id")
    return dict(row)
