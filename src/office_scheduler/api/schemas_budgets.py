"""Request bodies of the budget endpoints (money in whole cents, JSON integers only)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, StrictInt

from office_scheduler.api.schemas import EntityId, InputModel
from office_scheduler.domain.budgets import BudgetAction, BudgetPeriod, BudgetScope

#: Largest limit accepted, in cents (fits the subcent column many times over).
MAX_LIMIT_CENTS = 10**12


class BudgetCreate(InputModel):
    """``POST /api/v1/workspaces/{id}/budgets``; ``scope_id`` defaults to the workspace."""

    scope_kind: BudgetScope
    scope_id: EntityId | None = None
    limit_cents: StrictInt = Field(ge=1, le=MAX_LIMIT_CENTS)
    period: BudgetPeriod = BudgetPeriod.MONTHLY
    alert_threshold_pct: StrictInt = Field(default=80, ge=1, le=100)
    action_on_exceed: BudgetAction = BudgetAction.PAUSE_AGENT


class BudgetPatch(InputModel):
    """``PATCH /api/v1/budgets/{id}``: raise or lower the limit, change period or action."""

    limit_cents: StrictInt | None = Field(default=None, ge=1, le=MAX_LIMIT_CENTS)
    period: BudgetPeriod | None = None
    alert_threshold_pct: StrictInt | None = Field(default=None, ge=1, le=100)
    action_on_exceed: BudgetAction | None = None

    NULLABLE: ClassVar[frozenset[str]] = frozenset()
