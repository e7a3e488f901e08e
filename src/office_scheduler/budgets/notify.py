"""What a crossed budget does: alert wake, inbox items, activity, pause, event.

The coordinator's ``budget_alert`` wake, inbox items, activity entries, the budget pause of
an agent, and the :class:`BudgetThresholdCrossed` event.

Rules (specification "Wakeup sources" and "Pre-execution budget check"): one warn
alert per policy and period, to the coordinator of the agent whose run crossed it (its
``reports_to``, else the workspace's ceo/coordinator), never to that agent itself; payload
exactly ``{agent_instance_id, budget_pct}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.budgets import BudgetAction, BudgetPolicy, BudgetScope
from office_scheduler.domain.errors import OfficeError
from office_scheduler.domain.events import BudgetThresholdCrossed, Event, RunEnded
from office_scheduler.domain.models import Agent, WakeRequest
from office_scheduler.domain.status import InboxKind, WakeSource
from office_scheduler.store.activity import activity_values
from office_scheduler.store.budget_marks import BudgetNotice, PauseOutcome, alert_key
from office_scheduler.store.facade import Store
from office_scheduler.store.inbox import inbox_values
from office_scheduler.store.queue import IntakeResult

log = structlog.get_logger(__name__)

Publish = Callable[[Event], Awaitable[None]]
Enqueue = Callable[[WakeRequest], Awaitable[IntakeResult]]


def _money(subcents: int) -> str:
    return f"${subcents / 10_000:,.2f}"


def scope_label(policy: BudgetPolicy, agent: Agent) -> str:
    """Words for a policy's scope in titles (``the workspace``, ``project P``, ``agent ann``)."""
    if policy.scope_kind is BudgetScope.WORKSPACE:
        return "the workspace"
    if policy.scope_kind is BudgetScope.AGENT and policy.scope_id == agent.id:
        return f"agent {agent.name}"
    return f"{policy.scope_kind.value} {policy.scope_id}"


def _policy_data(policy: BudgetPolicy, period: str, pct: int, spent: int) -> dict[str, Any]:
    return {
        "policy_id": policy.id,
        "scope_kind": policy.scope_kind.value,
        "scope_id": policy.scope_id,
        "period": period,
        "budget_pct": pct,
        "spent_subcents": spent,
        "limit_cents": policy.limit_cents,
        "action_on_exceed": policy.action_on_exceed.value,
    }


class BudgetNotifier:
    """Sends what a budget crossing owes people, the coordinator and the event bus.

    Args:
        enqueue: intake, for the ``budget_alert`` wake (no wake without it).
        publish: the event bus (budget events, and ``RunEnded`` for runs ended by a pause).
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
        self._enqueue = enqueue
        self._publish = publish

    async def _event(self, event: Event) -> None:
        if self._publish is not None:
            await self._publish(event)

    async def coordinator_for(self, agent: Agent) -> Agent | None:
        """Who hears about ``agent``'s budget.

        Its ``reports_to``, else the workspace's first ceo/coordinator; ``None`` when that
        is the agent itself or nobody.
        """
        boss: Agent | None = None
        if agent.reports_to is not None:
            boss = await asyncio.to_thread(self._store.office.find_agent, agent.reports_to)
        if boss is None:
            boss = await asyncio.to_thread(self._store.queue.coordinator_of, agent.workspace_id)
        if boss is None or boss.id == agent.id:
            return None
        return boss

    def _notice(
        self,
        agent: Agent,
        *,
        inbox_kind: InboxKind,
        title: str,
        body: str,
        dedupe_key: str,
        activity_kind: str,
        run_id: int | None,
        data: dict[str, Any],
    ) -> BudgetNotice:
        now = self._clock.now()
        return BudgetNotice(
            inbox=inbox_values(
                workspace_id=agent.workspace_id,
                kind=inbox_kind,
                title=title,
                body=body,
                data=data,
                now=now,
                agent_id=agent.id,
                dedupe_key=dedupe_key,
            ),
            activity=activity_values(
                workspace_id=agent.workspace_id,
                kind=activity_kind,
                message=title,
                now=now,
                agent_id=agent.id,
                run_id=run_id,
                data=data,
            ),
        )

    async def alert(
        self,
        policy: BudgetPolicy,
        agent: Agent,
        *,
        period: str,
        pct: int,
        spent: int,
        run_id: int | None,
    ) -> bool:
        """The warn threshold was crossed: inbox, activity, coordinator wake, event.

        The period's marker, the inbox item and the activity entry commit together (once
        per policy and period); the coordinator's wake (key
        ``budget_alert:<policy_id>:<period>``) follows and is re-driven by :meth:`redrive`
        should the process die in between.

        Returns:
            Whether this call fired the alert (false when the period's alert had fired).
        """
        boss = await self.coordinator_for(agent)
        data = {**_policy_data(policy, period, pct, spent), "agent_id": agent.id}
        label = scope_label(policy, agent)
        title = f"Budget of {label} at {pct}% ({_money(spent)} of {_money(policy.limit_subcents)})"
        key = alert_key(policy.id, period)
        notice = self._notice(
            agent,
            inbox_kind=InboxKind.BUDGET_ALERT,
            title=title,
            body=f"Spend this period ({period}) crossed the {policy.alert_threshold_pct}% warning.",
            dedupe_key=key,
            activity_kind="budget_alert",
            run_id=run_id,
            data={**data, "coordinator_id": None if boss is None else boss.id},
        )
        fired = await asyncio.to_thread(self._store.budgets.record_alert, policy.id, period, notice)
        if not fired:
            return False
        woken = await self._wake_coordinator(boss, agent, key=key, pct=pct)
        log.warning("budget_alert", coordinator_id=woken, **data)
        await self._event(
            BudgetThresholdCrossed(
                policy=policy,
                agent_id=agent.id,
                run_id=run_id,
                period=period,
                budget_pct=pct,
                exceeded=False,
            )
        )
        return True

    async def _wake_coordinator(
        self, boss: Agent | None, agent: Agent, *, key: str, pct: int
    ) -> str | None:
        """Queue the ``budget_alert`` wake of ``boss`` (its id, or ``None`` when none was)."""
        if boss is None or self._enqueue is None:
            return None
        try:
            await self._enqueue(
                WakeRequest(
                    workspace_id=agent.workspace_id,
                    agent_id=boss.id,
                    source=WakeSource.BUDGET_ALERT,
                    payload={"agent_instance_id": agent.id, "budget_pct": pct},
                    idempotency_key=key,
                )
            )
        except OfficeError:
            log.exception("budget_alert_wake_failed", key=key, coordinator=boss.id)
            return None
        return boss.id

    async def redrive(self, now: datetime) -> int:
        """Queue the coordinator wakes of this period's alerts that a crash lost.

        Finds policies whose current period's alert fired (its inbox item exists) while no
        wakeup request carries the key ``budget_alert:<policy_id>:<period>``, and queues
        that wake to the coordinator of the agent the inbox item names. Called by
        ``Service.start`` and every maintenance pass.

        Returns:
            How many wakes were queued.
        """
        if self._enqueue is None:
            return 0
        lost = await asyncio.to_thread(self._store.budgets.undelivered_alerts, now=now)
        queued = 0
        for policy, item in lost:
            agent = None
            if item.agent_id is not None:
                agent = await asyncio.to_thread(self._store.office.find_agent, item.agent_id)
            if agent is None:
                continue
            pct = item.data.get("budget_pct")
            boss = await self.coordinator_for(agent)
            key = alert_key(policy.id, str(policy.alerted_period))
            if await self._wake_coordinator(
                boss, agent, key=key, pct=pct if isinstance(pct, int) else 0
            ):
                log.warning("budget_alert_wake_redriven", policy_id=policy.id, key=key)
                queued += 1
        return queued

    async def exceeded(
        self,
        policy: BudgetPolicy,
        agent: Agent,
        *,
        period: str,
        pct: int,
        spent: int,
        run_id: int | None,
        mark: bool = True,
    ) -> bool:
        """The limit was reached (first time this period): apply the policy's action.

        ``pause_agent`` pauses ``agent`` (an agent already paused or stopped stays so, and
        people still get the ``budget.exceeded`` item); ``block_new_runs`` and ``notify``
        leave an inbox item and an activity entry (the blocking itself happens in the
        pre-launch check). The marker, pause, inbox item and activity commit together.

        Args:
            policy: the policy whose limit was reached.
            agent: the agent whose run reached it (or the one to pause).
            period: the period key (``YYYY-MM`` UTC or ``lifetime``).
            pct: spend as a percentage of the limit.
            spent: spend of the period in subcents.
            run_id: the run that crossed it, if any.
            mark: set the period's ``exceeded_period`` marker first (nothing happens when
                it was set already); false when only this agent's pause is still owed.

        Returns:
            Whether anything was done.
        """
        action = policy.action_on_exceed
        data = {**_policy_data(policy, period, pct, spent), "agent_id": agent.id}
        label = scope_label(policy, agent)

        def notice(outcome: PauseOutcome) -> BudgetNotice | None:
            facts = {**data, "ended_run_ids": [run.id for run in outcome.ended]}
            key = f"budget_exceeded:{policy.id}:{period}:{policy.limit_cents}"
            if action is not BudgetAction.PAUSE_AGENT:
                effect = (
                    "new runs of agents in its scope are skipped"
                    if action is BudgetAction.BLOCK_NEW_RUNS
                    else "runs continue (notify only)"
                )
                return self._notice(
                    agent,
                    inbox_kind=InboxKind.BUDGET_EXCEEDED,
                    title=f"Budget of {label} exceeded ({pct}%): {effect}",
                    body="Raise the limit to lift the block." if action.blocks else "",
                    dedupe_key=key,
                    activity_kind="budget_exceeded",
                    run_id=run_id,
                    data=data,
                )
            if outcome.paused:
                return self._notice(
                    agent,
                    inbox_kind=InboxKind.BUDGET_EXCEEDED,
                    title=f"{agent.name} paused: budget of {label} exceeded ({pct}%)",
                    body="Raise the limit, then resume the agent.",
                    dedupe_key=f"{key}:{agent.id}",
                    activity_kind="budget_agent_paused",
                    run_id=run_id,
                    data=facts,
                )
            if not mark:
                return None
            return self._notice(
                agent,
                inbox_kind=InboxKind.BUDGET_EXCEEDED,
                title=(
                    f"Budget of {label} exceeded ({pct}%); {agent.name} was already "
                    f"{outcome.status} and cannot resume while it is over budget"
                ),
                body="Raise the limit before resuming the agent.",
                dedupe_key=f"{key}:{agent.id}",
                activity_kind="budget_exceeded",
                run_id=run_id,
                data={**facts, "agent_status": outcome.status},
            )

        result = await asyncio.to_thread(
            self._store.budgets.record_exceeded,
            policy.id,
            agent.id,
            period=period,
            now=self._clock.now(),
            mark=mark,
            pause=action is BudgetAction.PAUSE_AGENT,
            notice=notice,
        )
        if not result.fired or (not mark and not result.pause.paused):
            return False
        log.warning("budget_exceeded", paused=result.pause.paused, **data)
        now = self._clock.now()
        for run in result.pause.ended:
            await asyncio.to_thread(self._store.runlog.log_run_skip, run, now=now)
            await self._event(RunEnded(run=run))
        if mark:
            await self._event(
                BudgetThresholdCrossed(
                    policy=policy,
                    agent_id=agent.id,
                    run_id=run_id,
                    period=period,
                    budget_pct=pct,
                    exceeded=True,
                )
            )
        return True

    async def pause(
        self,
        policy: BudgetPolicy,
        agent: Agent,
        *,
        period: str,
        pct: int,
        spent: int,
        run_id: int | None,
    ) -> bool:
        """Pause ``agent`` for ``policy`` (whose action already fired for another agent).

        The pause, its queued runs' ends (``budget_exceeded``), inbox item and activity
        commit together.

        Returns:
            Whether this call paused the agent (false when it was not idle or working).
        """
        return await self.exceeded(
            policy, agent, period=period, pct=pct, spent=spent, run_id=run_id, mark=False
        )
