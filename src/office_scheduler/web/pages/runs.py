"""Runs (filterable, paginated), run detail, cancel; wakeup requests."""

from __future__ import annotations

import asyncio

from fastapi import Request
from starlette.responses import Response

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.status import RunReason, RunStatus, WakeupStatus
from office_scheduler.error_text import first_error_line
from office_scheduler.store.listing import MAX_ID
from office_scheduler.web.health import run_error_family
from office_scheduler.web.pages.common import PAGE_SIZE, back, page_router, query_without, show
from office_scheduler.web.params import choice, instant, integer, scope_of, text
from office_scheduler.web.session import SameOriginDep, SessionDep, service_of
from office_scheduler.web.sources import dashboard_store

router = page_router()

#: Run events shown on a run's page (its whole log for any ordinary run).
EVENTS_SHOWN = 2000


def _agent_filter(value: str | None, names: dict[str, str]) -> str | None:
    """An agent id from the filter (an id or a name); unknown ones are an error."""
    wanted = text(value, field="agent", limit=100)
    if not wanted:
        return None
    if wanted in names:
        return wanted
    by_name = {name: agent_id for agent_id, name in names.items()}
    if wanted in by_name:
        return by_name[wanted]
    raise NotFoundError(f"agent {wanted!r} is not an agent of this workspace", field="agent")


@router.get("/runs")
async def runs_page(
    request: Request,
    _: SessionDep,
    agent: str | None = None,
    status: str | None = None,
    reason: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
) -> Response:
    """Runs of the workspace, newest first, filtered by agent, status, reason and time."""
    service = service_of(request)
    scope = await scope_of(request, service)
    page = await asyncio.to_thread(
        dashboard_store(service).search_runs,
        scope.workspace.id,
        agent_id=_agent_filter(agent, scope.agent_names()),
        status=choice(RunStatus, status, field="status"),
        reason=choice(RunReason, reason, field="reason"),
        since=instant(since, field="since"),
        until=instant(until, field="until"),
        limit=PAGE_SIZE,
        cursor=text(cursor, field="cursor", limit=200) or None,
    )
    return show(
        request,
        "runs.html",
        scope,
        section="runs",
        runs=page.items,
        next_cursor=page.next_cursor,
        base_query=query_without(request, "cursor", "notice", "error"),
        filters={
            "agent": agent or "",
            "status": status or "",
            "reason": reason or "",
            "since": since or "",
            "until": until or "",
        },
        statuses=[s.value for s in RunStatus],
        reasons=[r.value for r in RunReason],
    )


@router.get("/runs/{run_id}")
async def run_detail(
    request: Request, run_id: int, _: SessionDep, cursor: str | None = None
) -> Response:
    """A run: merged wakes, every pipeline decision, prompt, output, result, cost.

    The merged wakes come a page at a time, newest first; ``cursor`` pages on.
    """
    service = service_of(request)
    scope = await scope_of(request, service)
    if not 1 <= run_id <= MAX_ID:
        raise NotFoundError(f"run {run_id} not found", field="run_id")
    run = await asyncio.to_thread(service.store.queue.get_run, run_id)
    if run.workspace_id != scope.workspace.id:
        raise NotFoundError(f"run {run_id} not found in this workspace", field="run_id")
    events, wakeups, cost = await asyncio.gather(
        asyncio.to_thread(service.store.runlog.list_run_events, run_id, limit=EVENTS_SHOWN),
        asyncio.to_thread(
            service.store.listing.list_wakeups,
            run_id=run_id,
            limit=PAGE_SIZE,
            cursor=text(cursor, field="cursor", limit=200) or None,
        ),
        asyncio.to_thread(dashboard_store(service).run_cost_subcents, run_id),
    )
    task = None
    if run.task_id is not None:
        task = await asyncio.to_thread(service.store.office.find_task, run.task_id)
    return show(
        request,
        "run.html",
        scope,
        section="runs",
        run=run,
        task=task,
        events=events,
        wakeups=wakeups.items,
        wakeups_next_cursor=wakeups.next_cursor,
        base_query=query_without(request, "cursor", "notice", "error"),
        cost=cost,
        cancellable=run.status.value in ("queued", "scheduled_retry", "claimed", "running"),
        error_family=run_error_family(run, events),
        error_line=first_error_line(run.error) if run.error else "",
    )


@router.post("/runs/{run_id}/cancel", dependencies=[SameOriginDep])
async def cancel(request: Request, run_id: int, _: SessionDep) -> Response:
    """Cancel a queued, retrying or running run (:meth:`Service.cancel_run`)."""
    if not 1 <= run_id <= MAX_ID:
        raise NotFoundError(f"run {run_id} not found", field="run_id")
    ended = await service_of(request).cancel_run(run_id)
    return back(f"/runs/{run_id}", notice=f"Run {ended.id} cancelled")


@router.get("/wakeups")
async def wakeups_page(
    request: Request,
    _: SessionDep,
    agent: str | None = None,
    status: str | None = None,
    run: str | None = None,
    cursor: str | None = None,
) -> Response:
    """Wakeup requests, newest first, with their status and why."""
    service = service_of(request)
    scope = await scope_of(request, service)
    page = await asyncio.to_thread(
        service.store.listing.list_wakeups,
        workspace_id=scope.workspace.id,
        agent_id=_agent_filter(agent, scope.agent_names()),
        status=choice(WakeupStatus, status, field="status"),
        run_id=integer(run, field="run", low=1, high=MAX_ID),
        limit=PAGE_SIZE,
        cursor=text(cursor, field="cursor", limit=200) or None,
    )
    return show(
        request,
        "wakeups.html",
        scope,
        section="wakeups",
        wakeups=page.items,
        next_cursor=page.next_cursor,
        base_query=query_without(request, "cursor", "notice", "error"),
        filters={"agent": agent or "", "status": status or "", "run": run or ""},
        statuses=[s.value for s in WakeupStatus],
    )


@router.post("/wakeups/{wakeup_id}/release", dependencies=[SameOriginDep])
async def release(request: Request, wakeup_id: int, _: SessionDep) -> Response:
    """Release one held wake (enqueued once, as a person's wake)."""
    service = service_of(request)
    if not 1 <= wakeup_id <= MAX_ID:
        raise NotFoundError(f"wakeup {wakeup_id} not found", field="wakeup_id")
    [done] = await service.releases.release([wakeup_id])
    if done.result is None:
        notice = f"Wakeup {wakeup_id} was not held ({done.wakeup.status.value}): nothing to do"
    else:
        notice = f"Wakeup {wakeup_id} released ({done.result.outcome.value})"
    return back("/wakeups?status=held", notice=notice)
