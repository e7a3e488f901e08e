"""The maintenance loop: recovers runs whose lease expired (their process died)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import structlog

from office_scheduler.clock import Clock
from office_scheduler.config import Settings
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)


class MaintenanceLoop:
    """Runs :meth:`tick` every ``settings.maintenance_interval``.

    Args:
        alive: returns the runs this process is executing; their leases are never
            recovered here even when the wall clock jumped past them.
    """

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        settings: Settings,
        alive: Callable[[], Sequence[int]] = list,
    ) -> None:
        self._alive = alive
        self._store = store
        self._clock = clock
        self._settings = settings
        self._task: asyncio.Task[None] | None = None

    async def tick(self) -> list[int]:
        """One maintenance pass; returns the ids of runs put back to the queue."""
        recovered = await asyncio.to_thread(
            self._store.queue.recover_expired_leases,
            now=self._clock.now(),
            alive=self._alive(),
        )
        if recovered:
            log.warning("stale_claims_recovered", run_ids=recovered)
        return recovered

    def start(self) -> asyncio.Task[None]:
        """Start the loop (idempotent); returns its task."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="maintenance-loop")
        return self._task

    async def stop(self) -> None:
        """Cancel the loop and wait for it to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self._settings.maintenance_interval.total_seconds())
