"""The cron loop: fires due routine triggers (DESIGN §7).

Each pass fires what is due, then sleeps until the earliest ``next_run_at`` — capped by the
safety tick, so triggers created by another process are seen — or until poked (a trigger
was created or changed here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import structlog

from office_scheduler.clock import Clock
from office_scheduler.scheduler.loop import OwnedLoop

log = structlog.get_logger(__name__)

#: Longest sleep between passes.
SAFETY_TICK = timedelta(seconds=30)
#: Pause after a pass that failed (e.g. the database was unreachable).
FAILURE_PAUSE = timedelta(seconds=5)


class CronLoop(OwnedLoop):
    """Calls ``fire_due`` whenever a trigger may be due; :meth:`poke` after a trigger changed.

    Args:
        fire_due: one pass (the routine firer's ``fire_due``).
        next_due_at: the earliest ``next_run_at`` of a firing trigger, or ``None``.
        clock: time source.
        safety_tick: longest sleep between passes.
    """

    def __init__(
        self,
        *,
        fire_due: Callable[[], Awaitable[object]],
        next_due_at: Callable[[], Awaitable[datetime | None]],
        clock: Clock,
        safety_tick: timedelta = SAFETY_TICK,
    ) -> None:
        super().__init__(name="cron-loop")
        self._fire_due = fire_due
        self._next_due_at = next_due_at
        self._clock = clock
        self._safety_tick = safety_tick

    async def run_pass(self) -> float:
        """Fire what is due; rest until the next due tick, at most the safety tick."""
        try:
            await self._fire_due()
            due = await self._next_due_at()
        except Exception:
            log.exception("cron_pass_failed")
            return FAILURE_PAUSE.total_seconds()
        if due is None:
            return self._safety_tick.total_seconds()
        wait = due - self._clock.now()
        return max(timedelta(0), min(wait, self._safety_tick)).total_seconds()
