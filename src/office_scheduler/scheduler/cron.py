"""The cron loop: fires due routine triggers (DESIGN §7).

Each pass fires what is due, then sleeps until the earliest ``next_run_at`` — capped by the
safety tick, so triggers created by another process are seen — or until poked (a trigger
was created or changed here).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import structlog

from office_scheduler.clock import Clock

log = structlog.get_logger(__name__)

#: Longest sleep between passes.
SAFETY_TICK = timedelta(seconds=30)
#: Pause after a pass that failed (e.g. the database was unreachable).
FAILURE_PAUSE = timedelta(seconds=5)


class CronLoop:
    """Owns the task that calls ``fire_due`` whenever a trigger may be due.

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
        self._fire_due = fire_due
        self._next_due_at = next_due_at
        self._clock = clock
        self._safety_tick = safety_tick
        self._poked = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """Make the loop re-read the schedule now (after a trigger changed)."""
        self._poked.set()

    def start(self) -> asyncio.Task[None]:
        """Start the loop (idempotent); returns its task."""
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.create_task(self._loop(), name="cron-loop")
        return self._task

    async def stop(self) -> None:
        """Stop the loop and wait until it has ended (idempotent).

        A pass in progress completes first: cancelling it would leave its database call
        running in a worker thread after the database is disposed.
        """
        if self._task is not None:
            self._stopping.set()
            self._poked.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _pause(self) -> timedelta:
        try:
            await self._fire_due()
            due = await self._next_due_at()
        except Exception:
            log.exception("cron_pass_failed")
            return FAILURE_PAUSE
        if due is None:
            return self._safety_tick
        wait = due - self._clock.now()
        return max(timedelta(0), min(wait, self._safety_tick))

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._poked.clear()
            pause = await self._pause()
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poked.wait(), pause.total_seconds())
