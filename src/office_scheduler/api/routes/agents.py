"""Agents of a workspace: settings, pause/resume/stop, and explicit wakes.

Settings and status changes need an admin token (a run token gets 403: agents never
change agent settings). Wakes come from people (``user``) or an agent itself (``self``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from fastapi import APIRouter

from office_scheduler.agent_control import BudgetCheck
from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    actor_of,
    load_agent,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas import AgentCreate, AgentPatch, WakeBatchIn, WakeIn
from office_scheduler.api.views import AgentOut, IntakeOut, ListOut
from office_scheduler.auth import Principal
from office_scheduler.domain.errors import ForbiddenError, InvalidInputError
from office_scheduler.domain.models import Agent, Wake
from office_scheduler.domain.status import AgentStatus, WakeSource
from office_scheduler.service import Service

router = APIRouter(tags=["agents"], responses=ERRORS)


def _budget_check(service: Service) -> BudgetCheck:
    """The budget engine's ``blocking_policy`` (the policy that keeps an agent paused)."""
    return service.budgets.blocking_policy


async def _set_status(
    service: Service,
    principal: Principal,
    agent_id: str,
    status: AgentStatus,
    settings: dict[str, object] | None = None,
) -> Agent:
    """Pause, resume or stop through :class:`AgentControl` (``settings`` commit with it)."""
    actor = actor_of(principal)
    if status is AgentStatus.PAUSED:
        return await service.agents.pause(agent_id, actor=actor, settings=settings)
    if status is AgentStatus.IDLE:
        return await service.agents.resume(
            agent_id, actor=actor, budget_check=_budget_check(service), settings=settings
        )
    if status is AgentStatus.STOPPED:
        return await service.agents.stop(agent_id, actor=actor, settings=settings)
    raise InvalidInputError(
        "status must be paused, idle (resume) or stopped; working and pending_approval "
        "are set by the scheduler",
        field="status",
    )


async def _check_settings(service: Service, agent: Agent, changes: dict[str, Any]) -> None:
    """Check the settings of a PATCH against the workspace, and apply the role default.

    ``executor`` must name an executor of the workspace's settings (or be ``null``). A
    ``role`` change without ``skip_idle_wakeups`` resets it to the new role's default.

    Raises:
        InvalidInputError: an unknown executor (field ``executor``).
    """
    executor = changes.get("executor")
    if executor is not None:
        workspace = await asyncio.to_thread(service.store.office.get_workspace, agent.workspace_id)
        if executor not in workspace.settings.executors:
            names = ", ".join(sorted(workspace.settings.executors)) or "none"
            raise InvalidInputError(
                f"executor {executor!r} is not defined in the workspace (defined: {names})",
                field="executor",
            )
    role = changes.get("role")
    if role is not None and role != agent.role and "skip_idle_wakeups" not in changes:
        changes["skip_idle_wakeups"] = None


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
        reports_to=body.reports_to,
        permission_policy=body.permission_policy,
        expected_run_cents=body.expected_run_cents,
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
    """Change an agent's settings (admin only; a run token gets 403).

    A ``status`` of ``paused``, ``idle`` or ``stopped`` behaves exactly like
    ``POST /agents/{id}/pause``, ``/resume`` and ``/stop`` (a resume answers 409 while a
    budget policy blocks the agent); ``working`` and ``pending_approval`` are 422. All
    checks run first: a refused PATCH changes nothing, and the other fields commit in the
    same transaction as the status change.
    """
    require_admin(principal)
    current = await load_agent(service, principal, agent_id)
    changes = body.changes(nullable=AgentPatch.NULLABLE)
    if "cooldown_s" in changes:
        changes["cooldown"] = timedelta(seconds=changes.pop("cooldown_s"))
    status = changes.pop("status", None)
    await _check_settings(service, current, changes)
    if status is not None:
        return AgentOut.of(
            await _set_status(service, principal, agent_id, AgentStatus(status), changes)
        )
    if not changes:
        return AgentOut.of(current)
    agent = await asyncio.to_thread(
        service.store.office.update_agent, agent_id, now=service.clock.now(), **changes
    )
    return AgentOut.of(agent)


@router.post("/agents/{agent_id}/pause")
async def pause_agent(agent_id: str, service: ServiceDep, principal: PrincipalDep) -> AgentOut:
    """Pause the agent (``paused_reason`` ``manual``; idempotent; admin only).

    Its queued runs wait; a run already claimed finishes with reason ``agent_paused``.
    """
    require_admin(principal)
    await load_agent(service, principal, agent_id)
    return AgentOut.of(await _set_status(service, principal, agent_id, AgentStatus.PAUSED))


@router.post("/agents/{agent_id}/resume")
async def resume_agent(agent_id: str, service: ServiceDep, principal: PrincipalDep) -> AgentOut:
    """Resume a paused or stopped agent (admin only).

    409 naming the policy when the agent was paused for its budget and is still over it.
    """
    require_admin(principal)
    await load_agent(service, principal, agent_id)
    return AgentOut.of(await _set_status(service, principal, agent_id, AgentStatus.IDLE))


@router.post("/agents/{agent_id}/stop")
async def stop_agent(agent_id: str, service: ServiceDep, principal: PrincipalDep) -> AgentOut:
    """Stop the agent: its queued runs and scheduled retries are cancelled (admin only)."""
    require_admin(principal)
    await load_agent(service, principal, agent_id)
    return AgentOut.of(await _set_status(service, principal, agent_id, AgentStatus.STOPPED))


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
        agent=agent,
        user_id=principal.token.name if source is WakeSource.USER else None,
    )
    return IntakeOut.of(result)


@router.post("/workspaces/{workspace_id}/wakes", status_code=202)
async def wake_agents(
    workspace_id: str, body: WakeBatchIn, service: ServiceDep, principal: PrincipalDep
) -> ListOut[IntakeOut]:
    """Wake several agents of a workspace in one request (admin only; source ``user``).

    Up to 500 wakes, written in one transaction: either every wake is taken (each with
    its own outcome, in the order sent) or, when one names an agent or task outside the
    workspace or has a bad payload, none is (4xx naming the field, e.g.
    ``wakes.3.agent_id``). Each wake is what ``POST /agents/{id}/wake`` would make;
    idempotency keys deduplicate across both.
    """
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    wakes = [
        Wake(
            agent_id=item.agent_id,
            reason=item.reason,
            payload=item.payload,
            task_id=item.task_id,
            idempotency_key=item.idempotency_key,
        )
        for item in body.wakes
    ]
    results = await service.wake_many(workspace_id, wakes, user_id=principal.token.name)
    return ListOut(items=[IntakeOut.of(result) for result in results])
