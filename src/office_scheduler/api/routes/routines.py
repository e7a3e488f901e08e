"""Routines: CRUD, manual fires ("fire now"), routine runs and triggers.

Reads are open to tokens of the routine's workspace; every write (fires included) needs
an admin token. Semantic validation is the routine service's: its errors name the field.
The public webhook endpoint lives in :mod:`office_scheduler.api.routes.webhooks`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Response

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    check_workspace,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas_routines import (
    FireIn,
    RoutineCreate,
    RoutinePatch,
    TriggerCreate,
    TriggerPatch,
)
from office_scheduler.api.views import ListOut
from office_scheduler.api.views_routines import (
    RoutineOut,
    RoutineRunOut,
    TriggerCreatedOut,
    TriggerOut,
)
from office_scheduler.auth import Principal
from office_scheduler.domain.routines import Routine
from office_scheduler.service import Service

router = APIRouter(tags=["routines"], responses=ERRORS)

RunsLimit = Annotated[int, Query(ge=1, le=500, description="most routine runs to list")]


async def load_routine(service: Service, principal: Principal, routine_id: str) -> Routine:
    """The routine, if the caller may reach it (else 404)."""
    routine = await service.routines.get_routine(routine_id)
    check_workspace(principal, routine.workspace_id, kind="routine", entity_id=routine_id)
    return routine


# -- routines -----------------------------------------------------------------------------


@router.post("/workspaces/{workspace_id}/routines", status_code=201)
async def create_routine(
    workspace_id: str, body: RoutineCreate, service: ServiceDep, principal: PrincipalDep
) -> RoutineOut:
    """Create a routine (admin only); add triggers to make it fire."""
    require_admin(principal)
    routine = await service.routines.create_routine(workspace_id, body.as_fields())
    return RoutineOut.of(routine)


@router.get("/workspaces/{workspace_id}/routines")
async def list_routines(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[RoutineOut]:
    """The workspace's routines, oldest first."""
    await load_workspace(service, principal, workspace_id)
    found = await asyncio.to_thread(service.store.routines.list_routines, workspace_id)
    return ListOut(items=[RoutineOut.of(routine) for routine in found])


@router.get("/routines/{routine_id}")
async def get_routine(routine_id: str, service: ServiceDep, principal: PrincipalDep) -> RoutineOut:
    """One routine."""
    return RoutineOut.of(await load_routine(service, principal, routine_id))


@router.patch("/routines/{routine_id}")
async def update_routine(
    routine_id: str, body: RoutinePatch, service: ServiceDep, principal: PrincipalDep
) -> RoutineOut:
    """Change a routine (admin only).

    Pause with ``{"status": "paused"}``, resume with ``"active"`` (ticks missed while
    paused are not caught up).
    """
    require_admin(principal)
    changes = body.as_fields()
    routine = await service.routines.update_routine(routine_id, changes)
    if "status" in changes:
        service.cron.poke()
    return RoutineOut.of(routine)


@router.delete("/routines/{routine_id}", status_code=204)
async def delete_routine(routine_id: str, service: ServiceDep, principal: PrincipalDep) -> Response:
    """Delete a routine with its triggers and routine runs (admin only; its tasks stay)."""
    require_admin(principal)
    await service.routines.delete_routine(routine_id)
    service.cron.poke()
    return Response(status_code=204)


# -- fires and routine runs ---------------------------------------------------------------


@router.post("/routines/{routine_id}/fire", status_code=201)
async def fire_routine(
    routine_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    body: FireIn | None = None,
) -> RoutineRunOut:
    """Fire the routine now (admin only); the routine run says what it became.

    A heavy routine creates a task; a lightweight one wakes its assignee (no coalescing
    hold). The concurrency policy applies: the run may come back ``skipped`` or
    ``coalesced``. A routine that is not active answers 409.
    """
    require_admin(principal)
    variables = body.variables if body is not None else None
    run = await service.routines.fire_manual(routine_id, variables)
    return RoutineRunOut.of(run)


@router.get("/routines/{routine_id}/runs")
async def list_routine_runs(
    routine_id: str, service: ServiceDep, principal: PrincipalDep, limit: RunsLimit = 50
) -> ListOut[RoutineRunOut]:
    """The routine's runs, newest first."""
    await load_routine(service, principal, routine_id)
    found = await asyncio.to_thread(service.store.routines.list_runs, routine_id, limit=limit)
    return ListOut(items=[RoutineRunOut.of(run) for run in found])


# -- triggers -----------------------------------------------------------------------------


@router.post("/routines/{routine_id}/triggers", status_code=201)
async def add_trigger(
    routine_id: str, body: TriggerCreate, service: ServiceDep, principal: PrincipalDep
) -> TriggerCreatedOut:
    """Add a schedule, webhook or manual trigger (admin only).

    A signed webhook's ``secret`` is in this response only: it is never shown again.
    """
    require_admin(principal)
    trigger, secret = await service.routines.add_trigger(routine_id, body.as_fields())
    service.cron.poke()
    return TriggerCreatedOut.created(trigger, secret)


@router.get("/routines/{routine_id}/triggers")
async def list_triggers(
    routine_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[TriggerOut]:
    """The routine's triggers, oldest first (secrets are never shown)."""
    await load_routine(service, principal, routine_id)
    found = await service.routines.list_triggers(routine_id)
    return ListOut(items=[TriggerOut.of(trigger) for trigger in found])


@router.patch("/routine-triggers/{trigger_id}")
async def update_trigger(
    trigger_id: str, body: TriggerPatch, service: ServiceDep, principal: PrincipalDep
) -> TriggerOut:
    """Enable or disable a trigger, or change its schedule (admin only)."""
    require_admin(principal)
    trigger = await service.routines.update_trigger(trigger_id, body.as_fields())
    service.cron.poke()
    return TriggerOut.of(trigger)


@router.delete("/routine-triggers/{trigger_id}", status_code=204)
async def delete_trigger(trigger_id: str, service: ServiceDep, principal: PrincipalDep) -> Response:
    """Delete a trigger (admin only; its routine runs stay)."""
    require_admin(principal)
    await service.routines.delete_trigger(trigger_id)
    service.cron.poke()
    return Response(status_code=204)
