"""Inbox (approve, reject with a note, resolve, dismiss) and the activity log (filters).

Decisions go through the approval service as the API's approve/reject endpoints do: a
task review moves its task, a generic approval wakes the agent that asked.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Form, Request
from starlette.responses import Response

from office_scheduler.auth import Principal
from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.status import InboxStatus
from office_scheduler.store.activity import ActivityFilter
from office_scheduler.store.listing import MAX_ID
from office_scheduler.web.pages.common import PAGE_SIZE, back, page_router, query_without, show
from office_scheduler.web.params import choice, instant, integer, scope_of, text
from office_scheduler.web.session import SameOriginDep, SessionDep, service_of

router = page_router()


def _decider(principal: Principal) -> str:
    """Who decides, as the API records it (``user:<token name>``)."""
    return f"user:{principal.token.name}"


@router.get("/inbox")
async def inbox_page(
    request: Request, _: SessionDep, status: str | None = "open", cursor: str | None = None
) -> Response:
    """Inbox items, newest first (open ones by default)."""
    service = service_of(request)
    scope = await scope_of(request, service)
    wanted = choice(InboxStatus, status, field="status")
    page = await asyncio.to_thread(
        service.store.runlog.inbox_page,
        scope.workspace.id,
        status=wanted,
        limit=PAGE_SIZE,
        cursor=text(cursor, field="cursor", limit=200) or None,
    )
    approval_ids = [item.approval_id for item in page.items if item.approval_id]
    approvals = await asyncio.gather(
        *(asyncio.to_thread(service.store.approvals.get, aid) for aid in approval_ids)
    )
    return show(
        request,
        "inbox.html",
        scope,
        section="inbox",
        items=page.items,
        approvals={approval.id: approval for approval in approvals},
        status=wanted.value if wanted else "",
        next_cursor=page.next_cursor,
        base_query=query_without(request, "cursor", "notice", "error"),
    )


def _item_id(value: int) -> int:
    if not 1 <= value <= MAX_ID:
        raise NotFoundError(f"inbox item {value} not found", field="item_id")
    return value


@router.post("/inbox/{item_id}/resolve", dependencies=[SameOriginDep])
async def resolve(request: Request, item_id: int, _: SessionDep) -> Response:
    """Mark an item resolved."""
    service = service_of(request)
    await asyncio.to_thread(
        service.store.runlog.resolve_inbox_item, _item_id(item_id), now=service.clock.now()
    )
    return back("/inbox", notice=f"Inbox item {item_id} resolved")


@router.post("/inbox/{item_id}/dismiss", dependencies=[SameOriginDep])
async def dismiss(request: Request, item_id: int, _: SessionDep) -> Response:
    """Dismiss an item."""
    service = service_of(request)
    await asyncio.to_thread(
        service.store.runlog.dismiss_inbox_item, _item_id(item_id), now=service.clock.now()
    )
    return back("/inbox", notice=f"Inbox item {item_id} dismissed")


@router.post("/inbox/{item_id}/release", dependencies=[SameOriginDep])
async def release(request: Request, item_id: int, _: SessionDep) -> Response:
    """Release the wakes a ``wake.held`` item reports (each once) and resolve it."""
    service = service_of(request)
    _item, done = await service.releases.release_item(_item_id(item_id))
    count = sum(1 for item in done if item.result is not None)
    return back("/inbox", notice=f"Inbox item {item_id}: {count} held wake(s) released")


@router.post("/approvals/{approval_id}/approve", dependencies=[SameOriginDep])
async def approve(
    request: Request,
    approval_id: str,
    principal: SessionDep,
    note: Annotated[str, Form(max_length=5000)] = "",
) -> Response:
    """Approve (a task review moves its task to ``DONE``)."""
    service = service_of(request)
    approval = await service.approvals.approve(
        approval_id, decided_by=_decider(principal), decision_note=text(note, field="note") or None
    )
    return back("/inbox", notice=f"Approved “{approval.title}”")


@router.post("/approvals/{approval_id}/reject", dependencies=[SameOriginDep])
async def reject(
    request: Request,
    approval_id: str,
    principal: SessionDep,
    note: Annotated[str, Form(max_length=5000)] = "",
) -> Response:
    """Reject with a note (required: the agent reads it)."""
    service = service_of(request)
    reason = text(note, field="note", required=True)
    approval = await service.approvals.reject(
        approval_id, decided_by=_decider(principal), decision_note=reason
    )
    return back("/inbox", notice=f"Rejected “{approval.title}”")


@router.get("/activity")
async def activity_page(
    request: Request,
    _: SessionDep,
    actor: str | None = None,
    kind: str | None = None,
    agent: str | None = None,
    task: str | None = None,
    run: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
) -> Response:
    """The activity log, newest first, with filters."""
    service = service_of(request)
    scope = await scope_of(request, service)
    where = ActivityFilter(
        actor=text(actor, field="actor", limit=100) or None,
        kind=text(kind, field="kind", limit=100) or None,
        agent_id=text(agent, field="agent", limit=100) or None,
        task_id=text(task, field="task", limit=100) or None,
        run_id=integer(run, field="run", low=1, high=MAX_ID),
        since=instant(since, field="since"),
        until=instant(until, field="until"),
    )
    page = await asyncio.to_thread(
        service.store.runlog.list_activity,
        scope.workspace.id,
        limit=PAGE_SIZE,
        cursor=text(cursor, field="cursor", limit=200) or None,
        where=where,
    )
    filters = {
        "actor": actor or "",
        "kind": kind or "",
        "agent": agent or "",
        "task": task or "",
        "run": run or "",
        "since": since or "",
        "until": until or "",
    }
    return show(
        request,
        "activity.html",
        scope,
        section="activity",
        entries=page.items,
        next_cursor=page.next_cursor,
        base_query=query_without(request, "cursor", "notice", "error"),
        filters=filters,
    )
