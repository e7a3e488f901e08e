"""Test helpers shipped for users' own tests: a hand-driven clock and a scripted executor."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.status import OutcomeStatus
from office_scheduler.executors.base import ExecutionSink


class FakeClock:
    """A clock that moves only when told to; ``sleep`` returns once the clock has advanced.

    Args:
        start: the initial instant (aware); default 2026-01-05 09:00 UTC.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs an aware start instant")
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        """The current fake instant (UTC)."""
        return self._now.astimezone(UTC)

    def advance(self, delta: timedelta | float) -> datetime:
        """Move the clock forward by ``delta`` (seconds or timedelta); wakes due sleepers."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        if step < timedelta(0):
            raise ValueError("a clock never goes backwards")
        self._now += step
        due = [(at, fut) for at, fut in self._sleepers if at <= self._now]
        self._sleepers = [(at, fut) for at, fut in self._sleepers if at > self._now]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)
        return self.now()

    async def sleep(self, delay: timedelta) -> None:
        """Wait until the clock has been advanced past ``now + delay``."""
        if delay <= timedelta(0):
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + delay, fut))
        await fut


class ScriptedExecutor:
    """An executor that returns scripted outcomes in order and records every launch.

    Args:
        outcomes: outcomes to return, in order; when they run out, ``default`` is used.
        default: builds the outcome for a launch when the script is exhausted.
        output: lines written to the sink for every launch.
    """

    def __init__(
        self,
        outcomes: Iterable[Outcome] = (),
        *,
        default: Callable[[Launch], Outcome] | None = None,
        output: Iterable[str] = (),
    ) -> None:
        self._outcomes = deque(outcomes)
        self._default = default or (lambda _launch: Outcome(status=OutcomeStatus.SUCCEEDED))
        self._output = list(output)
        self.launches: list[Launch] = []

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        """Record ``launch``, emit the scripted output, return the next outcome."""
        self.launches.append(launch)
        await sink.started(4242)
        for line in self._output:
            await sink.output("stdout", line)
        if self._outcomes:
            return self._outcomes.popleft()
        return self._default(launch)
