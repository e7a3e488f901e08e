"""Workspaces (admin-managed), with their activity log and inbox."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS, Cursor, Limit, checked_cursor
from office_scheduler.api.schemas import WorkspaceCreate, WorkspacePatch
from office_scheduler.api.views import ActivityOut, InboxOut, ListOut, WorkspaceOut
from office_scheduler.domain.status import InboxStatus

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


@router.get("/workspaces/{workspace_id}/activity")
async def list_activity(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    kind: Annotated[str | None, Query(max_length=200)] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ListOut[ActivityOut]:
    """The workspace's activity log, newest first."""
    await load_workspace(service, principal, workspace_id)
    page = await asyncio.to_thread(
        service.store.runlog.list_activity,
        workspace_id,
        kind=kind,
        limit=limit,
        cursor=checked_cursor(cursor, (datetime, int)),
    )
    return ListOut(
        items=[ActivityOut.model_validate(entry) for entry in page.items],
        next_cursor=page.next_cursor,
    )


@router.get("/workspaces/{workspace_id}/inbox")
async def list_inbox(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    status: Annotated[InboxStatus | None, Query()] = None,
) -> ListOut[InboxOut]:
    """The workspace's inbox items, newest first, optionally of one status."""
    await load_workspace(service, principal, workspace_id)
    items = await asyncio.to_thread(service.store.runlog.list_inbox, workspace_id, status=status)
    return ListOut(items=[InboxOut.model_validate(item) for item in items])
