"""The notification loop: posts the outbox's due deliveries (see ``notifications.service``).

Every scheduler process runs it; claims keep two processes from making the same attempt.
It rests until the earliest due delivery, at most :data:`SAFETY_TICK`, so deliveries queued
by another process or by a request are picked up within that time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from office_scheduler.clock import Clock
from office_scheduler.scheduler.loop import OwnedLoop

#: Longest rest between passes.
SAFETY_TICK = timedelta(seconds=2)


class NotificationLoop(OwnedLoop):
    """Calls ``deliver_due`` whenever a delivery may be due.

    Args:
        deliver_due: one pass (``NotificationService.deliver_due``).
        next_due_at: the earliest due time of a pending delivery, or ``None``.
        clock: time source.
        safety_tick: longest rest between passes.
    """

    def __init__(
        self,
        *,
        deliver_due: Callable[[], Awaitable[object]],
        next_due_at: Callable[[], Awaitable[datetime | None]],
        clock: Clock,
        safety_tick: timedelta = SAFETY_TICK,
    ) -> None:
        super().__init__(name="notification-loop")
        self._deliver_due = deliver_due
        self._next_due_at = next_due_at
        self._clock = clock
        self._safety_tick = safety_tick

    async def run_pass(self) -> float:
        """Deliver what is due; rest until the next due delivery, at most the safety tick."""
        await self._deliver_due()
        due = await self._next_due_at()
        if due is None:
            return self._safety_tick.total_seconds()
        wait = due - self._clock.now()
        return max(timedelta(0), min(wait, self._safety_tick)).total_seconds()
