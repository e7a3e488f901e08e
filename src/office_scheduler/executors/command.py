"""The ``command`` executor: one agent CLI subprocess per session.

The child leads its own process group (``start_new_session``) so every signal goes to the
whole group and no grandchild outlives the session. stdin, stdout and stderr are serviced
by concurrent tasks, so an agent that ignores stdin or floods one stream never blocks.

A resumed preset session (``launch.resume_session_id``) whose CLI answers that it does not
know the session (:func:`~office_scheduler.executors.presets.is_lost_session`) is retried
once within the same run as a new session with the full prompt, after a
``session_fallback`` run event; the new session's id then becomes the (task, agent)'s
newest, so the lost one is never resumed again.

A session that prints nothing but the CLI's own retry notices for ``stall_timeout_s``
(:mod:`~office_scheduler.executors.stall`) is ended as ``transient`` with the last notice
as its message. Failure messages are cleaned (:mod:`~office_scheduler.executors.messages`)
while the full stderr stays in the run log. A failed session in which the model never
answered reports no session id, so the retry starts a new session with the full prompt
instead of resuming an empty one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import JSON
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunReason
from office_scheduler.executors import session_ids
from office_scheduler.executors.base import EventSink, ExecutionSink, config_failure
from office_scheduler.executors.messages import clean_message
from office_scheduler.executors.parsers import ResultAccumulator, classify_failure
from office_scheduler.executors.presets import PresetError, build_invocation, is_lost_session
from office_scheduler.executors.process import LineSplitter as _LineSplitter
from office_scheduler.executors.process import describe_exit as _describe_exit
from office_scheduler.executors.process import signal_group
from office_scheduler.executors.stall import StallWatch

#: Longest line handed to the sink, in bytes; longer lines are cut with a marker.
LINE_LIMIT = 64 * 1024
#: Longest stdout line still parsed as the JSON result, in bytes.
RESULT_LINE_LIMIT = 4 * 1024 * 1024
#: Bytes of stderr kept for error messages.
STDERR_TAIL = 4096
#: Characters of the resume failure kept in the ``session_fallback`` event.
MAX_FALLBACK_ERROR = 1000

_READ_SIZE = 65536
# On Python 3.11 ``Process.wait()`` also waits for the pipes to close, which a leftover
# grandchild can hold open; the exit status is polled this often to notice the exit anyway.
_EXIT_POLL_S = 0.2


class CommandExecutor:
    """Runs ``launch.config.argv`` as a subprocess and reports its outcome.

    Args:
        kill_grace_s: time between SIGTERM and SIGKILL of the process group, and the
            longest wait for output still buffered after the child has exited.
    """

    def __init__(self, *, kill_grace_s: float = 2.0) -> None:
        self._kill_grace_s = kill_grace_s

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        """Launch the session described by ``launch`` and wait for it to end.

        Args:
            launch: the command, environment, working directory and prompt.
            sink: receives the pid before the prompt is sent, then every output line.

        Returns:
            The session's outcome (of the fallback session when a resume failed because
            the CLI did not know the session); agent and configuration failures come back
            as ``failed`` outcomes, never as exceptions.

        Raises:
            asyncio.CancelledError: when the awaiting task is cancelled, after the
                process group has been terminated.
        """
        if not launch.config.argv and launch.config.preset is None:
            return config_failure(f"executor {launch.config.name!r} has no command (empty argv)")
        launch = await session_ids.screen_launch(launch, sink)
        if not launch.resume_session_id and launch.full_prompt:
            # A delta prompt assumes the resumed history; a new session needs the full one.
            launch = replace(launch, prompt=launch.full_prompt)
        tmpdir = tempfile.mkdtemp(prefix="office-run-")
        try:
            outcome, stderr = await self._run_once(launch, sink, tmpdir)
            stored = launch.resume_session_id
            failure = f"{outcome.message}\n{stderr}"
            if (
                stored
                and outcome.status is OutcomeStatus.FAILED
                and outcome.error_family is not ErrorFamily.TIMEOUT
                and is_lost_session(failure)
            ):
                await _note_fallback(sink, launch, stored, outcome.message or stderr)
                fresh = replace(
                    launch,
                    resume_session_id=None,
                    resume_cwd=None,
                    prompt=launch.full_prompt or launch.prompt,
                )
                outcome, _ = await self._run_once(fresh, sink, tmpdir)
            return await session_ids.screen_outcome(outcome, launch, sink)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)

    async def _run_once(
        self, launch: Launch, sink: ExecutionSink, tmpdir: str
    ) -> tuple[Outcome, str]:
        """Run one CLI process; return its outcome and the tail of its stderr."""
        try:
            preset = build_invocation(launch, Path(tmpdir))
        except PresetError as exc:
            return config_failure(str(exc)), ""
        argv = list(preset.argv) if preset else _substitute(launch, tmpdir)
        stdin = preset.stdin if preset else launch.prompt.encode("utf-8", "replace")
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**launch.env, **preset.env} if preset else launch.env,
                cwd=launch.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            return config_failure(f"cannot start command {argv[0]!r}: {exc}"), ""
        session = _Session(proc, sink, launch, self._kill_grace_s, tmpdir)
        outcome = await session.run(stdin)
        return outcome, session.stderr_text()


async def _note_fallback(sink: ExecutionSink, launch: Launch, stored: str, error: str) -> None:
    """Record the ``session_fallback`` run event (an output line on a plain sink)."""
    error = error.strip()[:MAX_FALLBACK_ERROR]
    message = f"could not resume session {stored}: {error}; starting a new session"
    if isinstance(sink, EventSink):
        await sink.event(
            "session_fallback",
            message,
            {"session_id": stored, "error": error, "full_prompt": launch.full_prompt is not None},
        )
    else:
        await sink.output("stderr", f"[session_fallback] {message}")


def _substitute(launch: Launch, tmpdir: str) -> list[str]:
    """Return argv with placeholders replaced; writes the prompt file when one is named."""
    argv = list(launch.config.argv)
    prompt_file = str(Path(tmpdir) / "prompt.txt")
    if any("{prompt_file}" in arg for arg in argv):
        Path(prompt_file).write_bytes(launch.prompt.encode("utf-8", "replace"))
    values = {
        "{run_id}": str(launch.run_id),
        "{task_id}": launch.task_id or "",
        "{agent_id}": launch.agent_id,
        "{workspace_id}": launch.workspace_id,
        "{prompt_file}": prompt_file,
    }
    # Plain replacement rather than str.format: arguments may hold literal braces (JSON).
    for i, arg in enumerate(argv):
        for key, value in values.items():
            arg = arg.replace(key, value)
        argv[i] = arg
    return argv


class _Session:
    """State of one running subprocess: pumps, deadlines, collected result."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        sink: ExecutionSink,
        launch: Launch,
        kill_grace_s: float,
        tmpdir: str = "",
    ) -> None:
        self._proc = proc
        self._tmpdir = tmpdir
        self._sink = sink
        self._config = launch.config
        self._grace = kill_grace_s
        self._loop = asyncio.get_running_loop()
        self._last_activity = self._loop.time()
        self._stall = StallWatch(launch.config.stall_timeout_s, self._last_activity)
        self._stalled: str | None = None
        self._stderr_tail = b""
        self._result: JSON | None = None
        self._results = ResultAccumulator()
        self._pumps: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[Any]] = []

    async def run(self, prompt: bytes) -> Outcome:
        """Drive the session to its end and build the outcome."""
        started = self._loop.time()
        reason: RunReason | None = None
        try:
            await self._sink.started(self._proc.pid)
            stdout, stderr = self._proc.stdout, self._proc.stderr
            if stdout is None or stderr is None:  # pragma: no cover - both are PIPE
                raise RuntimeError("subprocess started without output pipes")
            self._pumps = [
                asyncio.create_task(self._pump("stdout", stdout, RESULT_LINE_LIMIT)),
                asyncio.create_task(self._pump("stderr", stderr, LINE_LIMIT)),
            ]
            self._tasks = [
                asyncio.create_task(self._proc.wait()),
                asyncio.create_task(self._feed(prompt)),
                *self._pumps,
            ]
            reason = await self._supervise(started)
            if reason is not None:
                await self._terminate()
            self._signal_group(signal.SIGKILL)
            await self._drain()
        except asyncio.CancelledError:
            await self._terminate()
            raise
        finally:
            self._signal_group(signal.SIGKILL)
            await self._cleanup()
        return self._outcome(reason)

    async def _supervise(self, started: float) -> RunReason | None:
        """Wait for the child to exit; return the timeout that ended it, if one did."""
        wall_deadline = started + self._config.timeout_s
        while self._proc.returncode is None:
            now = self._loop.time()
            idle_deadline = self._last_activity + self._config.inactivity_timeout_s
            if now >= wall_deadline:
                return RunReason.TIMEOUT
            if now >= idle_deadline:
                return RunReason.INACTIVITY_TIMEOUT
            if self._stall.stalled(now):
                self._stalled = self._stall.last_notice
                return RunReason.AGENT_FAILED
            stall = self._stall.deadline() or wall_deadline
            await self._wait_tasks(
                min(wall_deadline, idle_deadline, stall, now + _EXIT_POLL_S) - now
            )
        return None

    async def _wait_tasks(self, seconds: float) -> None:
        """Wait until a pending task ends or ``seconds`` pass; re-raise a task's failure."""
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(seconds)
        for task in self._tasks:
            error = task.exception() if task.done() and not task.cancelled() else None
            if error is not None:
                raise error

    async def _wait_exit(self, seconds: float) -> None:
        deadline = self._loop.time() + seconds
        while self._proc.returncode is None and self._loop.time() < deadline:
            await self._wait_tasks(min(_EXIT_POLL_S, deadline - self._loop.time()))

    async def _terminate(self) -> None:
        """SIGTERM the group, give it the grace period, then SIGKILL it."""
        self._signal_group(signal.SIGTERM)
        await self._wait_exit(self._grace)
        self._signal_group(signal.SIGKILL)
        await self._wait_exit(self._grace)

    async def _drain(self) -> None:
        """Let the pumps consume what is still buffered once every writer is gone."""
        await asyncio.wait(self._pumps, timeout=self._grace)
        await self._wait_tasks(0)

    async def _cleanup(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        if not self._pumps:
            # Ended before the pumps started (the sink failed or the run was cancelled
            # while recording the pid): the pipes must still reach EOF to be released.
            await self._discard_output()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _discard_output(self) -> None:
        async def to_eof(stream: asyncio.StreamReader | None) -> None:
            while stream is not None and await stream.read(_READ_SIZE):
                pass

        reads = asyncio.gather(to_eof(self._proc.stdout), to_eof(self._proc.stderr))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reads, self._grace)

    def _signal_group(self, signum: signal.Signals) -> None:
        signal_group(self._proc.pid, signum)

    async def _feed(self, prompt: bytes) -> None:
        stdin = self._proc.stdin
        if stdin is None:  # pragma: no cover - stdin is PIPE
            return
        try:
            stdin.write(prompt)
            await stdin.drain()
            stdin.close()
            await stdin.wait_closed()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent does not read stdin; that is its choice

    async def _pump(self, name: str, stream: asyncio.StreamReader, keep: int) -> None:
        splitter = _LineSplitter(line_limit=LINE_LIMIT, json_limit=keep)
        while chunk := await stream.read(_READ_SIZE):
            self._last_activity = self._loop.time()
            if name == "stderr":
                self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_TAIL:]
            for line, dropped in splitter.feed(chunk):
                await self._emit(name, line, dropped)
        last = splitter.finish()
        if last is not None:
            await self._emit(name, *last)

    async def _emit(self, name: str, line: bytearray, dropped: int) -> None:
        shown = line[:LINE_LIMIT]
        text = shown.decode("utf-8", "replace")
        self._stall.line(name, text, self._loop.time())
        cut = dropped + len(line) - len(shown)
        if cut:
            text += f" …[truncated {cut} bytes]"
        await self._sink.output(name, text)
        if name == "stdout" and not dropped and line.startswith(b"{"):
            self._take_json(line)

    def _take_json(self, line: bytearray) -> None:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return
        if isinstance(obj, dict):
            self._result = obj
            self._results.add(obj)

    def _outcome(self, reason: RunReason | None) -> Outcome:
        code = self._proc.returncode
        parsed = self._results.verdict() if self._result is not None else None
        failed = Outcome(
            status=OutcomeStatus.FAILED,
            reason=RunReason.AGENT_FAILED,
            error_family=ErrorFamily.CRASH,
            result=self._result,
            # A session the model never answered in has nothing to resume.
            external_session_id=self._results.session_id if self._results.model_turn else None,
            usage=self._results.usage,
            exit_code=code,
        )
        if self._stalled is not None:
            return replace(
                failed,
                error_family=ErrorFamily.TRANSIENT,
                message=self._clean(self._stalled),
            )
        if reason is not None:
            limit = (
                f"ran longer than {self._config.timeout_s:g} s"
                if reason is RunReason.TIMEOUT
                else f"printed nothing for {self._config.inactivity_timeout_s:g} s"
            )
            return replace(
                failed,
                reason=reason,
                error_family=ErrorFamily.TIMEOUT,
                message=f"agent {limit}; process group killed",
            )
        if parsed is not None and parsed.is_error:
            # A clean exit does not make a reported error a success.
            message = self._clean(parsed.message or self.stderr_text()) or _describe_exit(code)
            return replace(
                failed,
                error_family=parsed.error_family or classify_failure(message),
                message=message,
            )
        if code != 0:
            message = self._clean(self.stderr_text()) or _describe_exit(code)
            return replace(failed, error_family=classify_failure(message), message=message)
        summary = (parsed.message if parsed else "") or self._results.summary
        return replace(
            failed,
            external_session_id=self._results.session_id,
            status=OutcomeStatus.SUCCEEDED,
            reason=RunReason.COMPLETED,
            error_family=None,
            message=summary,
        )

    def _clean(self, text: str) -> str:
        return clean_message(text, temp_dirs=(self._tmpdir,) if self._tmpdir else ())

    def stderr_text(self) -> str:
        """The kept tail of the session's stderr, decoded and stripped."""
        return self._stderr_tail.decode("utf-8", "replace").strip()
