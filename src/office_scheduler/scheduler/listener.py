"""The wake listener loop: pokes the runs loop when another process took in a wake.

PostgreSQL only (DESIGN §7, §10). Intake in any process sends a notification when it commits
a wake; this loop holds a dedicated ``LISTEN`` connection and pokes the local runs loop on
each one, so an idle process claims a wake taken in elsewhere within milliseconds instead of
at its next safety tick (which stays as the fallback). A lost connection is reopened with
backoff, and the runs loop is poked once after every (re)connect because notifications sent
while disconnected are gone.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from office_scheduler.intake.service import Poke
from office_scheduler.scheduler.loop import OwnedLoop
from office_scheduler.store.notify import WakeListener, earliest_due

log = structlog.get_logger(__name__)

#: How long one wait for notifications lasts before the loop checks whether to stop.
WAIT_S = 1.0


class WakeListenerLoop(OwnedLoop):
    """Listens for wake notifications and calls ``poke`` for each batch.

    A batch pokes with the earliest instant its payloads name (``None`` when one is due
    now), so a wake held for coalescing only moves the runs loop's next look forward.

    Args:
        listener: the dedicated listening connection.
        poke: the runs loop's ``poke``.
    """

    def __init__(self, *, listener: WakeListener, poke: Poke) -> None:
        super().__init__(name="wake-listener")
        self._listener = listener
        self._poke = poke
        self.received = 0

    @property
    def connected(self) -> bool:
        """Whether the listening connection is up (it reconnects on its own after a loss)."""
        return self._listener.connected

    async def run_pass(self) -> float:
        """Connect when needed, then wait up to :data:`WAIT_S` for notifications."""
        try:
            if not self._listener.connected:
                await self._listener.connect()
                log.info("wake_listener_connected", channel=self._listener.channel)
                self._poke()  # whatever was notified while we were away
                return 0
            payloads = await self._listener.wait(WAIT_S)
        except Exception:
            await self._listener.close()
            raise
        if payloads:
            self.received += len(payloads)
            self._poke(earliest_due(payloads))
        return 0

    async def stop(self) -> None:
        """Stop waiting at once and close the connection (idempotent).

        Cancelling is safe here: the wait is a coroutine on this event loop, not a
        database call in a worker thread.
        """
        task = self._task
        if task is not None:
            self._stopping.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._task = None
        self.health.state = "stopped"
        await self._listener.close()
