"""Workspaces (admin-managed), with their activity log (the inbox is in ``inbox.py``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS, MAX_INT, Cursor, Limit, checked_cursor
from office_scheduler.api.schemas import WorkspaceCreate, WorkspacePatch
from office_scheduler.api.views import ActivityOut, ListOut, WorkspaceOut
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.store.activity import ActivityFilter

router = APIRouter(tags=["workspaces"], responses=ERRORS)


@router.post("/workspaces", status_code=201)
async def create_workspace(
    body: WorkspaceCreate, service: ServiceDep, principal: PrincipalDep
) -> WorkspaceOut:
    """Create a workspace with its workflows and settings (admin only)."""
    require_admin(principal)
    workspace = await asyncio.to_thread(
        service.store.office.create_workspace,
        name=body.name,
        description=body.description,
        settings=body.settings.to_settings(),
        now=service.clock.now(),
    )
    return WorkspaceOut.of(workspace)


@router.get("/workspaces")
async def list_workspaces(service: ServiceDep, principal: PrincipalDep) -> ListOut[WorkspaceOut]:
    """List workspaces by name (a run token sees only its own)."""
    if principal.is_admin:
        found = await asyncio.to_thread(service.store.office.list_workspaces)
    else:
        assert principal.workspace_id is not None
        found = [await load_workspace(service, principal, principal.workspace_id)]
    return ListOut(items=[WorkspaceOut.of(workspace) for workspace in found])


@router.get("/workspaces/{workspace_id}")
async def get_workspace(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> WorkspaceOut:
    """One workspace."""
    return WorkspaceOut.of(await load_workspace(service, principal, workspace_id))


@router.patch("/workspaces/{workspace_id}")
async def update_workspace(
    workspace_id: str, body: WorkspacePatch, service: ServiceDep, principal: PrincipalDep
) -> WorkspaceOut:
    """Change a workspace's description and/or settings (admin only).

    Settings fields left out keep their value; ``executors``, when sent, replaces the whole
    map, but an executor sent without ``env`` keeps its current environment.
    """
    require_admin(principal)
    sent = body.changes()
    current = await load_workspace(service, principal, workspace_id)
    settings = None if body.settings is None else body.settings.apply(current.settings)
    workspace = await asyncio.to_thread(
        service.store.office.update_workspace,
        workspace_id,
        now=service.clock.now(),
        description=sent.get("description"),
        settings=settings,
    )
    return WorkspaceOut.of(workspace)


ActorFilter = Annotated[
    str | None, Query(min_length=1, max_length=200, description="`system`, `user`, `agent:<id>`")
]
IdFilter = Annotated[str | None, Query(min_length=1, max_length=100)]
Instant = Annotated[datetime | None, Query(description="ISO-8601; UTC when no zone is given")]


def _utc(value: datetime | None, field: str) -> datetime | None:
    """An aware UTC instant (naive input is taken as UTC).

    Raises:
        InvalidInputError: an instant outside what the database can store (field ``field``).
    """
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError(f"{field} is out of range", field=field) from None


@router.get("/workspaces/{workspace_id}/activity")
async def list_activity(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    kind: Annotated[str | None, Query(max_length=200, description="the action")] = None,
    actor: ActorFilter = None,
    agent_id: IdFilter = None,
    task_id: IdFilter = None,
    run_id: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None,
    since: Instant = None,
    until: Instant = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ListOut[ActivityOut]:
    """The workspace's activity log, newest first.

    Filters combine (all must hold): ``kind`` (the action), ``actor``, the target
    (``agent_id``, ``task_id``, ``run_id``) and the time range ``since <= at < until``.
    """
    await load_workspace(service, principal, workspace_id)
    where = ActivityFilter(
        actor=actor,
        kind=kind,
        agent_id=agent_id,
        task_id=task_id,
        run_id=run_id,
        since=_utc(since, "since"),
        until=_utc(until, "until"),
    )
    page = await asyncio.to_thread(
        service.store.runlog.list_activity,
        workspace_id,
        where=where,
        limit=limit,
        cursor=checked_cursor(cursor, (datetime, int)),
    )
    return ListOut(
        items=[ActivityOut.model_validate(entry) for entry in page.items],
        next_cursor=page.next_cursor,
    )
