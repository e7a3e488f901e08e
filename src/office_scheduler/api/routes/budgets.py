"""Budget policies and spend of a workspace (admin only; run tokens get 403)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from office_scheduler.api.deps import PrincipalDep, ServiceDep, load_workspace, require_admin
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas_budgets import BudgetCreate, BudgetPatch
from office_scheduler.api.views import ListOut
from office_scheduler.api.views_budgets import BudgetOut, SpendOut

router = APIRouter(tags=["budgets"], responses=ERRORS)

Period = Annotated[
    str | None,
    Query(
        max_length=20, description="`monthly` (this month, UTC, default), `YYYY-MM` or `lifetime`"
    ),
]


@router.post("/workspaces/{workspace_id}/budgets", status_code=201)
async def create_budget(
    workspace_id: str, body: BudgetCreate, service: ServiceDep, principal: PrincipalDep
) -> BudgetOut:
    """Create the budget policy of a scope; a scope has at most one (409)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    policy = await service.budgets.create_policy(
        workspace_id,
        scope_kind=body.scope_kind,
        scope_id=body.scope_id,
        limit_cents=body.limit_cents,
        period=body.period,
        alert_threshold_pct=body.alert_threshold_pct,
        action_on_exceed=body.action_on_exceed,
    )
    return BudgetOut.of(policy)


@router.get("/workspaces/{workspace_id}/budgets")
async def list_budgets(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[BudgetOut]:
    """The workspace's budget policies: workspace, then projects, then agents."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    policies = await service.budgets.list_policies(workspace_id)
    return ListOut(items=[BudgetOut.of(policy) for policy in policies])


@router.get("/workspaces/{workspace_id}/spend")
async def get_spend(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep, period: Period = None
) -> SpendOut:
    """Spend of the workspace, its projects and agents in one period (priced and unpriced)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    return SpendOut.of(await service.budgets.spend_report(workspace_id, period))


@router.get("/budgets/{budget_id}")
async def get_budget(budget_id: str, service: ServiceDep, principal: PrincipalDep) -> BudgetOut:
    """One budget policy."""
    require_admin(principal)
    return BudgetOut.of(await service.budgets.get_policy(budget_id))


@router.patch("/budgets/{budget_id}")
async def update_budget(
    budget_id: str, body: BudgetPatch, service: ServiceDep, principal: PrincipalDep
) -> BudgetOut:
    """Change a policy; raising the limit above spend lets a budget-paused agent resume."""
    require_admin(principal)
    changes = body.changes(nullable=BudgetPatch.NULLABLE)
    return BudgetOut.of(await service.budgets.update_policy(budget_id, **changes))


@router.delete("/budgets/{budget_id}", status_code=204)
async def delete_budget(budget_id: str, service: ServiceDep, principal: PrincipalDep) -> Response:
    """Delete a policy (its cost history stays)."""
    require_admin(principal)
    await service.budgets.delete_policy(budget_id)
    return Response(status_code=204)
