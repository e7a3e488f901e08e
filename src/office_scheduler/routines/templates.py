"""Routine variables and ``{{name}}`` templates (specification "Routines": variables).

Pure: no I/O, no clock. Resolution order, later wins: built-ins (``{{date}}``,
``{{datetime}}`` of the tick in the trigger's zone) → declared defaults → provided values.
A webhook delivery's whole JSON body is the value ``payload``: a template reads its fields
by path (``{{payload.issue.title}}``, list items by index: ``{{payload.labels.0.name}}``),
and a declared variable with ``path`` takes its value from there, checked by type. A path
the delivery lacks renders as an empty string and leaves a warning on the routine run.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.routines import (
    BUILTIN_VARIABLES,
    RoutineVariable,
    TaskTemplate,
    VariableType,
)

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
#: A variable's ``path``: ``payload`` and at least one field.
PATH = re.compile(r"payload(?:\.[A-Za-z0-9_-]+){1,16}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_VARIABLES = 50
MAX_TEXT_VALUE = 10_000
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


def placeholders(*texts: str) -> list[str]:
    """Names used as ``{{name}}`` in ``texts``, in order of first use, without duplicates."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in PLACEHOLDER.finditer(text):
            seen.setdefault(match.group(1), None)
    return list(seen)


def check_json(value: object, *, field: str, depth: int = 0) -> None:
    """Check that ``value`` can be stored as JSON on every database.

    Raises:
        InvalidInputError: a non-finite number, a NUL character or lone surrogate in a
            string or key, or nesting deeper than 64 levels (``field`` names the input).
    """
    if depth > 64:
        raise InvalidInputError(f"{field} is nested too deeply", field=field)
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{field} contains a non-finite number", field=field)
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInputError(f"{field} contains a NUL character", field=field)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(f"{field} contains a lone surrogate", field=field) from None
    if isinstance(value, dict):
        for key, item in value.items():
            check_json(key, field=field, depth=depth + 1)
            check_json(item, field=field, depth=depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            check_json(item, field=field, depth=depth + 1)


def coerce_value(variable: RoutineVariable, value: object, *, field: str) -> Any:
    """Check ``value`` against the variable's type and return it in that type.

    Numbers accept ints, finite floats and numeric strings; booleans accept ``true``/``false``
    (also ``yes``/``no``, ``1``/``0``, ``on``/``off``); selects must be one of the options.

    Raises:
        InvalidInputError: the value does not fit the type (``field`` names it).
    """
    kind = variable.type
    if kind is VariableType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise InvalidInputError(f"{field} must be a boolean", field=field)
    if kind is VariableType.NUMBER:
        number: object = value
        if isinstance(value, str):
            try:
                number = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                raise InvalidInputError(f"{field} must be a number", field=field) from None
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise InvalidInputError(f"{field} must be a number", field=field)
        if isinstance(number, float) and not math.isfinite(number):
            raise InvalidInputError(f"{field} must be a finite number", field=field)
        return number
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string", field=field)
    if len(value) > MAX_TEXT_VALUE:
        raise InvalidInputError(f"{field} is longer than {MAX_TEXT_VALUE} characters", field=field)
    if kind is VariableType.SELECT and value not in variable.options:
        allowed = ", ".join(variable.options)
        raise InvalidInputError(f"{field} must be one of: {allowed}", field=field)
    return value


def _declaration(raw: object, index: int) -> RoutineVariable:
    where = f"variables[{index}]"
    if isinstance(raw, RoutineVariable):
        raw = {
            "name": raw.name,
            "type": raw.type.value,
            "default": raw.default,
            "required": raw.required,
            "options": list(raw.options),
            "path": raw.path,
        }
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where} must be an object", field=where)
    unknown = set(raw) - {"name", "type", "default", "required", "options", "path"}
    if unknown:
        raise InvalidInputError(f"{where} has unknown keys: {sorted(unknown)}", field=where)
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInputError(
            f"{where}.name must be an identifier (letters, digits, _; at most 64)",
            field=f"{where}.name",
        )
    if name in BUILTIN_VARIABLES:
        raise InvalidInputError(
            f"{where}.name {name!r} is a built-in variable", field=f"{where}.name"
        )
    try:
        kind = VariableType(raw.get("type", "text"))
    except ValueError:
        choices = ", ".join(item.value for item in VariableType)
        raise InvalidInputError(
            f"{where}.type must be one of: {choices}", field=f"{where}.type"
        ) from None
    required = raw.get("required", False)
    if not isinstance(required, bool):
        raise InvalidInputError(f"{where}.required must be a boolean", field=f"{where}.required")
    options_raw = raw.get("options") or []
    if not isinstance(options_raw, list | tuple) or not all(
        isinstance(item, str) and item for item in options_raw
    ):
        raise InvalidInputError(
            f"{where}.options must be a list of strings", field=f"{where}.options"
        )
    if kind is VariableType.SELECT and not options_raw:
        raise InvalidInputError(
            f"{where}.options must list the choices of a select", field=f"{where}.options"
        )
    path = raw.get("path")
    if path is not None and (not isinstance(path, str) or not PATH.fullmatch(path)):
        raise InvalidInputError(
            f"{where}.path must read payload.<field>[.<field>...] (e.g. payload.issue.title)",
            field=f"{where}.path",
        )
    variable = RoutineVariable(
        name=name, type=kind, required=required, options=tuple(options_raw), path=path
    )
    default = raw.get("default")
    if default is None:
        return variable
    value = coerce_value(variable, default, field=f"{where}.default")
    return RoutineVariable(
        name=name,
        type=kind,
        default=value,
        required=required,
        options=variable.options,
        path=path,
    )


def declare_variables(
    declared: Iterable[object], template: TaskTemplate | None
) -> tuple[RoutineVariable, ...]:
    """Validate declarations and declare every ``{{name}}`` the template uses but lacks.

    An auto-declared variable is ``text``, with no default, not required (specification:
    "Adding {{new_var}} to a template auto-creates the variable declaration on save").

    Raises:
        InvalidInputError: a malformed or duplicate declaration, a built-in redeclared, or
            more than 50 variables.
    """
    variables: list[RoutineVariable] = []
    names: set[str] = set()
    for index, raw in enumerate(declared):
        variable = _declaration(raw, index)
        if variable.name in names:
            field = f"variables[{index}].name"
            raise InvalidInputError(f"variable {variable.name!r} is declared twice", field=field)
        names.add(variable.name)
        variables.append(variable)
    if template is not None:
        for name in placeholders(template.title, template.description):
            if "." in name:
                continue  # a payload path, not a variable
            if name not in names and name not in BUILTIN_VARIABLES:
                names.add(name)
                variables.append(RoutineVariable(name=name))
    if len(variables) > MAX_VARIABLES:
        raise InvalidInputError(
            f"a routine may declare at most {MAX_VARIABLES} variables", field="variables"
        )
    return tuple(variables)


def builtin_values(instant: datetime, timezone: str) -> dict[str, str]:
    """``date`` (``YYYY-MM-DD``) and ``datetime`` (ISO-8601 with offset) of ``instant``.

    Both are wall-clock values in ``timezone`` (an IANA name, ``""`` = UTC).
    """
    local = instant.astimezone(ZoneInfo(timezone or "UTC"))
    return {"date": local.date().isoformat(), "datetime": local.isoformat(timespec="seconds")}


def lookup(values: Mapping[str, object], path: str) -> tuple[bool, object]:
    """Walk a dotted ``path`` through ``values`` (mappings by key, lists by index).

    Returns:
        ``(found, value)``; ``(False, None)`` when any step is missing.
    """
    current: object = values
    for step in path.split("."):
        if isinstance(current, Mapping) and step in current:
            current = current[step]
        elif isinstance(current, list) and step.isdigit() and int(step) < len(current):
            current = current[int(step)]
        else:
            return False, None
    return True, current


def resolve_variables(
    variables: Sequence[RoutineVariable],
    provided: Mapping[str, object],
    builtins: Mapping[str, str],
    *,
    payload: Mapping[str, object] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """Resolve the values of one fire: built-ins → declared defaults → provided values.

    Provided values of declared variables are checked and converted by type; provided keys
    that are not declared are passed through unchanged (a webhook's payload stays visible
    to the agent). Built-ins cannot be overridden. With a webhook's ``payload``, a declared
    variable with a ``path`` takes the value found there (checked by type; a missing path
    adds to ``warnings`` and leaves the variable as it was).

    Raises:
        InvalidInputError: a provided value has the wrong type, or a required variable has
            neither a default nor a value (field ``variables.<name>``).
    """
    values: dict[str, Any] = dict(builtins)
    for variable in variables:
        if variable.default is not None:
            values[variable.name] = variable.default
    declared = {variable.name: variable for variable in variables}
    for name, value in provided.items():
        if name in BUILTIN_VARIABLES:
            continue
        found = declared.get(name)
        if found is None:
            values[name] = value
        elif value is not None:
            values[name] = coerce_value(found, value, field=f"variables.{name}")
    if payload is not None:
        values["payload"] = dict(payload)
        for variable in variables:
            if variable.path is None:
                continue
            found_it, value = lookup(values, variable.path)
            if found_it and value is not None:
                values[variable.name] = coerce_value(
                    variable, value, field=f"variables.{variable.name}"
                )
            elif warnings is not None:
                warnings.append(f"{variable.path} is missing from the delivery")
    for variable in variables:
        if variable.required and values.get(variable.name) is None:
            raise InvalidInputError(
                f"variable {variable.name!r} is required", field=f"variables.{variable.name}"
            )
    return values


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)


def render(text: str, values: Mapping[str, object], warnings: list[str] | None = None) -> str:
    """Replace each ``{{name}}`` with its value; names without a value are left as written.

    A dotted ``{{payload.a.b}}`` reads a path; one that is missing renders empty and adds
    to ``warnings``.
    """

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if "." not in name:
            return _text(values[name]) if name in values else match.group(0)
        found, value = lookup(values, name)
        if not found:
            if warnings is not None and f"{name} is missing from the delivery" not in warnings:
                warnings.append(f"{name} is missing from the delivery")
            return ""
        return _text(value)

    return PLACEHOLDER.sub(substitute, text)


#: Longest rendered title (the tasks column) and description, in characters. Variables can
#: come from a webhook body (up to 256 KiB) and repeat, so the result is capped, not trusted.
MAX_RENDERED_TITLE = 500
MAX_RENDERED_DESCRIPTION = 64 * 1024
_CUT_MARK = "… [truncated]"


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_CUT_MARK)] + _CUT_MARK


def render_template(
    template: TaskTemplate, values: Mapping[str, object], warnings: list[str] | None = None
) -> TaskTemplate:
    """The template with title and description rendered.

    The title is capped at :data:`MAX_RENDERED_TITLE` characters and the description at
    :data:`MAX_RENDERED_DESCRIPTION`; a longer result ends with ``… [truncated]``. Payload
    paths the values lack add to ``warnings``.
    """
    return TaskTemplate(
        title=_capped(render(template.title, values, warnings), MAX_RENDERED_TITLE),
        description=_capped(
            render(template.description, values, warnings), MAX_RENDERED_DESCRIPTION
        ),
    )


def dispatch_fingerprint(rendered: TaskTemplate | None, assignee_agent_id: str | None) -> str:
    """SHA-256 hex of the resolved template and the assignee (the concurrency-policy key).

    A lightweight routine (no template) has one fingerprint per assignee.
    """
    material = json.dumps(
        {
            "title": rendered.title if rendered else None,
            "description": rendered.description if rendered else None,
            "assignee": assignee_agent_id,
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()
