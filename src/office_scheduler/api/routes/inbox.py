"""The inbox: what people must look at (approvals, budget alerts, agent errors, reviews).

Anyone of the workspace may read it; resolving and dismissing are for people (admin
tokens; a run token gets 403). Both are idempotent, and final: resolving a dismissed
item, or dismissing a resolved one, answers 409 and changes nothing.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS, MAX_INT, Cursor, Limit, checked_cursor
from office_scheduler.api.views import InboxOut, ListOut
from office_scheduler.auth import Principal
from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import InboxItem
from office_scheduler.domain.status import InboxKind, InboxStatus
from office_scheduler.service import Service

router = APIRouter(tags=["inbox"], responses=ERRORS)

ItemId = Annotated[int, Path(ge=1, le=MAX_INT)]


async def _load_item(service: Service, principal: Principal, item_id: int) -> InboxItem:
    item = await asyncio.to_thread(service.store.runlog.get_inbox_item, item_id)
    if not principal.is_admin and principal.workspace_id != item.workspace_id:
        raise NotFoundError(f"inbox item {item_id} not found", field="item_id")
    return item


@router.get("/workspaces/{workspace_id}/inbox")
async def list_inbox(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    status: Annotated[InboxStatus | None, Query()] = None,
    kind: Annotated[InboxKind | None, Query()] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ListOut[InboxOut]:
    """The workspace's inbox items, newest first, optionally of one status and kind."""
    await load_workspace(service, principal, workspace_id)
    page = await asyncio.to_thread(
        service.store.runlog.inbox_page,
        workspace_id,
        status=status,
        kind=kind,
        limit=limit,
        cursor=checked_cursor(cursor, (datetime, int)),
    )
    return ListOut(
        items=[InboxOut.model_validate(item) for item in page.items],
        next_cursor=page.next_cursor,
    )


@router.get("/inbox/{item_id}")
async def get_inbox_item(item_id: ItemId, service: ServiceDep, principal: PrincipalDep) -> InboxOut:
    """One inbox item."""
    return InboxOut.model_validate(await _load_item(service, principal, item_id))


@router.post("/inbox/{item_id}/resolve")
async def resolve_inbox_item(
    item_id: ItemId, service: ServiceDep, principal: PrincipalDep
) -> InboxOut:
    """Mark an item resolved (admin only; idempotent; 409 when it was dismissed)."""
    await _load_item(service, principal, item_id)
    require_admin(principal)
    item = await asyncio.to_thread(
        service.store.runlog.resolve_inbox_item, item_id, now=service.clock.now()
    )
    return InboxOut.model_validate(item)


@router.post("/inbox/{item_id}/dismiss")
async def dismiss_inbox_item(
    item_id: ItemId, service: ServiceDep, principal: PrincipalDep
) -> InboxOut:
    """Mark an item dismissed (admin only; idempotent; 409 when it was resolved)."""
    await _load_item(service, principal, item_id)
    require_admin(principal)
    item = await asyncio.to_thread(
        service.store.runlog.dismiss_inbox_item, item_id, now=service.clock.now()
    )
    return InboxOut.model_validate(item)
