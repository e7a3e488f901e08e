"""What a crossed budget does: alert wake, inbox items, activity, pause, event.

The coordinator's ``budget_alert`` wake, inbox items, activity entries, the budget pause of
an agent, and the :class:`BudgetThresholdCrossed` event.

Rules (issue 4, specification "Wakeup sources" and "Pre-execution budget check"): one warn
alert per policy and period, to the coordinator of the agent whose run crossed it (its
``reports_to``, else the workspace's ceo/coordinator), never to that agent itself; payload
exactly ``{agent_instance_id, budget_pct}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.budgets import BudgetAction, BudgetPolicy, BudgetScope
from office_scheduler.domain.errors import OfficeError
from office_scheduler.domain.events import BudgetThresholdCrossed, Event, RunEnded
from office_scheduler.domain.models import Agent, WakeRequest
from office_scheduler.domain.status import InboxKind, WakeSource
from office_scheduler.store.facade import Store
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

    async def _activity(self, agent: Agent, kind: str, message: str, **fields: Any) -> None:
        run_id = fields.pop("run_id", None)
        await asyncio.to_thread(
            self._store.runlog.add_activity,
            workspace_id=agent.workspace_id,
            kind=kind,
            message=message,
            now=self._clock.now(),
            agent_id=agent.id,
            run_id=run_id,
            data=fields,
        )

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

    async def alert(
        self,
        policy: BudgetPolicy,
        agent: Agent,
        *,
        period: str,
        pct: int,
        spent: int,
        run_id: int | None,
    ) -> None:
        """The warn threshold was crossed: inbox, activity, coordinator wake, event."""
        data = {**_policy_data(policy, period, pct, spent), "agent_id": agent.id}
        label = scope_label(policy, agent)
        title = f"Budget of {label} at {pct}% ({_money(spent)} of {_money(policy.limit_subcents)})"
        await asyncio.to_thread(
            self._store.runlog.add_inbox_item,
            workspace_id=agent.workspace_id,
            kind=InboxKind.BUDGET_ALERT,
            title=title,
            body=f"Spend this period ({period}) crossed the {policy.alert_threshold_pct}% warning.",
            data=data,
            now=self._clock.now(),
            agent_id=agent.id,
            dedupe_key=f"budget_alert:{policy.id}:{period}",
        )
        boss = await self.coordinator_for(agent)
        woken = None
        if boss is not None and self._enqueue is not None:
            try:
                await self._enqueue(
                    WakeRequest(
                        workspace_id=agent.workspace_id,
                        agent_id=boss.id,
                        source=WakeSource.BUDGET_ALERT,
                        payload={"agent_instance_id": agent.id, "budget_pct": pct},
                        idempotency_key=f"budget_alert:{policy.id}:{period}",
                    )
                )
                woken = boss.id
            except OfficeError:
                log.exception("budget_alert_wake_failed", policy_id=policy.id, coordinator=boss.id)
        await self._activity(
            agent, "budget_alert", title, run_id=run_id, coordinator_id=woken, **data
        )
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

    async def exceeded(
        self,
        policy: BudgetPolicy,
        agent: Agent,
        *,
        period: str,
        pct: int,
        spent: int,
        run_id: int | None,
    ) -> None:
        """The limit was reached (first time this period): apply the policy's action.

        ``pause_agent`` pauses ``agent`` (see :meth:`pause`); ``block_new_runs`` and
        ``notify`` leave an inbox item and an activity entry (the blocking itself happens
        in the pre-launch check).
        """
        if policy.action_on_exceed is BudgetAction.PAUSE_AGENT:
            await self.pause(policy, agent, period=period, pct=pct, spent=spent, run_id=run_id)
        else:
            data = {**_policy_data(policy, period, pct, spent), "agent_id": agent.id}
            label = scope_label(policy, agent)
            effect = (
                "new runs of agents in its scope are skipped"
                if policy.action_on_exceed is BudgetAction.BLOCK_NEW_RUNS
                else "runs continue (notify only)"
            )
            title = f"Budget of {label} exceeded ({pct}%): {effect}"
            await asyncio.to_thread(
                self._store.runlog.add_inbox_item,
                workspace_id=agent.workspace_id,
                kind=InboxKind.BUDGET_EXCEEDED,
                title=title,
                body="Raise the limit to lift the block." if policy.action_on_exceed.blocks else "",
                data=data,
                now=self._clock.now(),
                agent_id=agent.id,
                dedupe_key=f"budget_exceeded:{policy.id}:{period}:{policy.limit_cents}",
            )
            await self._activity(agent, "budget_exceeded", title, run_id=run_id, **data)
            log.warning("budget_exceeded", **data)
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
        """Pause ``agent`` for ``policy`` and end its queued runs (``budget_exceeded``).

        Returns:
            Whether this call paused the agent (false when it was not idle or working).
        """
        now = self._clock.now()
        paused, ended = await asyncio.to_thread(
            self._store.budgets.pause_agent_for_budget, agent.id, now=now
        )
        if not paused:
            return False
        data = {
            **_policy_data(policy, period, pct, spent),
            "agent_id": agent.id,
            "ended_run_ids": [run.id for run in ended],
        }
        label = scope_label(policy, agent)
        title = f"{agent.name} paused: budget of {label} exceeded ({pct}%)"
        await asyncio.to_thread(
            self._store.runlog.add_inbox_item,
            workspace_id=agent.workspace_id,
            kind=InboxKind.BUDGET_EXCEEDED,
            title=title,
            body="Raise the limit, then resume the agent.",
            data=data,
            now=now,
            agent_id=agent.id,
            dedupe_key=f"budget_exceeded:{policy.id}:{period}:{policy.limit_cents}:{agent.id}",
        )
        await self._activity(agent, "budget_agent_paused", title, run_id=run_id, **data)
        log.warning("budget_agent_paused", **data)
        for run in ended:
            await asyncio.to_thread(self._store.runlog.log_run_skip, run, now=now)
            await self._event(RunEnded(run=run))
        return True
