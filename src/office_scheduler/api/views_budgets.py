"""Responses of the budget endpoints: policies in whole cents, spend in subcents and cents."""

from __future__ import annotations

from pydantic import BaseModel

from office_scheduler.api.views import Timestamp
from office_scheduler.budgets import SpendReport
from office_scheduler.domain.budgets import (
    SUBCENTS_PER_CENT,
    BudgetAction,
    BudgetPeriod,
    BudgetPolicy,
    BudgetScope,
)


class BudgetOut(BaseModel):
    """A budget policy.

    ``alerted_period``/``exceeded_period`` name the period whose alert or exceed action
    already fired.
    """

    id: str
    workspace_id: str
    scope_kind: BudgetScope
    scope_id: str
    limit_cents: int
    period: BudgetPeriod
    alert_threshold_pct: int
    action_on_exceed: BudgetAction
    alerted_period: str | None
    exceeded_period: str | None
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, policy: BudgetPolicy) -> BudgetOut:
        """The view of ``policy``."""
        return cls(
            id=policy.id,
            workspace_id=policy.workspace_id,
            scope_kind=policy.scope_kind,
            scope_id=policy.scope_id,
            limit_cents=policy.limit_cents,
            period=policy.period,
            alert_threshold_pct=policy.alert_threshold_pct,
            action_on_exceed=policy.action_on_exceed,
            alerted_period=policy.alerted_period,
            exceeded_period=policy.exceeded_period,
            created_at=policy.created_at,
            updated_at=policy.updated_at,
        )


class SpendItemOut(BaseModel):
    """What one scope spent; ``unpriced_count`` runs reported tokens without a price.

    ``budget_pct`` is spend as a whole percent of the scope's policy limit (when it has a
    policy whose period matches the report's).
    """

    scope_kind: BudgetScope
    scope_id: str
    spent_subcents: int
    spent_cents: float
    priced_count: int
    unpriced_count: int
    input_tokens: int
    output_tokens: int
    budget_id: str | None = None
    limit_cents: int | None = None
    budget_pct: int | None = None


class SpendOut(BaseModel):
    """``GET /api/v1/workspaces/{id}/spend``: ``period`` is ``YYYY-MM`` or ``lifetime``."""

    period: str
    since: Timestamp | None
    until: Timestamp | None
    items: list[SpendItemOut]

    @classmethod
    def of(cls, report: SpendReport) -> SpendOut:
        """The view of ``report``."""
        items = []
        for spend in report.items:
            policy = report.policies.get((spend.scope_kind, spend.scope_id))
            matches = policy is not None and (
                (policy.period is BudgetPeriod.LIFETIME) == (report.period == "lifetime")
            )
            items.append(
                SpendItemOut(
                    scope_kind=spend.scope_kind,
                    scope_id=spend.scope_id,
                    spent_subcents=spend.cost_subcents,
                    spent_cents=spend.cost_subcents / SUBCENTS_PER_CENT,
                    priced_count=spend.priced_count,
                    unpriced_count=spend.unpriced_count,
                    input_tokens=spend.input_tokens,
                    output_tokens=spend.output_tokens,
                    budget_id=policy.id if policy is not None else None,
                    limit_cents=policy.limit_cents if policy is not None else None,
                    budget_pct=(
                        policy.percent_of(spend.cost_subcents)
                        if policy is not None and matches
                        else None
                    ),
                )
            )
        return cls(period=report.period, since=report.since, until=report.until, items=items)
