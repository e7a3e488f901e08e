"""One ACP agent process driven through one session turn (see :mod:`..acp`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import acp
from acp import schema

from office_scheduler import __version__
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.execution import Launch, Outcome, Usage
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunReason
from office_scheduler.error_text import strip_ansi
from office_scheduler.executors.acp.client import OfficeClient, Outbox, merge_meta, parse_result
from office_scheduler.executors.acp.policy import PermissionPolicy
from office_scheduler.executors.acp.tools import office_mcp
from office_scheduler.executors.acp.transport import LINE_LIMIT as STDOUT_LIMIT
from office_scheduler.executors.acp.transport import BoundedTransport
from office_scheduler.executors.base import ExecutionSink, config_failure
from office_scheduler.executors.messages import clean_message
from office_scheduler.executors.parsers import clamp_tokens
from office_scheduler.executors.process import LineSplitter, describe_exit, signal_group
from office_scheduler.retry import classify_error, is_rate_limited

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

#: Longest stderr line handed to the sink, in bytes.
LINE_LIMIT = 64 * 1024
#: Bytes of stderr kept for error messages.
STDERR_TAIL = 4096
_READ_SIZE = 65536
#: JSON-RPC error code of ``Authentication required``.
AUTH_REQUIRED = -32000


async def run_session(
    launch: Launch,
    sink: ExecutionSink,
    *,
    cancel_grace_s: float,
    kill_grace_s: float,
    line_limit: int = STDOUT_LIMIT,
) -> Outcome:
    """Spawn the agent, run one prompt turn and map how it ended to an :class:`Outcome`.

    ``line_limit`` is the longest stdout line (bytes) accepted from the agent.

    Raises:
        asyncio.CancelledError: the awaiting task was cancelled; the session was sent
            ``session/cancel`` and the process group was killed first.
    """
    try:
        policy = PermissionPolicy.from_json(launch.permission_policy)
    except InvalidInputError as exc:
        return config_failure(f"agent {launch.agent_id}: {exc}")
    if not launch.config.argv:
        return config_failure(f"executor {launch.config.name!r} has no command (empty argv)")
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.config.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=launch.env,
            cwd=launch.cwd,
            start_new_session=True,
            # Our transport reads in chunks; a small reader limit keeps the pipe buffer small.
            limit=_READ_SIZE,
        )
    except OSError as exc:
        return config_failure(f"cannot start ACP agent {launch.config.argv[0]!r}: {exc}")
    driver = _Driver(proc, sink, launch, policy, cancel_grace_s, kill_grace_s, line_limit)
    return await driver.run()


class _Driver:
    """State of one agent process: connection, pumps, deadlines, the turn's result."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        sink: ExecutionSink,
        launch: Launch,
        policy: PermissionPolicy,
        cancel_grace_s: float,
        kill_grace_s: float,
        line_limit: int,
    ) -> None:
        self._proc = proc
        self._sink = sink
        self._launch = launch
        self._config = launch.config
        self._cancel_grace = cancel_grace_s
        self._kill_grace = kill_grace_s
        self._loop = asyncio.get_running_loop()
        self._last_activity = self._loop.time()
        self._stderr_tail = b""
        self._outbox = Outbox(sink)
        self._client = OfficeClient(self._outbox, policy, self._touch)
        self._conn: ClientSideConnection | None = None
        self._session_id: str | None = None
        self._resumed = False
        self._line_limit = line_limit
        self._transport: BoundedTransport | None = None

    def _touch(self) -> None:
        self._last_activity = self._loop.time()

    async def run(self) -> Outcome:
        """Drive the session to its end and build the outcome."""
        started = self._loop.time()
        writer = asyncio.create_task(self._outbox.run())
        pump: asyncio.Task[None] | None = None
        work: asyncio.Task[schema.PromptResponse] | None = None
        try:
            await self._sink.started(self._proc.pid)
            assert self._proc.stdin is not None
            assert self._proc.stdout is not None
            assert self._proc.stderr is not None
            pump = asyncio.create_task(self._pump_stderr(self._proc.stderr))
            client = cast(acp.Client, self._client)
            self._transport = BoundedTransport(
                self._proc.stdout, self._proc.stdin, touch=self._touch, limit=self._line_limit
            )
            self._conn = acp.connect_to_agent(client, self._transport)
            work = asyncio.create_task(self._converse(self._conn))
            deadline = await self._supervise(work, started)
            if deadline is not None:
                await self._stop(work)
            outcome = self._outcome(work, deadline)
        except asyncio.CancelledError:
            if work is not None:
                await self._stop(work)
            raise
        finally:
            await self._finish(work, pump, writer)
        return replace(outcome, exit_code=self._proc.returncode)

    async def _converse(self, conn: ClientSideConnection) -> schema.PromptResponse:
        """Run ``initialize``, ``session/load`` or ``session/new``, then ``session/prompt``."""
        launch = self._launch
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=schema.ClientCapabilities(),
            client_info=schema.Implementation(name="office-scheduler", version=__version__),
        )
        if launch.task_id is not None and launch.resume_session_id:
            await self._load(conn, init, launch.resume_session_id)
        prompt = launch.prompt
        if self._session_id is None:
            # A delta prompt assumes the resumed history; a new session needs the full one.
            prompt = launch.full_prompt or launch.prompt
            created = await conn.new_session(cwd=launch.cwd, mcp_servers=office_mcp(launch))
            self._session_id = created.session_id
            self._outbox.event(
                "acp_session_new",
                f"new session {created.session_id}",
                session_id=created.session_id,
                cwd=launch.cwd,
            )
        response = await conn.prompt(session_id=self._session_id, prompt=[acp.text_block(prompt)])
        self._client.flush()
        return response

    async def _load(
        self, conn: ClientSideConnection, init: schema.InitializeResponse, stored: str
    ) -> None:
        """Resume ``stored`` with ``session/load``; on any problem note the fallback."""
        launch = self._launch
        capabilities = init.agent_capabilities
        problem: str | None = None
        if capabilities is None or not capabilities.load_session:
            problem = "the agent does not support session/load"
        elif launch.resume_cwd and launch.resume_cwd != launch.cwd:
            problem = f"the working directory changed (was {launch.resume_cwd})"
        else:
            self._client.replaying = True
            try:
                await conn.load_session(
                    cwd=launch.cwd, session_id=stored, mcp_servers=office_mcp(launch)
                )
            except Exception as exc:  # any failure: fall back once to session/new
                problem = f"session/load failed: {_error_text(exc)}"
            finally:
                self._client.flush()
                self._client.replaying = False
        if problem is None:
            self._session_id, self._resumed = stored, True
            self._outbox.event(
                "acp_session_loaded",
                f"resumed session {stored} ({self._client.replayed} replayed entries)",
                session_id=stored,
                replayed=self._client.replayed,
            )
            return
        self._outbox.event(
            "acp_session_fallback",
            f"could not resume session {stored}: {problem}; starting a new session",
            session_id=stored,
            error=problem,
            full_prompt=launch.full_prompt is not None,
        )

    async def _supervise(
        self, work: asyncio.Task[schema.PromptResponse], started: float
    ) -> RunReason | None:
        """Wait for the turn to end; return the deadline that passed first, if one did."""
        wall_deadline = started + self._config.timeout_s
        while not work.done():
            now = self._loop.time()
            idle_deadline = self._last_activity + self._config.inactivity_timeout_s
            if now >= wall_deadline:
                return RunReason.TIMEOUT
            if now >= idle_deadline:
                return RunReason.INACTIVITY_TIMEOUT
            await asyncio.wait({work}, timeout=min(wall_deadline, idle_deadline) - now)
        return None

    async def _stop(self, work: asyncio.Task[schema.PromptResponse]) -> None:
        """``session/cancel``, a short grace for the turn to end, then kill the group."""
        if not work.done() and self._conn is not None and self._session_id is not None:
            # A dead or stuck connection is fine: the group kill follows anyway.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self._conn.cancel(session_id=self._session_id), self._cancel_grace
                )
                await asyncio.wait({work}, timeout=self._cancel_grace)
        await self._terminate()

    async def _terminate(self) -> None:
        if self._proc.returncode is not None:
            signal_group(self._proc.pid, signal.SIGKILL)  # leftover grandchildren
            return
        signal_group(self._proc.pid, signal.SIGTERM)
        if not await self._wait_exit(self._kill_grace):
            signal_group(self._proc.pid, signal.SIGKILL)
            await self._wait_exit(self._kill_grace)
        signal_group(self._proc.pid, signal.SIGKILL)

    async def _wait_exit(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(asyncio.shield(self._proc.wait()), seconds)
        except TimeoutError:
            return False
        return True

    async def _finish(
        self,
        work: asyncio.Task[Any] | None,
        pump: asyncio.Task[None] | None,
        writer: asyncio.Task[None],
    ) -> None:
        """Close the connection, end the process group, flush every record to the sink."""
        if work is not None and not work.done():
            work.cancel()
        if self._conn is not None:
            with contextlib.suppress(Exception):  # closing a broken pipe is not news
                await asyncio.wait_for(self._conn.close(), self._kill_grace)
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        # The agent sees EOF on stdin; give it the grace period to exit, then end the group.
        if not await self._wait_exit(self._kill_grace):
            await self._terminate()
        signal_group(self._proc.pid, signal.SIGKILL)
        if self._proc.stdout is not None:
            # Read what the dead group left unread so the pipe (and with it the subprocess
            # transport) closes now, not in a garbage collector's warning.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_drain(self._proc.stdout), self._kill_grace)
        if pump is not None:
            await asyncio.wait({pump}, timeout=self._kill_grace)
            pump.cancel()
        tasks = [t for t in (work, pump) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        self._client.flush()
        self._note_garbage()
        self._outbox.close()
        await writer

    def _note_garbage(self) -> None:
        """One ``acp_protocol_garbage`` event when non-JSON-RPC lines were dropped."""
        transport = self._transport
        if transport is None or not transport.garbage:
            return
        self._outbox.event(
            "acp_protocol_garbage",
            f"dropped {transport.garbage} line(s) on the agent's stdout that were not "
            "JSON-RPC messages",
            count=transport.garbage,
            sample=transport.garbage_sample,
        )

    async def _pump_stderr(self, stream: asyncio.StreamReader) -> None:
        splitter = LineSplitter(line_limit=LINE_LIMIT, json_limit=LINE_LIMIT)
        while chunk := await stream.read(_READ_SIZE):
            self._touch()
            self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_TAIL:]
            for line, dropped in splitter.feed(chunk):
                self._emit_stderr(line, dropped)
            await self._outbox.wait_room()
        last = splitter.finish()
        if last is not None:
            self._emit_stderr(*last)

    def _emit_stderr(self, line: bytearray, dropped: int) -> None:
        text = line.decode("utf-8", "replace")
        if dropped:
            text += f" …[truncated {dropped} bytes]"
        self._outbox.output("stderr", text)

    def _outcome(
        self, work: asyncio.Task[schema.PromptResponse], deadline: RunReason | None
    ) -> Outcome:
        base = Outcome(
            status=OutcomeStatus.FAILED,
            reason=RunReason.AGENT_FAILED,
            error_family=ErrorFamily.CRASH,
            external_session_id=self._session_id,
        )
        response: schema.PromptResponse | None = None
        if work.done() and not work.cancelled() and work.exception() is None:
            response = work.result()
        if response is None and deadline is not None:
            outcome = self._timeout(base, deadline)
        elif response is None:
            error = work.exception() if work.done() and not work.cancelled() else None
            outcome = self._failure(base, error)
        else:
            outcome = self._stopped(base, response, deadline)
        if (
            outcome.status is OutcomeStatus.FAILED
            and not self._resumed
            and not self._client.answered
        ):
            # A new session the agent never answered in has nothing to resume.
            outcome = replace(outcome, external_session_id=None)
        return outcome

    def _timeout(self, base: Outcome, deadline: RunReason) -> Outcome:
        limit = (
            f"ran longer than {self._config.timeout_s:g} s"
            if deadline is RunReason.TIMEOUT
            else f"showed no activity for {self._config.inactivity_timeout_s:g} s"
        )
        return replace(
            base,
            reason=deadline,
            error_family=ErrorFamily.TIMEOUT,
            message=f"agent {limit}; session cancelled and process group killed",
            result=self._result(None),
        )

    def _failure(self, base: Outcome, error: BaseException | None) -> Outcome:
        # Cleaned like the command executor's messages; the full stderr is in the run log.
        stderr = clean_message(self._stderr_tail.decode("utf-8", "replace").strip())
        if self._transport is not None and self._transport.overflow is not None:
            return replace(
                base,
                message=(
                    f"agent sent a line over {self._transport.overflow} bytes on stdout; "
                    "the session was ended"
                ),
            )
        if isinstance(error, acp.RequestError):
            text = _error_text(error)
            if is_rate_limited(text):
                family = ErrorFamily.RATE_LIMIT
            elif error.code == AUTH_REQUIRED or classify_error(text) is ErrorFamily.AUTH:
                family = ErrorFamily.AUTH
            else:
                family = ErrorFamily.CRASH
            return replace(base, error_family=family, message=f"agent error: {strip_ansi(text)}")
        code = self._proc.returncode
        what = describe_exit(code) if code is not None else _error_text(error)
        message = f"ACP agent failed ({what})" + (f": {stderr}" if stderr else "")
        return replace(base, message=message)

    def _stopped(
        self, base: Outcome, response: schema.PromptResponse, deadline: RunReason | None
    ) -> Outcome:
        reason = response.stop_reason
        usage = Usage()
        if response.usage is not None:
            usage = Usage(
                input_tokens=clamp_tokens(response.usage.input_tokens),
                output_tokens=clamp_tokens(response.usage.output_tokens),
            )
        result = self._result(reason)
        message = self._client.message.strip()[-2000:]
        base = replace(base, result=result, usage=usage, message=message)
        if reason == "end_turn":
            return replace(
                base, status=OutcomeStatus.SUCCEEDED, reason=RunReason.COMPLETED, error_family=None
            )
        if reason == "cancelled":
            if deadline is not None:
                return self._timeout(base, deadline)
            return replace(
                base,
                status=OutcomeStatus.CANCELLED,
                error_family=None,
                message="the agent cancelled the turn (stop reason cancelled)",
            )
        if reason == "refusal":
            return replace(
                base,
                error_family=ErrorFamily.REFUSAL,
                message=f"the agent refused the request (stop reason refusal). {message}".strip(),
            )
        # max_tokens / max_turn_requests: the turn ran out of budget, like a timeout.
        return replace(
            base,
            error_family=ErrorFamily.TIMEOUT,
            message=f"the agent stopped early: stop reason {reason}. {message}".strip(),
        )

    def _result(self, stop_reason: str | None) -> dict[str, Any]:
        return merge_meta(
            parse_result(self._client.message),
            stop_reason=stop_reason,
            session_id=self._session_id,
            resumed=self._resumed,
            cost=self._client.cost,
        )


async def _drain(stream: asyncio.StreamReader) -> None:
    """Discard ``stream`` up to its end."""
    while await stream.read(1 << 16):
        pass


def _error_text(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    if isinstance(error, acp.RequestError):
        text = f"{error} (code {error.code})"
        if error.data:
            text += f": {error.data}"
        return text
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
