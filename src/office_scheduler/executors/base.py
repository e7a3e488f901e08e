"""The executor contract every launcher implements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunReason


def config_failure(message: str) -> Outcome:
    """A ``failed`` outcome of family ``config``: retrying cannot fix it."""
    return Outcome(
        status=OutcomeStatus.FAILED,
        reason=RunReason.AGENT_FAILED,
        error_family=ErrorFamily.CONFIG,
        message=message,
    )


class ExecutionSink(Protocol):
    """Where an executor reports progress while a session lives."""

    async def started(self, pid: int) -> None:
        """Record the session's process id; called before the prompt is sent."""
        ...

    async def output(self, stream: str, line: str) -> None:
        """Record one line of output (``stream`` is ``stdout`` or ``stderr``)."""
        ...


@runtime_checkable
class EventSink(ExecutionSink, Protocol):
    """A sink that also takes structured run events (the ``acp`` executor uses them).

    Executors test for it with ``isinstance`` and fall back to :meth:`ExecutionSink.output`
    on a plain sink.
    """

    async def event(self, kind: str, message: str, data: Mapping[str, Any]) -> None:
        """Record one run event (``kind`` such as ``acp_tool_call``) in output order."""
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
