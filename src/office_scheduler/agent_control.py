"""Pause, resume and stop agents, with their activity entries and run ends.

Semantics (per-agent settings, DESIGN §1; DESIGN §6 step 2):

* **pause** — status ``paused``, ``paused_reason='manual'``. Queued runs stay queued (the
  claim skips paused agents) and a run already claimed finishes with reason
  ``agent_paused`` without launching. A session already running is left to finish.
* **resume** — status ``idle``, ``paused_reason`` cleared, the runs loop is poked so the
  waiting runs are claimed. A paused or stopped agent (whatever ``paused_reason`` says) is
  resumed only when no budget policy still blocks it (409 naming the policy otherwise).
* **stop** — status ``stopped``; its queued runs and scheduled retries are cancelled with
  reason ``agent_paused`` (each logged as ``run_cancelled`` and published as
  :class:`RunEnded`). Resuming a stopped agent makes it ``idle`` again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import ConflictError
from office_scheduler.domain.events import Event, RunEnded
from office_scheduler.domain.models import Agent
from office_scheduler.domain.status import AgentStatus
from office_scheduler.store.activity import SYSTEM_ACTOR
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)

Publish = Callable[[Event], Awaitable[None]]
#: Returns the budget policy that still blocks an agent (``None`` when none does).
BudgetCheck = Callable[[str], Awaitable[object | None]]
#: Agent fields changed together with a status change (keys of ``update_agent``).
Settings = dict[str, object]
#: ``paused_reason`` of an agent the budget engine paused.
BUDGET_PAUSE = "budget_exceeded"


def _policy_label(policy: object) -> str:
    """Name a blocking budget policy for people: its id and scope when it has them."""
    policy_id = getattr(policy, "id", None)
    scope = getattr(policy, "scope_kind", None)
    scope_id = getattr(policy, "scope_id", None)
    if policy_id is None:
        return str(policy)
    scope_text = getattr(scope, "value", scope)
    return f"{policy_id} ({scope_text} {scope_id})" if scope_text else str(policy_id)


class AgentControl:
    """Status changes of agents that other parts of the office react to.

    Args:
        store: the database.
        clock: time source.
        publish: receives :class:`RunEnded` for runs a stop cancelled.
        poke: wakes the runs loop (a resumed agent's waiting runs are due).
    """

    def __init__(
        self, store: Store, clock: Clock, *, publish: Publish, poke: Callable[[], None]
    ) -> None:
        self._store = store
        self._clock = clock
        self._publish = publish
        self._poke = poke

    async def pause(
        self, agent_id: str, *, actor: str = SYSTEM_ACTOR, settings: Settings | None = None
    ) -> Agent:
        """Pause an agent by hand (``paused_reason='manual'``; idempotent).

        ``settings`` (agent fields, as for ``update_agent``) commit with the pause.

        Raises:
            NotFoundError: no such agent.
            InvalidInputError / ConflictError: a bad setting (nothing is changed).
        """
        agent, _ended = await asyncio.to_thread(
            self._store.office.change_agent_status,
            agent_id,
            AgentStatus.PAUSED,
            now=self._clock.now(),
            settings=settings,
        )
        await self._log(agent, "agent_paused", f"{agent.name} was paused", actor)
        return agent

    async def resume(
        self,
        agent_id: str,
        *,
        actor: str = SYSTEM_ACTOR,
        budget_check: BudgetCheck | None = None,
        settings: Settings | None = None,
    ) -> Agent:
        """Resume a paused or stopped agent (status ``idle``; idempotent for idle agents).

        Whatever the reason of the pause (``manual`` too: a budget crossed while an agent
        was paused by hand must not be skipped by resuming it), ``budget_check`` is asked
        first, and nothing changes while it returns a policy.

        Args:
            agent_id: the agent.
            actor: who asks (``user``, ``agent:<id>``, ``system``).
            budget_check: returns the budget policy that still blocks the agent; ``None``
                skips the check.
            settings: agent fields (as for ``update_agent``) committed with the resume.

        Raises:
            NotFoundError: no such agent.
            ConflictError: a budget policy still blocks the agent (field ``status``; the
                message names the policy).
        """
        current = await asyncio.to_thread(self._store.office.get_agent, agent_id)
        if current.status in (AgentStatus.IDLE, AgentStatus.WORKING):
            if not settings:
                return current
            return await asyncio.to_thread(
                self._store.office.update_agent, agent_id, now=self._clock.now(), **settings
            )
        await self.check_budget(current, budget_check)
        agent, _ended = await asyncio.to_thread(
            self._store.office.change_agent_status,
            agent_id,
            AgentStatus.IDLE,
            now=self._clock.now(),
            settings=settings,
        )
        await self._log(agent, "agent_resumed", f"{agent.name} was resumed", actor)
        self._poke()
        return agent

    @staticmethod
    async def check_budget(agent: Agent, budget_check: BudgetCheck | None) -> None:
        """Refuse to resume ``agent`` while ``budget_check`` names a blocking policy.

        Raises:
            ConflictError: naming the policy (field ``status``).
        """
        if budget_check is None:
            return
        policy = await budget_check(agent.id)
        if policy is not None:
            raise ConflictError(
                f"{agent.name} is still over budget policy {_policy_label(policy)}; "
                "raise the limit before resuming",
                field="status",
            )

    async def stop(
        self, agent_id: str, *, actor: str = SYSTEM_ACTOR, settings: Settings | None = None
    ) -> Agent:
        """Stop an agent; its queued runs and scheduled retries are cancelled.

        ``settings`` (agent fields, as for ``update_agent``) commit with the stop.

        Raises:
            NotFoundError: no such agent.
        """
        now = self._clock.now()
        agent, ended = await asyncio.to_thread(
            self._store.office.change_agent_status,
            agent_id,
            AgentStatus.STOPPED,
            now=now,
            settings=settings,
        )
        message = f"{agent.name} was stopped; {len(ended)} pending run(s) cancelled"
        await self._log(agent, "agent_stopped", message, actor, cancelled=[r.id for r in ended])
        for run in ended:
            await asyncio.to_thread(self._store.runlog.log_run_skip, run, now=now)
            await self._publish(RunEnded(run=run))
        return agent

    async def _log(self, agent: Agent, kind: str, message: str, actor: str, **data: object) -> None:
        await asyncio.to_thread(
            self._store.runlog.add_activity,
            workspace_id=agent.workspace_id,
            kind=kind,
            message=message,
            now=self._clock.now(),
            agent_id=agent.id,
            actor=actor,
            data={"status": agent.status.value, "paused_reason": agent.paused_reason, **data},
        )
        log.info(kind, agent_id=agent.id, actor=actor)
