"""Wakeup requests and runs: listings, details, and the explicit queue-run."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path, Query

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_agent,
    load_run,
    load_task,
    load_wakeup,
    scope_filter,
)
from office_scheduler.api.routes.common import ERRORS, Cursor, Limit
from office_scheduler.api.schemas import QueueRunIn
from office_scheduler.api.views import (
    IntakeOut,
    ListOut,
    RunDetailOut,
    RunEventOut,
    RunOut,
    WakeupOut,
    run_detail,
)
from office_scheduler.domain.status import RunStatus, WakeSource, WakeupStatus
from office_scheduler.store.listing import MAX_ID

router = APIRouter(tags=["runs"], responses=ERRORS)

IdFilter = Annotated[str | None, Query(min_length=1, max_length=100)]
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get("/wakeups")
async def list_wakeups(
    service: ServiceDep,
    principal: PrincipalDep,
    workspace_id: IdFilter = None,
    agent_id: IdFilter = None,
    status: Annotated[WakeupStatus | None, Query()] = None,
    run_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> ListOut[WakeupOut]:
    """Wakeup requests, newest first (a run token sees only its workspace's)."""
    page = await asyncio.to_thread(
        service.store.listing.list_wakeups,
        workspace_id=scope_filter(principal, workspace_id),
        agent_id=agent_id,
        status=status,
        run_id=run_id,
        limit=limit,
        cursor=cursor,
    )
    return ListOut(
        items=[WakeupOut.model_validate(request) for request in page.items],
        next_cursor=page.next_cursor,
    )


@router.get("/wakeups/{wakeup_id}")
async def get_wakeup(wakeup_id: RowId, service: ServiceDep, principal: PrincipalDep) -> WakeupOut:
    """One wakeup request."""
    return WakeupOut.model_validate(await load_wakeup(service, principal, wakeup_id))


@router.get("/runs")
async def list_runs(
    service: ServiceDep,
    principal: PrincipalDep,
    workspace_id: IdFilter = None,
    agent_id: IdFilter = None,
    task_id: IdFilter = None,
    status: Annotated[RunStatus | None, Query()] = None,
    source: Annotated[WakeSource | None, Query()] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> ListOut[RunOut]:
    """Runs, newest first (a run token sees only its workspace's)."""
    page = await asyncio.to_thread(
        service.store.listing.list_runs,
        workspace_id=scope_filter(principal, workspace_id),
        agent_id=agent_id,
        task_id=task_id,
        status=status,
        source=source,
        limit=limit,
        cursor=cursor,
    )
    return ListOut(
        items=[RunOut.model_validate(run) for run in page.items], next_cursor=page.next_cursor
    )


@router.get("/runs/{run_id}")
async def get_run(
    run_id: RowId,
    service: ServiceDep,
    principal: PrincipalDep,
    events_after: Annotated[int, Query(ge=0, le=MAX_ID, description="event id")] = 0,
    events_limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    wakes_limit: Limit = 20,
    wakes_cursor: Cursor = None,
) -> RunDetailOut:
    """One run with its prompt, its event log and one page of its merged wakes.

    Events with an id above ``events_after``; wakes newest first, ``wakes_limit`` per
    page from ``wakes_cursor`` (the ``wakes_next_cursor`` of the previous page).
    """
    run = await load_run(service, principal, run_id)
    events = await asyncio.to_thread(
        service.store.runlog.list_run_events, run_id, after_id=events_after, limit=events_limit
    )
    wakes = await asyncio.to_thread(
        service.store.listing.list_wakeups, run_id=run_id, limit=wakes_limit, cursor=wakes_cursor
    )
    return run_detail(run, [RunEventOut.model_validate(event) for event in events], wakes)


@router.post("/runs", status_code=202)
async def queue_run(body: QueueRunIn, service: ServiceDep, principal: PrincipalDep) -> IntakeOut:
    """Queue a run for any task, ordinary kanban tasks included (source ``queue_run``).

    The run goes to ``agent_id``, by default the task's assignee; it has no coalescing hold.
    """
    await load_task(service, principal, body.task_id)
    if body.agent_id is not None:
        await load_agent(service, principal, body.agent_id)
    result = await service.queue_run(
        body.task_id, agent_id=body.agent_id, idempotency_key=body.idempotency_key
    )
    return IntakeOut.of(result)
