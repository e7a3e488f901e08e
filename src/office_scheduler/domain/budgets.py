"""Budget vocabulary and records: policies per workspace, project and agent, cost events, spend.

Money is counted in *subcents* (1/100 of a US cent) everywhere below the API, so the small
cost of one run adds up exactly; the API speaks whole cents (``limit_cents``). Periods are
calendar months in UTC (``monthly``, keyed ``YYYY-MM``) or the whole history (``lifetime``).
Rules come from the specification ("Pre-execution budget check") and docs/budgets.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

#: Subcents in one cent (the store keeps subcents, the API shows cents).
SUBCENTS_PER_CENT = 100
#: ``agents.paused_reason`` of an agent paused by a ``pause_agent`` budget.
PAUSED_FOR_BUDGET = "budget_exceeded"
#: Warn threshold of a policy that names none, percent of the limit.
DEFAULT_ALERT_THRESHOLD_PCT = 80


class BudgetScope(StrEnum):
    """What a policy limits: a whole workspace, one project's tasks, or one agent."""

    WORKSPACE = "workspace"
    PROJECT = "project"
    AGENT = "agent"


#: The order policies are checked in (specification: workspace → project → agent).
SCOPE_ORDER = (BudgetScope.WORKSPACE, BudgetScope.PROJECT, BudgetScope.AGENT)


class BudgetPeriod(StrEnum):
    """The window spend is summed over: the calendar month (UTC) or all time."""

    MONTHLY = "monthly"
    LIFETIME = "lifetime"

    def key(self, at: datetime) -> str:
        """The period ``at`` falls in: ``YYYY-MM`` (UTC) for monthly, ``lifetime`` otherwise."""
        if self is BudgetPeriod.LIFETIME:
            return "lifetime"
        utc = at.astimezone(UTC)
        return f"{utc.year:04d}-{utc.month:02d}"

    def start(self, at: datetime) -> datetime | None:
        """First instant (UTC) of the period ``at`` falls in; ``None`` for lifetime."""
        if self is BudgetPeriod.LIFETIME:
            return None
        return month_start(at)


def month_start(at: datetime) -> datetime:
    """Midnight UTC of the first day of ``at``'s calendar month (UTC)."""
    utc = at.astimezone(UTC)
    return datetime(utc.year, utc.month, 1, tzinfo=UTC)


def next_month_start(at: datetime) -> datetime:
    """Midnight UTC of the first day of the month after ``at``'s (UTC)."""
    utc = at.astimezone(UTC)
    year, month = (utc.year + 1, 1) if utc.month == 12 else (utc.year, utc.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


class BudgetAction(StrEnum):
    """What happens when spend reaches the limit (``action_on_exceed``)."""

    #: Pause the agent (``paused_reason='budget_exceeded'``); its queued runs end.
    PAUSE_AGENT = "pause_agent"
    #: New runs of agents in scope end ``budget_exceeded`` before launch; nobody is paused.
    BLOCK_NEW_RUNS = "block_new_runs"
    #: Only an inbox item; runs go ahead.
    NOTIFY = "notify"

    @property
    def blocks(self) -> bool:
        """True when the action stops runs from launching (everything but ``notify``)."""
        return self is not BudgetAction.NOTIFY


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetPolicy:
    """A spending limit on one scope.

    Attributes:
        scope_id: the workspace, project or agent id the policy limits.
        limit_subcents: the limit, 1/100 cent (always a whole number of cents).
        alert_threshold_pct: warn when spend reaches this percent of the limit (1..100).
        alerted_period: the period key whose warn alert already fired, if any.
        exceeded_period: the period key whose exceed action already fired, if any.
    """

    id: str
    workspace_id: str
    scope_kind: BudgetScope
    scope_id: str
    limit_subcents: int
    period: BudgetPeriod
    alert_threshold_pct: int
    action_on_exceed: BudgetAction
    alerted_period: str | None
    exceeded_period: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def limit_cents(self) -> int:
        """The limit in whole cents."""
        return self.limit_subcents // SUBCENTS_PER_CENT

    def percent_of(self, spent_subcents: int) -> int:
        """Spend as a whole percent of the limit (rounded down)."""
        return spent_subcents * 100 // self.limit_subcents

    def alert_reached(self, spent_subcents: int) -> bool:
        """Whether spend reached the warn threshold (compared exactly, no rounding)."""
        return spent_subcents * 100 >= self.alert_threshold_pct * self.limit_subcents

    def exceeded(self, spent_subcents: int) -> bool:
        """Whether spend reached the limit (100 % counts as exceeded)."""
        return spent_subcents >= self.limit_subcents


@dataclass(frozen=True, kw_only=True, slots=True)
class CostEvent:
    """Tokens and cost one run reported.

    Attributes:
        cost_subcents: the price, 1/100 cent; 0 when ``priced`` is false.
        priced: false when the run reported tokens but no price (shown as unpriced, not
            counted as zero cost).
    """

    id: int
    workspace_id: str
    agent_id: str
    project_id: str | None
    task_id: str | None
    run_id: int | None
    input_tokens: int
    output_tokens: int
    cost_subcents: int
    model: str | None
    priced: bool
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Spend:
    """What one scope spent in one period.

    Attributes:
        cost_subcents: sum of the priced cost events, 1/100 cent.
        priced_count: cost events with a price.
        unpriced_count: cost events with tokens but no price (their cost is unknown).
    """

    scope_kind: BudgetScope
    scope_id: str
    cost_subcents: int = 0
    priced_count: int = 0
    unpriced_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
