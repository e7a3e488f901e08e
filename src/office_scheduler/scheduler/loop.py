"""The shape every periodic loop of the scheduler shares: owned, stoppable, pokeable."""

from __future__ import annotations

import asyncio
import contextlib


class OwnedLoop:
    """A background task that runs :meth:`run_pass`, then rests until poked or due again.

    ``start()`` and ``stop()`` are idempotent. ``stop()`` lets a pass in progress complete
    and then joins the task: cancelling a pass would leave its database call running in a
    worker thread after the database is disposed.

    Args:
        name: the asyncio task's name.
    """

    def __init__(self, *, name: str) -> None:
        self._name = name
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def run_pass(self) -> float:
        """Do one pass; returns how many seconds to rest before the next one."""
        raise NotImplementedError

    def poke(self) -> None:
        """End the current rest now, so the next pass starts at once."""
        self._wake.set()

    def start(self) -> asyncio.Task[None]:
        """Start the loop (idempotent); returns its task."""
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.create_task(self._loop(), name=self._name)
        return self._task

    async def stop(self) -> None:
        """Stop the loop after its current pass and wait until it has ended (idempotent)."""
        if self._task is not None:
            self._stopping.set()
            self._wake.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            pause = await self.run_pass()
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), pause)
