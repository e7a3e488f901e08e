"""Budgets: policies per workspace, project and agent, cost events, alerts and enforcement."""

from __future__ import annotations

from office_scheduler.budgets.service import BudgetBlock, BudgetService, SpendReport

__all__ = ["BudgetBlock", "BudgetService", "SpendReport"]
