"""Short ids: a unique prefix of 6 or more hex digits works wherever a full id does.

The dashboard shows ids cut to 8 characters; agents copy them. Before a request leaves, a
path segment that follows a collection name (``/tasks/3f2a9c1d``) and an id-valued query
or body field (``task_id``, ``agent_id``, ...) that is a prefix is expanded through
``GET /api/v1/ids/{kind}/{prefix}``. A prefix that names no record is sent as it is (the
server's "not found" follows); one that names several is refused (exit 2) with the matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from office_scheduler.cli.state import CliError

#: A prefix of an entity id (full ids are 32 lowercase hex digits).
PREFIX = re.compile(r"[0-9a-f]{6,31}")
#: Path collections with string ids (the kinds ``GET /ids/{kind}/{prefix}`` knows).
PATH_KINDS = frozenset(
    {"workspaces", "projects", "agents", "tasks", "comments", "approvals", "routines", "inbox"}
)
#: Query and body fields that hold an id, and the kind of that id.
FIELD_KINDS = {
    "workspace_id": "workspaces",
    "project_id": "projects",
    "agent_id": "agents",
    "assignee_agent_id": "agents",
    "reports_to": "agents",
    "task_id": "tasks",
    "parent_id": "tasks",
    "approval_id": "approvals",
    "routine_id": "routines",
}

#: ``lookup(kind, prefix)`` → the ids of ``kind`` starting with ``prefix``.
Lookup = Callable[[str, str], list[str]]


def expand(kind: str, value: str, lookup: Lookup) -> str:
    """The full id ``value`` abbreviates, or ``value`` itself when it is no prefix.

    Raises:
        CliError: several ids start with ``value`` (exit 2; the message lists them).
    """
    if not PREFIX.fullmatch(value):
        return value
    found = lookup(kind, value)
    if len(found) > 1:
        shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
        raise CliError(
            f"id prefix {value!r} is ambiguous: {len(found)} {kind} match ({shown}); "
            "give more characters",
            2,
        )
    return found[0] if found else value


def expand_path(path: str, lookup: Lookup) -> str:
    """``path`` with each id prefix after a collection segment expanded."""
    parts = path.split("/")
    for index in range(1, len(parts)):
        if parts[index - 1] in PATH_KINDS:
            parts[index] = expand(parts[index - 1], parts[index], lookup)
    return "/".join(parts)


def expand_fields(values: Mapping[str, Any] | None, lookup: Lookup) -> dict[str, Any] | None:
    """A copy of query or body ``values`` with id prefixes in id fields expanded."""
    if values is None:
        return None
    return {
        key: (
            expand(FIELD_KINDS[key], value, lookup)
            if key in FIELD_KINDS and isinstance(value, str)
            else value
        )
        for key, value in values.items()
    }


def unique_match(records: list[Mapping[str, Any]], value: str, what: str) -> str | None:
    """The id of the one record whose id starts with ``value`` (a prefix), else ``None``.

    Raises:
        CliError: several do (exit 2).
    """
    if not PREFIX.fullmatch(value):
        return None
    found = sorted(str(r["id"]) for r in records if str(r.get("id", "")).startswith(value))
    if len(found) > 1:
        raise CliError(
            f"id prefix {value!r} is ambiguous: {len(found)} {what} match ({', '.join(found)})", 2
        )
    return found[0] if found else None
