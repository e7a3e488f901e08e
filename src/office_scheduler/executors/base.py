"""The executor contract every launcher implements."""

from __future__ import annotations

from typing import Protocol

from office_scheduler.domain.models import Launch, Outcome


class ExecutionSink(Protocol):
    """Where an executor reports progress while a session lives."""

    async def started(self, pid: int) -> None:
        """Record the session's process id; called before the prompt is sent."""
        ...

    async def output(self, stream: str, line: str) -> None:
        """Record one line of output (``stream`` is ``stdout`` or ``stderr``)."""
        ...


class Executor(Protocol):
    """Runs one agent session to completion and reports its outcome.

    ``run`` never raises for agent failures: they come back as a failed :class:`Outcome`
    with an error family. Cancelling the awaiting task stops the session (process group
    terminated, then killed) before the cancellation propagates.
    """

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        """Launch the session described by ``launch`` and wait for it to end."""
        ...
