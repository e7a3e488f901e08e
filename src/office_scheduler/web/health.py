"""Which agents are failing, in words for the dashboard (cards, agent page).

An idle or working agent whose newest attempted run failed is shown ``failing · FAMILY``
instead of its status, with the cleaned first line of the error, since when and how many
runs in a row (see :mod:`office_scheduler.store.agent_health`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from office_scheduler.domain.models import Agent, Run
from office_scheduler.domain.status import AgentStatus, ErrorFamily, RunReason, RunStatus
from office_scheduler.error_text import first_error_line
from office_scheduler.retry import classify_error
from office_scheduler.service import Service
from office_scheduler.store.agent_health import STREAK_LIMIT, FailingStreak
from office_scheduler.web.sources import dashboard_store


@dataclass(frozen=True, slots=True)
class AgentHealth:
    """A failing agent, as the dashboard shows it.

    Attributes:
        family: the last error's family (``auth``, ``rate_limit``, ...).
        message: the cleaned first line of the last error.
        since: when the first failure in a row happened (UTC).
        runs: runs failed in a row (``50+`` past :data:`STREAK_LIMIT`).
        run_id: the newest failed run.
    """

    family: str
    message: str
    since: datetime
    runs: str
    run_id: int

    @property
    def label(self) -> str:
        """``failing · auth``."""
        return f"failing · {self.family}"


def family_of(streak: FailingStreak) -> str:
    """The error family: as recorded by the retry step, else read from the error text."""
    if streak.family:
        return streak.family
    if streak.reason is RunReason.CONFIG_ERROR:
        return ErrorFamily.CONFIG.value
    return classify_error(streak.error).value


def run_error_family(run: Run, events: Sequence[object]) -> str | None:
    """The error family of a failed or retrying run (``None`` for any other run).

    ``events`` are the run's events (objects with ``kind`` and ``data``): the newest
    ``retry_scheduled`` one names the family its retry step recorded.
    """
    if run.status not in (RunStatus.FAILED, RunStatus.SCHEDULED_RETRY) or not run.error:
        return None
    for event in reversed(list(events)):
        data = getattr(event, "data", None)
        if getattr(event, "kind", "") == "retry_scheduled" and isinstance(data, dict):
            family = data.get("error_family")
            if family:
                return str(family)
    if run.reason is RunReason.CONFIG_ERROR:
        return ErrorFamily.CONFIG.value
    return classify_error(run.error).value


async def failing_agents(service: Service, agents: Sequence[Agent]) -> dict[str, AgentHealth]:
    """Agent id → :class:`AgentHealth` for the agents of ``agents`` that are failing.

    Paused and stopped agents are left out: their status already says they do not run.
    """
    running = [a.id for a in agents if a.status in (AgentStatus.IDLE, AgentStatus.WORKING)]
    if not running:
        return {}
    streaks = await asyncio.to_thread(dashboard_store(service).failing, running)
    return {
        agent_id: AgentHealth(
            family=family_of(streak),
            message=first_error_line(streak.error),
            since=streak.since,
            runs=f"{streak.runs}+" if streak.runs >= STREAK_LIMIT else str(streak.runs),
            run_id=streak.run_id,
        )
        for agent_id, streak in streaks.items()
    }
