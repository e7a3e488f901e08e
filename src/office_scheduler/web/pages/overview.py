"""Overview: agents as cards, queue depth, runs per day by outcome, recent activity."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from fastapi import Request
from starlette.responses import Response

from office_scheduler.web.chart import runs_chart
from office_scheduler.web.health import failing_agents
from office_scheduler.web.pages.common import page_router, show
from office_scheduler.web.params import scope_of
from office_scheduler.web.session import SessionDep, service_of
from office_scheduler.web.sources import dashboard_store

router = page_router()

CHART_DAYS = 14
RECENT_ACTIVITY = 15


def month_start(now: datetime) -> datetime:
    """Midnight UTC of the first day of ``now``'s month (the budget period)."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@router.get("/")
async def overview(request: Request, _: SessionDep) -> Response:
    """The overview page."""
    service = service_of(request)
    scope = await scope_of(request, service)
    store = dashboard_store(service)
    now = service.clock.now()
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    ids = [agent.id for agent in scope.agents]
    loads, days, activity, held = await asyncio.gather(
        asyncio.to_thread(store.agent_loads, scope.workspace.id, ids, spent_since=month_start(now)),
        asyncio.to_thread(
            store.runs_per_day,
            scope.workspace.id,
            first_day=today - timedelta(days=CHART_DAYS - 1),
            days=CHART_DAYS,
        ),
        asyncio.to_thread(
            service.store.runlog.list_activity, scope.workspace.id, limit=RECENT_ACTIVITY
        ),
        asyncio.to_thread(service.store.runaway.held_counts, scope.workspace.id),
    )
    health = await failing_agents(service, scope.agents)
    return show(
        request,
        "overview.html",
        scope,
        section="overview",
        loads=loads,
        health=health,
        queue_depth=sum(load.waiting for load in loads.values()),
        chart=runs_chart(days),
        days=days,
        activity=activity.items,
        held=held,
    )
