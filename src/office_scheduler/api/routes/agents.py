"""Agents of a workspace, and explicit wakes (``user`` from people, ``self`` from agents)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from fastapi import APIRouter

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_agent,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas import AgentCreate, AgentPatch, WakeIn
from office_scheduler.api.views import AgentOut, IntakeOut, ListOut
from office_scheduler.domain.errors import ForbiddenError
from office_scheduler.domain.status import WakeSource

router = APIRouter(tags=["agents"], responses=ERRORS)


@router.post("/workspaces/{workspace_id}/agents", status_code=201)
async def create_agent(
    workspace_id: str, body: AgentCreate, service: ServiceDep, principal: PrincipalDep
) -> AgentOut:
    """Create an agent (admin only)."""
    require_admin(principal)
    agent = await asyncio.to_thread(
        service.store.office.create_agent,
        workspace_id=workspace_id,
        name=body.name,
        role=body.role,
        now=service.clock.now(),
        instructions=body.instructions,
        max_concurrent_sessions=body.max_concurrent_sessions,
        cooldown=timedelta(seconds=body.cooldown_s),
        skip_idle_wakeups=body.skip_idle_wakeups,
        executor=body.executor,
        status=body.status,
    )
    return AgentOut.of(agent)


@router.get("/workspaces/{workspace_id}/agents")
async def list_agents(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[AgentOut]:
    """The workspace's agents, by name."""
    await load_workspace(service, principal, workspace_id)
    found = await asyncio.to_thread(service.store.office.list_agents, workspace_id)
    return ListOut(items=[AgentOut.of(agent) for agent in found])


@router.get("/agents/{agent_id}")
async def get_agent(agent_id: str, service: ServiceDep, principal: PrincipalDep) -> AgentOut:
    """One agent."""
    return AgentOut.of(await load_agent(service, principal, agent_id))


@router.patch("/agents/{agent_id}")
async def update_agent(
    agent_id: str, body: AgentPatch, service: ServiceDep, principal: PrincipalDep
) -> AgentOut:
    """Change an agent, e.g. pause it (``{"status": "paused"}``) or resume it (admin only)."""
    require_admin(principal)
    changes = body.changes(nullable=AgentPatch.NULLABLE)
    if "cooldown_s" in changes:
        changes["cooldown"] = timedelta(seconds=changes.pop("cooldown_s"))
    await load_agent(service, principal, agent_id)
    agent = await asyncio.to_thread(
        service.store.office.update_agent, agent_id, now=service.clock.now(), **changes
    )
    return AgentOut.of(agent)


@router.post("/agents/{agent_id}/wake", status_code=202)
async def wake_agent(
    agent_id: str, body: WakeIn, service: ServiceDep, principal: PrincipalDep
) -> IntakeOut:
    """Wake an agent now.

    An admin's wake has source ``user``; an agent waking itself with its run token has
    source ``self``. A run token may not wake another agent (403).
    """
    agent = await load_agent(service, principal, agent_id)
    if principal.is_admin:
        source = WakeSource.USER
    elif principal.agent_id == agent.id:
        source = WakeSource.SELF
    else:
        raise ForbiddenError("a run token may wake only its own agent")
    result = await service.wake(
        agent.id,
        source=source,
        payload={"reason": body.reason, "payload": body.payload or {}},
        task_id=body.task_id,
        idempotency_key=body.idempotency_key,
    )
    return IntakeOut.of(result)
