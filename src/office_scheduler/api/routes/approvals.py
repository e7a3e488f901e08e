"""Approvals: agents (run tokens) and people request them; only people (admin tokens) decide.

Deciding a ``task_review`` approval moves its task (approve → ``DONE``, reject → back to
``IN_PROGRESS`` with the note as a comment); deciding a ``generic`` one wakes the agent that
asked with ``approval_resolved``. A second decision is a 409.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    actor_of,
    check_workspace,
    load_workspace,
)
from office_scheduler.api.routes.common import ERRORS, Cursor, Limit, checked_cursor
from office_scheduler.api.schemas_approvals import ApprovalCreate, DecisionIn
from office_scheduler.api.views import ListOut
from office_scheduler.api.views_approvals import ApprovalOut
from office_scheduler.auth import Principal
from office_scheduler.domain.errors import ForbiddenError
from office_scheduler.domain.models import Approval
from office_scheduler.domain.status import ApprovalStatus
from office_scheduler.service import Service

router = APIRouter(tags=["approvals"], responses=ERRORS)


async def _load(service: Service, principal: Principal, approval_id: str) -> Approval:
    approval = await asyncio.to_thread(service.store.approvals.get, approval_id)
    check_workspace(principal, approval.workspace_id, kind="approval", entity_id=approval_id)
    return approval


def _decider(principal: Principal) -> str:
    """Who decides: a person's admin token (``user:<token name>``).

    Raises:
        ForbiddenError: a run token — agents may request approvals, never decide them.
    """
    if not principal.is_admin:
        raise ForbiddenError(
            "agents cannot approve or reject: a person decides with an admin token"
        )
    return f"user:{principal.token.name}"


@router.post("/workspaces/{workspace_id}/approvals", status_code=201)
async def request_approval(
    workspace_id: str, body: ApprovalCreate, service: ServiceDep, principal: PrincipalDep
) -> ApprovalOut:
    """Ask the workspace's people for a decision; it shows in their inbox until decided."""
    check_workspace(principal, workspace_id)
    requester = body.requested_by_agent_id if principal.is_admin else principal.agent_id
    approval = await service.approvals.request(
        workspace_id=workspace_id,
        title=body.title,
        body=body.body,
        task_id=body.task_id,
        requested_by_agent_id=requester,
        actor=actor_of(principal),
    )
    return ApprovalOut.model_validate(approval)


@router.get("/workspaces/{workspace_id}/approvals")
async def list_approvals(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    status: Annotated[ApprovalStatus | None, Query()] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ListOut[ApprovalOut]:
    """The workspace's approvals, newest first, optionally one status only."""
    await load_workspace(service, principal, workspace_id)
    page = await asyncio.to_thread(
        service.store.approvals.list,
        workspace_id,
        status=status,
        limit=limit,
        cursor=checked_cursor(cursor, (datetime, str)),
    )
    return ListOut(
        items=[ApprovalOut.model_validate(item) for item in page.items],
        next_cursor=page.next_cursor,
    )


@router.get("/approvals/{approval_id}")
async def get_approval(
    approval_id: str, service: ServiceDep, principal: PrincipalDep
) -> ApprovalOut:
    """One approval."""
    return ApprovalOut.model_validate(await _load(service, principal, approval_id))


@router.post("/approvals/{approval_id}/approve")
async def approve(
    approval_id: str, service: ServiceDep, principal: PrincipalDep, body: DecisionIn | None = None
) -> ApprovalOut:
    """Approve (admin token only; 409 when already decided)."""
    await _load(service, principal, approval_id)
    decided_by = _decider(principal)
    note = body.decision_note if body is not None else None
    approval = await service.approvals.approve(
        approval_id, decided_by=decided_by, decision_note=note
    )
    return ApprovalOut.model_validate(approval)


@router.post("/approvals/{approval_id}/reject")
async def reject(
    approval_id: str, service: ServiceDep, principal: PrincipalDep, body: DecisionIn | None = None
) -> ApprovalOut:
    """Reject (admin token only; 409 when already decided)."""
    await _load(service, principal, approval_id)
    decided_by = _decider(principal)
    note = body.decision_note if body is not None else None
    approval = await service.approvals.reject(
        approval_id, decided_by=decided_by, decision_note=note
    )
    return ApprovalOut.model_validate(approval)
