"""The shape every periodic loop of the scheduler shares: owned, stoppable, pokeable, resilient.

A pass that raises (typically: the database connection was lost) never ends the loop. The
failure is logged loudly with the traceback, the loop waits a backoff that doubles from
:data:`FIRST_BACKOFF_S` up to :data:`MAX_BACKOFF_S`, and the same pass is tried again; the
pool's pre-ping replaces the dead connections meanwhile. :class:`LoopHealth` keeps what
``/healthz`` reports: the state and the time since the last good pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

#: First pause after a failed pass, in seconds; doubled per further failure.
FIRST_BACKOFF_S = 0.1
#: Longest pause between retries of a failing pass, in seconds.
MAX_BACKOFF_S = 5.0


def backoff_s(failures: int) -> float:
    """The pause after ``failures`` consecutive failed passes (≥ 1), in seconds."""
    return float(min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2.0 ** max(0, failures - 1)))


@dataclass(kw_only=True, slots=True)
class LoopHealth:
    """The state of one loop, for ``/healthz``.

    Attributes:
        state: ``stopped``, ``running``, ``retrying`` (the last pass failed) or ``crashed``.
        last_pass_at: ``time.monotonic()`` of the end of the last good pass, if any.
        failures: consecutive failed passes.
        last_error: ``repr`` of the last failure, if any.
    """

    state: str = "stopped"
    last_pass_at: float | None = None
    failures: int = 0
    last_error: str | None = None

    def passed(self) -> None:
        """Record a good pass."""
        self.state = "running"
        self.last_pass_at = time.monotonic()
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        """Record a failed pass; returns the backoff to wait, in seconds."""
        self.state = "retrying"
        self.failures += 1
        self.last_error = repr(exc)
        return backoff_s(self.failures)

    def snapshot(self) -> dict[str, Any]:
        """``{state, lag_s, failures, last_error}``; ``lag_s`` is seconds since the last pass."""
        lag = None if self.last_pass_at is None else time.monotonic() - self.last_pass_at
        return {
            "state": self.state,
            "lag_s": None if lag is None else round(lag, 3),
            "failures": self.failures,
            "last_error": self.last_error,
        }


def log_failure(loop: str, health: LoopHealth, pause: float) -> None:
    """Log a failed pass: the traceback the first time, one line while it keeps failing."""
    if health.failures == 1:
        log.exception("loop_pass_failed", loop=loop, retry_in_s=pause)
    else:
        log.error(
            "loop_pass_failed",
            loop=loop,
            failures=health.failures,
            error=health.last_error,
            retry_in_s=pause,
        )


class OwnedLoop:
    """A background task that runs :meth:`run_pass`, then rests until poked or due again.

    ``start()`` and ``stop()`` are idempotent. ``stop()`` lets a pass in progress complete
    and then joins the task: cancelling a pass would leave its database call running in a
    worker thread after the database is disposed. A pass that raises is retried with
    backoff (see the module docstring).

    Args:
        name: the asyncio task's name.
    """

    def __init__(self, *, name: str) -> None:
        self._name = name
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.health = LoopHealth()

    @property
    def name(self) -> str:
        """The loop's name (also its asyncio task's)."""
        return self._name

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
            self.health.state = "running"
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
        self.health.state = "stopped"

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                pause = await self.run_pass()
            except Exception as exc:
                pause = self.health.failed(exc)
                log_failure(self._name, self.health, pause)
            else:
                self.health.passed()
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), pause)
