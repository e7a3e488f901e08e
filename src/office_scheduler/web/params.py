"""Reading the dashboard's query strings and forms: every bad value is an error naming it.

Filters arrive as plain strings (an empty one means "any"); these helpers turn them into
typed values or raise :class:`InvalidInputError`, which the page route shows as a message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeVar

from fastapi import Request

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import Agent, Workspace
from office_scheduler.service import Service

E = TypeVar("E", bound=StrEnum)

#: Cookie remembering the workspace the dashboard shows (not a secret).
WORKSPACE_COOKIE = "office_workspace"
MAX_TEXT = 10_000


def text(value: str | None, *, field: str, required: bool = False, limit: int = MAX_TEXT) -> str:
    """A stripped text value (``""`` when absent and not required).

    Raises:
        InvalidInputError: missing while required, too long, or containing NUL.
    """
    cleaned = (value or "").strip()
    if required and not cleaned:
        raise InvalidInputError(f"{field} is required", field=field)
    if len(cleaned) > limit:
        raise InvalidInputError(f"{field} must be at most {limit} characters", field=field)
    if "\x00" in cleaned:
        raise InvalidInputError(f"{field} must not contain NUL characters", field=field)
    return cleaned


def choice(enum: type[E], value: str | None, *, field: str) -> E | None:
    """The member of ``enum`` named by ``value``; ``None`` when empty.

    Raises:
        InvalidInputError: not one of the members (the message lists them).
    """
    cleaned = text(value, field=field, limit=100)
    if not cleaned:
        return None
    try:
        return enum(cleaned)
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise InvalidInputError(f"{field} must be one of: {allowed}", field=field) from None


def integer(value: str | None, *, field: str, low: int, high: int) -> int | None:
    """An integer in ``low..high``; ``None`` when empty.

    Raises:
        InvalidInputError: not a whole number in range.
    """
    cleaned = text(value, field=field, limit=30)
    if not cleaned:
        return None
    try:
        number = int(cleaned)
    except ValueError:
        raise InvalidInputError(f"{field} must be a whole number", field=field) from None
    if not low <= number <= high:
        raise InvalidInputError(f"{field} must be in {low}..{high}", field=field)
    return number


def instant(value: str | None, *, field: str) -> datetime | None:
    """An ISO-8601 date or date-time (no offset means UTC) as an aware UTC instant.

    Raises:
        InvalidInputError: not ISO-8601.
    """
    cleaned = text(value, field=field, limit=40)
    if not cleaned:
        return None
    try:
        parsed = datetime.fromisoformat(cleaned)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidInputError(
            f"{field} must be an ISO-8601 date or time, e.g. 2026-03-09T06:30", field=field
        ) from None


@dataclass(frozen=True, slots=True)
class Scope:
    """The workspace a page shows, every workspace (for the switcher) and its agents."""

    workspace: Workspace
    workspaces: list[Workspace]
    agents: list[Agent]

    def agent_names(self) -> dict[str, str]:
        """Agent id → name."""
        return {agent.id: agent.name for agent in self.agents}


async def scope_of(request: Request, service: Service) -> Scope:
    """The workspace chosen by ``?ws=``, the workspace cookie, or the first one.

    Raises:
        InvalidInputError: no workspace exists yet (import an office first).
    """
    workspaces = await asyncio.to_thread(service.store.office.list_workspaces)
    if not workspaces:
        raise InvalidInputError("no workspace yet: import an office with `office import DIR`")
    wanted = request.query_params.get("ws") or request.cookies.get(WORKSPACE_COOKIE)
    workspace = next((ws for ws in workspaces if ws.id == wanted), workspaces[0])
    agents = await asyncio.to_thread(service.store.office.list_agents, workspace.id)
    return Scope(workspace=workspace, workspaces=workspaces, agents=agents)
