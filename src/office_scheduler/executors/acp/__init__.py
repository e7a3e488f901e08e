"""The ``acp`` executor: drives an agent over the Agent Client Protocol (stdio JSON-RPC).

One run is one prompt turn of one ACP session (DESIGN §9, specification "One-shot session
model"):

1. the configured argv is spawned in its own process group with exactly ``launch.env`` as
   its environment; stderr is read continuously into the run log (never an unread pipe);
2. ``initialize``; then, for a task-bound run with a stored external session id,
   ``session/load`` (history the agent replays is logged as ``acp_replay`` events, not as
   output) — on any error, once, ``session/new`` with an ``acp_session_fallback`` event;
   taskless and first runs use ``session/new``;
   the agent's stdout is read through a bounded line reader (:mod:`.transport`): a line
   over 8 MiB ends the run (family ``crash``), lines that are not JSON-RPC objects are
   dropped and counted in one ``acp_protocol_garbage`` event;
3. ``session/prompt`` with the wake prompt; agent messages and thoughts become
   ``output.agent`` / ``output.thought`` lines, tool calls and plans ``acp_tool_call``,
   ``acp_tool_call_update`` and ``acp_plan`` events; permission requests are answered from
   the agent's policy (:mod:`.policy`) and logged as ``acp_permission`` events;
4. the wall (``timeout_s``) and inactivity (``inactivity_timeout_s``) deadlines send
   ``session/cancel``, wait a short grace, then kill the process group;
5. the stop reason becomes the outcome: ``end_turn`` → succeeded; ``max_tokens`` and
   ``max_turn_requests`` → failed, family ``timeout`` (the turn ran out of budget);
   ``refusal`` → failed, family ``refusal``; ``cancelled`` → ``timeout`` when our deadline
   asked for it, else a cancelled outcome. A JSON-RPC error whose text is a rate limit →
   family ``rate_limit`` (the pipeline parses the reset with ``office_scheduler.retry``);
   ``Authentication required`` → ``auth``; any other error, a crash or a broken
   connection → ``crash``.

The ``acp`` package (about half a second to import) is only imported when a session runs.
"""

from __future__ import annotations

from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.executors.acp.transport import LINE_LIMIT
from office_scheduler.executors.base import ExecutionSink


class AcpExecutor:
    """Runs ``launch.config.argv`` as an ACP agent and reports the turn's outcome.

    Args:
        cancel_grace_s: after ``session/cancel``, how long the turn may take to end.
        kill_grace_s: time between SIGTERM and SIGKILL of the process group, and the
            longest wait for the agent to exit after its stdin was closed.
        line_limit: longest stdout line (one JSON-RPC message) accepted from the agent,
            in bytes (default 8 MiB); a longer line ends the run, family ``crash``.
    """

    def __init__(
        self,
        *,
        cancel_grace_s: float = 2.0,
        kill_grace_s: float = 2.0,
        line_limit: int = LINE_LIMIT,
    ) -> None:
        self._cancel_grace_s = cancel_grace_s
        self._kill_grace_s = kill_grace_s
        self._line_limit = line_limit

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        """Launch the session described by ``launch`` and wait for its turn to end.

        Args:
            launch: argv, environment, working directory, prompt, the session to resume
                (``resume_session_id``/``resume_cwd``) and the agent's permission policy.
            sink: receives the pid before anything is sent, then output lines and (when it
                is an :class:`~office_scheduler.executors.base.EventSink`) run events.

        Returns:
            The outcome; agent and configuration failures come back as failed outcomes,
            never as exceptions. ``external_session_id`` is the session that ran.

        Raises:
            asyncio.CancelledError: when the awaiting task is cancelled, after the session
                was cancelled and its process group killed.
        """
        from office_scheduler.executors.acp.session import run_session

        return await run_session(
            launch,
            sink,
            cancel_grace_s=self._cancel_grace_s,
            kill_grace_s=self._kill_grace_s,
            line_limit=self._line_limit,
        )


__all__ = ["AcpExecutor"]
