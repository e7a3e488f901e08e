"""Validation of routine and trigger fields, producing the store's column values.

Every error is an :class:`InvalidInputError` whose ``field`` names the offending input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    RoutineStatus,
    RoutineVariable,
    TaskTemplate,
)
from office_scheduler.routines.templates import declare_variables
from office_scheduler.store.routine_rows import template_to_json, variables_to_json
from office_scheduler.store.validation import enum_value

MAX_CATCH_UP = 1000
MAX_TITLE = 500
MAX_DESCRIPTION = 20_000

ROUTINE_FIELDS = frozenset(
    {
        "name",
        "description",
        "assignee_agent_id",
        "status",
        "concurrency_policy",
        "catch_up_policy",
        "catch_up_max",
        "task_template",
        "variables",
    }
)
TRIGGER_FIELDS = frozenset(
    {
        "kind",
        "enabled",
        "cron_expression",
        "timezone",
        "signing_mode",
        "secret",
        "events",
        "task_id",
    }
)


def text(value: object, *, field: str, limit: int, required: bool = True) -> str:
    """A stripped string of at most ``limit`` characters (non-empty when ``required``).

    Raises:
        InvalidInputError: not a string, empty when required, or too long.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string", field=field)
    cleaned = value.strip()
    if required and not cleaned:
        raise InvalidInputError(f"{field} must not be empty", field=field)
    if len(cleaned) > limit:
        raise InvalidInputError(f"{field} is longer than {limit} characters", field=field)
    return cleaned


def task_template(value: object) -> TaskTemplate | None:
    """A template from ``None``/``{}`` (lightweight) or ``{"title", "description"?}``.

    Raises:
        InvalidInputError: not an object, unknown keys, or a missing/blank title.
    """
    if value is None or value == {} or value == "":
        return None
    if isinstance(value, TaskTemplate):
        value = {"title": value.title, "description": value.description}
    if not isinstance(value, Mapping):
        raise InvalidInputError("task_template must be an object or null", field="task_template")
    unknown = set(value) - {"title", "description"}
    if unknown:
        raise InvalidInputError(
            f"task_template has unknown keys: {sorted(unknown)}", field="task_template"
        )
    return TaskTemplate(
        title=text(value.get("title"), field="task_template.title", limit=MAX_TITLE),
        description=text(
            value.get("description", ""),
            field="task_template.description",
            limit=MAX_DESCRIPTION,
            required=False,
        ),
    )


def catch_up_max(value: object) -> int:
    """An integer from 1 to 1000.

    Raises:
        InvalidInputError: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CATCH_UP:
        raise InvalidInputError(
            f"catch_up_max must be an integer from 1 to {MAX_CATCH_UP}", field="catch_up_max"
        )
    return value


def routine_values(
    changes: Mapping[str, object],
    *,
    current_template: TaskTemplate | None = None,
    current_variables: tuple[RoutineVariable, ...] = (),
) -> dict[str, Any]:
    """Column values for the routine fields in ``changes``.

    Variables are re-declared whenever the template or the declarations change, so a new
    ``{{name}}`` in the template is declared on save.

    Raises:
        InvalidInputError: an unknown or malformed field (named in ``field``).
    """
    values: dict[str, Any] = {}
    for key, value in changes.items():
        if key not in ROUTINE_FIELDS:
            raise InvalidInputError(f"unknown routine field {key!r}", field=key)
        if key == "name":
            values[key] = text(value, field=key, limit=200)
        elif key == "description":
            values[key] = text(value, field=key, limit=MAX_DESCRIPTION, required=False)
        elif key == "assignee_agent_id":
            values[key] = None if value is None else text(value, field=key, limit=40)
        elif key == "status":
            values[key] = enum_value(RoutineStatus, value, field=key).value
        elif key == "concurrency_policy":
            values[key] = enum_value(ConcurrencyPolicy, value, field=key).value
        elif key == "catch_up_policy":
            values[key] = enum_value(CatchUpPolicy, value, field=key).value
        elif key == "catch_up_max":
            values[key] = catch_up_max(value)
    if "task_template" in changes or "variables" in changes:
        template = (
            task_template(changes["task_template"])
            if "task_template" in changes
            else current_template
        )
        declared = changes.get("variables", current_variables)
        if declared is None:
            declared = ()
        if not isinstance(declared, list | tuple):
            raise InvalidInputError("variables must be a list", field="variables")
        values["task_template"] = template_to_json(template)
        values["variables"] = variables_to_json(declare_variables(declared, template))
    return values
