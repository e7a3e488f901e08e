"""The budget service: policies in cents, cost recording, threshold checks, spend reports.

Rules (specification "Pre-execution budget check"; docs/budgets.md):

* Policies per workspace, project and agent; spend is summed per calendar month (UTC) or
  over all time; runs reporting tokens without a price are *unpriced* (not zero cost).
* After each cost event, every applicable policy (workspace → project of the run's task →
  agent) is re-summed: reaching ``alert_threshold_pct`` sends one alert per policy and
  period, reaching 100 % applies ``action_on_exceed`` once per period (compare-and-set on
  the policy, so several processes fire it once).
* Before launch, the same policies are checked in the same order; the first exceeded one
  whose action blocks (``pause_agent``, ``block_new_runs``) decides; ``notify`` never stops
  a run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from office_scheduler.budgets.notify import BudgetNotifier, Enqueue, Publish
from office_scheduler.budgets.projection import expected_run_subcents
from office_scheduler.clock import Clock
from office_scheduler.domain.budgets import (
    SUBCENTS_PER_CENT,
    BudgetAction,
    BudgetPeriod,
    BudgetPolicy,
    BudgetScope,
    CostEvent,
    Spend,
    month_start,
    next_month_start,
)
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.models import Agent, Run
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)

#: Keys of a policy update in API terms.
POLICY_CHANGES = frozenset({"limit_cents", "period", "alert_threshold_pct", "action_on_exceed"})


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetBlock:
    """A policy that stops a run before launch, with the spend that put it over.

    Attributes:
        expected_subcents: for a policy not yet exceeded that the run's expected cost
            would take over its limit (the projection), that cost; ``None`` when spend so
            far already reached the limit.
    """

    policy: BudgetPolicy
    period: str
    budget_pct: int
    spent_subcents: int
    expected_subcents: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SpendReport:
    """Spend of a workspace's scopes in one period.

    Attributes:
        period: ``lifetime`` or a month ``YYYY-MM`` (UTC).
        since: first instant counted (UTC), ``None`` for lifetime.
        until: first instant not counted (UTC), ``None`` for lifetime.
        items: workspace total, then projects, then agents.
        policies: the workspace's policies by ``(scope_kind, scope_id)``.
    """

    period: str
    since: datetime | None
    until: datetime | None
    items: tuple[Spend, ...]
    policies: Mapping[tuple[BudgetScope, str], BudgetPolicy]


def _cents(value: object, field: str = "limit_cents") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInputError(f"{field} must be a positive whole number of cents", field=field)
    return value * SUBCENTS_PER_CENT


def _usage_facts(outcome: Outcome) -> tuple[bool, str | None]:
    """Whether the outcome carried a price, and the model it named.

    ``Usage.priced``/``Usage.model`` win when an executor set them; otherwise a non-zero
    cost, or an explicit ``total_cost_usd``/``cost_usd`` in the result JSON, counts as
    priced, and the model comes from the result's ``model`` or ``modelUsage`` keys.
    """
    usage, result = outcome.usage, outcome.result or {}
    priced = usage.priced
    if priced is None:
        priced = usage.cost_subcents > 0 or any(
            isinstance(result.get(key), int | float) for key in ("total_cost_usd", "cost_usd")
        )
    model = usage.model
    if model is None:
        named = result.get("model")
        by_model = result.get("modelUsage")
        if isinstance(named, str) and named:
            model = named
        elif isinstance(by_model, Mapping) and by_model:
            model = ",".join(sorted(str(key) for key in by_model))
    return priced, model


class BudgetService:
    """Budget policies and their enforcement (see the module docstring for the rules).

    Args:
        store: the database.
        clock: time source; periods are computed from it (UTC).
        enqueue: intake, for ``budget_alert`` wakes.
        publish: the event bus.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        enqueue: Enqueue | None = None,
        publish: Publish | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self.notifier = BudgetNotifier(store, clock, enqueue=enqueue, publish=publish)

    # -- policies -------------------------------------------------------------------------

    async def create_policy(
        self,
        workspace_id: str,
        *,
        scope_kind: BudgetScope | str,
        limit_cents: int,
        scope_id: str | None = None,
        period: BudgetPeriod | str = BudgetPeriod.MONTHLY,
        alert_threshold_pct: int = 80,
        action_on_exceed: BudgetAction | str = BudgetAction.PAUSE_AGENT,
    ) -> BudgetPolicy:
        """Create a policy; ``scope_id`` defaults to the workspace for a workspace scope.

        Raises:
            InvalidInputError: a bad value, or no ``scope_id`` for a project/agent scope.
            NotFoundError: no such workspace, project or agent (in this workspace).
            ConflictError: the scope already has a policy.
        """
        scope = _scope(scope_kind)
        if scope_id is None:
            if scope is not BudgetScope.WORKSPACE:
                raise InvalidInputError(f"a {scope.value} budget needs scope_id", field="scope_id")
            scope_id = workspace_id
        return await asyncio.to_thread(
            self._store.budgets.create_policy,
            workspace_id=workspace_id,
            scope_kind=scope,
            scope_id=scope_id,
            limit_subcents=_cents(limit_cents),
            period=period,  # type: ignore[arg-type]  # validated by the store
            action_on_exceed=action_on_exceed,  # type: ignore[arg-type]
            alert_threshold_pct=alert_threshold_pct,
            now=self._clock.now(),
        )

    async def get_policy(self, policy_id: str) -> BudgetPolicy:
        """One policy (raises ``NotFoundError``)."""
        return await asyncio.to_thread(self._store.budgets.get_policy, policy_id)

    async def list_policies(self, workspace_id: str) -> list[BudgetPolicy]:
        """The workspace's policies: workspace, projects, agents."""
        return await asyncio.to_thread(self._store.budgets.list_policies, workspace_id)

    async def delete_policy(self, policy_id: str) -> None:
        """Delete a policy (raises ``NotFoundError``)."""
        await asyncio.to_thread(self._store.budgets.delete_policy, policy_id)

    async def update_policy(self, policy_id: str, **changes: Any) -> BudgetPolicy:
        """Change ``limit_cents``, ``period``, ``alert_threshold_pct`` or ``action_on_exceed``.

        When spend of the current period is now under the (new) limit, the exceed marker is
        cleared so the action can fire again later (the warn alert stays once per period). A
        budget-paused agent stays paused until someone resumes it (allowed once
        :meth:`blocking_policy` finds nothing).

        Raises:
            InvalidInputError: an unknown key or bad value.
            NotFoundError: no such policy.
        """
        unknown = sorted(set(changes) - POLICY_CHANGES)
        if unknown:
            raise InvalidInputError(f"unknown budget field {unknown[0]!r}", field=unknown[0])
        values = dict(changes)
        if "limit_cents" in values:
            values["limit_subcents"] = _cents(values.pop("limit_cents"))
        now = self._clock.now()
        store = self._store.budgets
        policy = await asyncio.to_thread(store.update_policy, policy_id, now=now, **values)
        spent = await self._spent(policy, now)
        if policy.exceeded_period is not None and not policy.exceeded(spent):
            policy = await asyncio.to_thread(
                store.clear_marks, policy.id, alerted=False, exceeded=True, now=now
            )
        return policy

    # -- spend ----------------------------------------------------------------------------

    async def _spent(self, policy: BudgetPolicy, now: datetime) -> int:
        spend = await asyncio.to_thread(
            self._store.budgets.spend,
            policy.workspace_id,
            policy.scope_kind,
            policy.scope_id,
            since=policy.period.start(now),
        )
        return spend.cost_subcents

    async def spend_report(self, workspace_id: str, period: str | None = None) -> SpendReport:
        """Spend per scope in ``period``.

        Lists the workspace, every scope that spent, and every scope that has a policy
        (with zero spend when it spent nothing yet).

        ``period``: ``monthly``/``None`` (this month, UTC), a month ``YYYY-MM``, or
        ``lifetime``.

        Raises:
            InvalidInputError: another ``period`` (field ``period``).
            NotFoundError: no such workspace.
        """
        await asyncio.to_thread(self._store.office.get_workspace, workspace_id)
        since, until, key = _report_window(period, self._clock.now())
        items = await asyncio.to_thread(
            self._store.budgets.spend_report, workspace_id, since=since, until=until
        )
        policies = await self.list_policies(workspace_id)
        # A scope with a policy is listed even before it spends anything.
        seen = {(item.scope_kind, item.scope_id) for item in items}
        items += [
            Spend(scope_kind=policy.scope_kind, scope_id=policy.scope_id)
            for policy in policies
            if (policy.scope_kind, policy.scope_id) not in seen
        ]
        return SpendReport(
            period=key,
            since=since,
            until=until,
            items=tuple(items),
            policies={(policy.scope_kind, policy.scope_id): policy for policy in policies},
        )

    # -- enforcement ----------------------------------------------------------------------

    async def record_run_cost(
        self, run: Run, outcome: Outcome, *, project_id: str | None
    ) -> CostEvent | None:
        """Record the cost event of a finished session and check the run's policies.

        Nothing is recorded when the outcome reports neither tokens nor cost.

        Returns:
            The cost event, or ``None`` when there was no usage.
        """
        usage = outcome.usage
        if usage.input_tokens == 0 and usage.output_tokens == 0 and usage.cost_subcents == 0:
            return None
        priced, model = _usage_facts(outcome)
        event = await asyncio.to_thread(
            self._store.budgets.add_cost_event,
            workspace_id=run.workspace_id,
            agent_id=run.agent_id,
            project_id=project_id,
            task_id=run.task_id,
            run_id=run.id,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_subcents=usage.cost_subcents,
            priced=priced,
            model=model,
            now=self._clock.now(),
        )
        if priced and usage.cost_subcents > 0:
            await self.check_after_cost(run.agent_id, project_id=project_id, run_id=run.id)
        return event

    async def check_after_cost(
        self, agent_id: str, *, project_id: str | None, run_id: int | None = None
    ) -> None:
        """Fire the alerts and exceed actions that spend now calls for (once per period)."""
        agent = await asyncio.to_thread(self._store.office.get_agent, agent_id)
        now = self._clock.now()
        store = self._store.budgets
        policies = await asyncio.to_thread(
            store.applicable_policies, agent.workspace_id, project_id=project_id, agent_id=agent.id
        )
        for policy in policies:
            spent = await self._spent(policy, now)
            period = policy.period.key(now)
            pct = policy.percent_of(spent)
            facts: dict[str, Any] = {"period": period, "pct": pct, "spent": spent, "run_id": run_id}
            if policy.alert_reached(spent):
                await self.notifier.alert(policy, agent, **facts)
            if policy.exceeded(spent):
                await self.notifier.exceeded(policy, agent, **facts)

    async def check_before_launch(
        self,
        agent: Agent,
        *,
        project_id: str | None,
        run_id: int | None = None,
        policies: Sequence[BudgetPolicy] | None = None,
    ) -> BudgetBlock | None:
        """The policy that stops this run, checked workspace → project → agent.

        An exceeded policy whose action has not fired this period fires it now (a limit
        lowered below spend, or a period's first run after an earlier one crossed it).

        A blocking policy (``pause_agent``, ``block``) not yet exceeded also stops the run
        when spend so far plus the run's expected cost
        (:func:`~office_scheduler.budgets.projection.expected_run_subcents`) would reach
        its limit; nothing fires then (no pause, no alert): the run is only not launched.

        Args:
            agent: the run's agent.
            project_id: the project of the run's task, if any.
            run_id: the run being checked.
            policies: the policies of the run's scopes as the caller already read them
                (``applicable_policies``, in check order); read here when ``None``.

        Returns:
            The first exceeded policy whose action blocks (the caller pauses the agent for
            ``pause_agent``), or ``None`` when the run may launch.
        """
        now = self._clock.now()
        if policies is None:
            policies = await asyncio.to_thread(
                self._store.budgets.applicable_policies,
                agent.workspace_id,
                project_id=project_id,
                agent_id=agent.id,
            )
        expected: int | None = None
        for policy in policies:
            spent = await self._spent(policy, now)
            if not policy.exceeded(spent):
                if not policy.action_on_exceed.blocks:
                    continue
                if expected is None:
                    expected = await asyncio.to_thread(expected_run_subcents, self._store, agent)
                if expected > 0 and policy.exceeded(spent + expected):
                    return BudgetBlock(
                        policy=policy,
                        period=policy.period.key(now),
                        budget_pct=policy.percent_of(spent),
                        spent_subcents=spent,
                        expected_subcents=expected,
                    )
                continue
            period = policy.period.key(now)
            pct = policy.percent_of(spent)
            facts: dict[str, Any] = {"period": period, "pct": pct, "spent": spent}
            fired = await self.notifier.exceeded(policy, agent, run_id=run_id, **facts)
            if not fired and policy.action_on_exceed is BudgetAction.PAUSE_AGENT:
                # The action fired for another agent's run: pause this one too.
                await self.notifier.pause(policy, agent, run_id=run_id, **facts)
            if policy.action_on_exceed.blocks:
                return BudgetBlock(
                    policy=policy, period=period, budget_pct=pct, spent_subcents=spent
                )
        return None

    async def redrive(self, now: datetime) -> int:
        """Queue the coordinator ``budget_alert`` wakes a crash lost (this period's alerts).

        Returns:
            How many wakes were queued (see :meth:`BudgetNotifier.redrive`).
        """
        return await self.notifier.redrive(now)

    async def blocking_policy(self, agent_id: str) -> BudgetPolicy | None:
        """The policy that keeps ``agent_id`` from being resumed, if any.

        Checks the workspace and agent policies (project budgets bind the agent only while
        it works on that project's tasks; the pre-launch check enforces them per run): the
        first whose spend this period reached its limit and whose action blocks.

        Raises:
            NotFoundError: no such agent.
        """
        agent = await asyncio.to_thread(self._store.office.get_agent, agent_id)
        now = self._clock.now()
        policies = await asyncio.to_thread(
            self._store.budgets.applicable_policies,
            agent.workspace_id,
            project_id=None,
            agent_id=agent.id,
        )
        for policy in policies:
            if policy.action_on_exceed.blocks and policy.exceeded(await self._spent(policy, now)):
                return policy
        return None


def _scope(value: object) -> BudgetScope:
    try:
        return BudgetScope(str(value))
    except ValueError:
        allowed = ", ".join(scope.value for scope in BudgetScope)
        raise InvalidInputError(
            f"scope_kind must be one of {allowed}", field="scope_kind"
        ) from None


def _report_window(
    period: str | None, now: datetime
) -> tuple[datetime | None, datetime | None, str]:
    """``(since, until, key)`` of a spend report's period (see :meth:`spend_report`)."""
    if period in (None, "", BudgetPeriod.MONTHLY.value):
        start = month_start(now)
        return start, next_month_start(start), BudgetPeriod.MONTHLY.key(now)
    if period == BudgetPeriod.LIFETIME.value:
        return None, None, BudgetPeriod.LIFETIME.value
    try:
        start = datetime.strptime(f"{period}-01", "%Y-%m-%d").replace(tzinfo=UTC)
        until = next_month_start(start)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(
            "period must be monthly, lifetime or a month YYYY-MM (years 1 to 9998)",
            field="period",
        ) from None
    return start, until, BudgetPeriod.MONTHLY.key(start)
