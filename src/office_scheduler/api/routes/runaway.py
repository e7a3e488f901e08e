"""Runaway limits (DESIGN §15): release held wakes, read and set the limits.

Everything here is for people (admin tokens): releasing is a person's decision, and an
agent may not raise its own limits.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_agent,
    load_wakeup,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS, MAX_INT
from office_scheduler.api.schemas import InputModel
from office_scheduler.api.views import InboxOut, IntakeOut, WakeupOut
from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.runaway import RunawayLimits, check_limits
from office_scheduler.domain.status import IntakeOutcome
from office_scheduler.intake.release import MAX_RELEASE, Released

router = APIRouter(tags=["runaway"], responses=ERRORS)

RowId = Annotated[int, Path(ge=1, le=MAX_INT)]


class ReleaseIn(InputModel):
    """The held wakes to release."""

    wakeup_ids: list[Annotated[int, Field(ge=1, le=MAX_INT)]] = Field(
        min_length=1, max_length=MAX_RELEASE
    )


class ReleasedOut(BaseModel):
    """What releasing one wake did.

    ``released`` is false when the wake was not held (already released, or never held):
    nothing was enqueued for it. Otherwise ``outcome`` and ``run_id`` are those of the new
    wake (``successor``) that carries it on.
    """

    wakeup: WakeupOut
    released: bool
    successor: WakeupOut | None = None
    outcome: IntakeOutcome | None = None
    run_id: int | None = None

    @classmethod
    def of(cls, done: Released) -> ReleasedOut:
        """The view of one release."""
        if done.result is None:
            return cls(wakeup=WakeupOut.model_validate(done.wakeup), released=False)
        intake = IntakeOut.of(done.result)
        return cls(
            wakeup=WakeupOut.model_validate(done.wakeup),
            released=True,
            successor=intake.wakeup,
            outcome=intake.outcome,
            run_id=intake.run_id,
        )


class ReleasesOut(BaseModel):
    """The releases of one request, in the order asked."""

    items: list[ReleasedOut]


class ItemReleaseOut(BaseModel):
    """A ``wake.held`` inbox item, resolved, and the releases of its held wakes."""

    item: InboxOut
    items: list[ReleasedOut]


class LimitsOut(BaseModel):
    """Runaway limits: those set here, and the effective ones (``null``: no limit)."""

    set: dict[str, int | None]
    effective: dict[str, int | None]


@router.post("/wakeups/release")
async def release_wakeups(
    body: ReleaseIn, service: ServiceDep, principal: PrincipalDep
) -> ReleasesOut:
    """Release held wakes (admin only): each is enqueued once, as a person's wake."""
    require_admin(principal)
    done = await service.releases.release(body.wakeup_ids)
    return ReleasesOut(items=[ReleasedOut.of(item) for item in done])


@router.post("/wakeups/{wakeup_id}/release")
async def release_wakeup(
    wakeup_id: RowId, service: ServiceDep, principal: PrincipalDep
) -> ReleasedOut:
    """Release one held wake (admin only); a wake no longer held answers ``released: false``."""
    require_admin(principal)
    await load_wakeup(service, principal, wakeup_id)
    done = await service.releases.release([wakeup_id])
    return ReleasedOut.of(done[0])


@router.post("/inbox/{item_id}/release")
async def release_inbox_item(
    item_id: RowId, service: ServiceDep, principal: PrincipalDep
) -> ItemReleaseOut:
    """Release every wake a ``wake.held`` item reports and resolve it (admin only)."""
    require_admin(principal)
    item, done = await service.releases.release_item(item_id)
    return ItemReleaseOut(
        item=InboxOut.model_validate(item), items=[ReleasedOut.of(d) for d in done]
    )


def _limits_body(
    body: dict[str, Any], *, for_agent: bool
) -> tuple[dict[str, int | None], list[str]]:
    """Split a PATCH body into limits to set and (agents only) overrides to drop."""
    if not isinstance(body, dict):
        raise InvalidInputError("the body must be a JSON object of limits", field="body")
    remove = [key for key, value in body.items() if value == "inherit"] if for_agent else []
    values = {key: value for key, value in body.items() if key not in remove}
    if remove:
        check_limits(dict.fromkeys(remove), for_agent=True)
    return check_limits(values, for_agent=for_agent), remove


@router.get("/workspaces/{workspace_id}/limits")
async def get_workspace_limits(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> LimitsOut:
    """The workspace's runaway limits (admin only)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    stored = await asyncio.to_thread(service.store.runaway.workspace_limits, workspace_id)
    return LimitsOut(set=stored, effective=RunawayLimits.resolve(stored, None).as_dict())


@router.patch("/workspaces/{workspace_id}/limits")
async def set_workspace_limits(
    workspace_id: str, body: dict[str, Any], service: ServiceDep, principal: PrincipalDep
) -> LimitsOut:
    """Set some of the workspace's limits (admin only); ``null`` means no limit."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    values, _ = _limits_body(body, for_agent=False)
    stored = await asyncio.to_thread(
        service.store.runaway.set_workspace_limits, workspace_id, values, now=service.clock.now()
    )
    return LimitsOut(set=stored, effective=RunawayLimits.resolve(stored, None).as_dict())


@router.get("/agents/{agent_id}/limits")
async def get_agent_limits(
    agent_id: str, service: ServiceDep, principal: PrincipalDep
) -> LimitsOut:
    """The agent's overrides and its effective limits (admin only)."""
    require_admin(principal)
    agent = await load_agent(service, principal, agent_id)
    workspace, own = await asyncio.to_thread(service.store.runaway.limit_settings, agent.id)
    return LimitsOut(set=own, effective=RunawayLimits.resolve(workspace, own).as_dict())


@router.patch("/agents/{agent_id}/limits")
async def set_agent_limits(
    agent_id: str, body: dict[str, Any], service: ServiceDep, principal: PrincipalDep
) -> LimitsOut:
    """Override some of the workspace's limits for one agent (admin only).

    ``null`` means no limit for this agent; the string ``"inherit"`` drops the override.
    """
    require_admin(principal)
    agent = await load_agent(service, principal, agent_id)
    values, remove = _limits_body(body, for_agent=True)
    try:
        await asyncio.to_thread(
            service.store.runaway.set_agent_limits,
            agent.id,
            values,
            remove=remove,
            now=service.clock.now(),
        )
    except NotFoundError:
        raise NotFoundError(f"agent {agent_id} not found", field="agent_id") from None
    workspace, own = await asyncio.to_thread(service.store.runaway.limit_settings, agent.id)
    return LimitsOut(set=own, effective=RunawayLimits.resolve(workspace, own).as_dict())
