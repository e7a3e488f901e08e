"""Agents: settings (pause/resume, concurrency, cooldown, idle skip, executor), summaries, runs.

Status changes go through :class:`~office_scheduler.agent_control.AgentControl` and
settings through the store, exactly as ``PATCH /api/v1/agents/{id}`` does for an admin.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Annotated

from fastapi import Form, Request
from starlette.responses import Response

from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.models import Agent
from office_scheduler.service import Service
from office_scheduler.store.activity import USER_ACTOR
from office_scheduler.web.health import failing_agents
from office_scheduler.web.pages.common import PAGE_SIZE, back, page_router, show
from office_scheduler.web.pages.overview import month_start
from office_scheduler.web.params import Scope, integer, scope_of, text
from office_scheduler.web.session import SameOriginDep, SessionDep, service_of
from office_scheduler.web.sources import dashboard_store

router = page_router()

MAX_COOLDOWN_S = 7 * 24 * 3600


async def _agent(service: Service, scope: Scope, agent_id: str) -> Agent:
    agent = await asyncio.to_thread(service.store.office.get_agent, agent_id)
    if agent.workspace_id != scope.workspace.id:
        raise NotFoundError(f"agent {agent_id} not found in this workspace", field="agent_id")
    return agent


@router.get("/agents")
async def agents_page(request: Request, _: SessionDep) -> Response:
    """The workspace's agents with their settings and load."""
    service = service_of(request)
    scope = await scope_of(request, service)
    loads = await asyncio.to_thread(
        dashboard_store(service).agent_loads,
        scope.workspace.id,
        [agent.id for agent in scope.agents],
        spent_since=month_start(service.clock.now()),
    )
    health = await failing_agents(service, scope.agents)
    return show(request, "agents.html", scope, section="agents", loads=loads, health=health)


@router.get("/agents/{agent_id}")
async def agent_detail(
    request: Request, agent_id: str, _: SessionDep, cursor: str | None = None
) -> Response:
    """An agent: settings form, continuation summaries, its runs (paginated)."""
    service = service_of(request)
    scope = await scope_of(request, service)
    agent = await _agent(service, scope, agent_id)
    store = dashboard_store(service)
    # Checked before any query starts: a bad cursor must not leave a coroutine unawaited.
    runs_cursor = text(cursor, field="cursor", limit=200) or None
    summaries, runs, loads = await asyncio.gather(
        asyncio.to_thread(store.agent_summaries, agent.id),
        asyncio.to_thread(
            service.store.listing.list_runs,
            agent_id=agent.id,
            limit=PAGE_SIZE,
            cursor=runs_cursor,
        ),
        asyncio.to_thread(
            store.agent_loads,
            scope.workspace.id,
            [agent.id],
            spent_since=month_start(service.clock.now()),
        ),
    )
    health = await failing_agents(service, [agent])
    return show(
        request,
        "agent.html",
        scope,
        section="agents",
        agent=agent,
        health=health,
        load=loads[agent.id],
        summaries=summaries,
        runs=runs.items,
        next_cursor=runs.next_cursor,
        executors=sorted(scope.workspace.settings.executors),
    )


@router.post("/agents/{agent_id}/settings", dependencies=[SameOriginDep])
async def save_settings(
    request: Request,
    agent_id: str,
    _: SessionDep,
    max_concurrent_sessions: Annotated[str, Form(max_length=20)] = "",
    cooldown_s: Annotated[str, Form(max_length=20)] = "",
    skip_idle_wakeups: Annotated[str, Form(max_length=10)] = "",
    executor: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Change concurrency, cooldown, idle skip and executor (validated before writing)."""
    service = service_of(request)
    scope = await scope_of(request, service)
    agent = await _agent(service, scope, agent_id)
    sessions = integer(max_concurrent_sessions, field="max_concurrent_sessions", low=1, high=100)
    cooldown = integer(cooldown_s, field="cooldown_s", low=0, high=MAX_COOLDOWN_S)
    if sessions is None or cooldown is None:
        field = "max_concurrent_sessions" if sessions is None else "cooldown_s"
        raise InvalidInputError(f"{field} is required", field=field)
    chosen = text(executor, field="executor", limit=200) or None
    if chosen is not None and chosen not in scope.workspace.settings.executors:
        names = ", ".join(sorted(scope.workspace.settings.executors)) or "none"
        raise InvalidInputError(
            f"executor {chosen!r} is not defined in the workspace (defined: {names})",
            field="executor",
        )
    await asyncio.to_thread(
        service.store.office.update_agent,
        agent.id,
        now=service.clock.now(),
        max_concurrent_sessions=sessions,
        cooldown=timedelta(seconds=cooldown),
        skip_idle_wakeups=skip_idle_wakeups == "on",
        executor=chosen,
    )
    service.runs.poke()
    return back(f"/agents/{agent.id}", notice="Settings saved")


@router.post("/agents/{agent_id}/pause", dependencies=[SameOriginDep])
async def pause(request: Request, agent_id: str, _: SessionDep) -> Response:
    """Pause the agent (its queued runs wait)."""
    service = service_of(request)
    agent = await _agent(service, await scope_of(request, service), agent_id)
    await service.agents.pause(agent.id, actor=USER_ACTOR)
    return back(f"/agents/{agent.id}", notice=f"{agent.name} paused")


@router.post("/agents/{agent_id}/resume", dependencies=[SameOriginDep])
async def resume(request: Request, agent_id: str, _: SessionDep) -> Response:
    """Resume the agent (refused while a budget policy blocks it)."""
    service = service_of(request)
    agent = await _agent(service, await scope_of(request, service), agent_id)
    await service.agents.resume(
        agent.id, actor=USER_ACTOR, budget_check=service.budgets.blocking_policy
    )
    return back(f"/agents/{agent.id}", notice=f"{agent.name} resumed")
