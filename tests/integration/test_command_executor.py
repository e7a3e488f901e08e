from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.domain.execution import Launch, Usage
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunReason
from office_scheduler.executors.command import LINE_LIMIT, STDERR_TAIL, CommandExecutor

PREAMBLE = "import hashlib, json, os, signal, subprocess, sys, time\n"

pytestmark = pytest.mark.timeout(10)


class RecordingSink:
    """Keeps what the executor reports; optionally only counts lines to stay small."""

    def __init__(self, *, marker: Path | None = None, keep: bool = True) -> None:
        self.pid: int | None = None
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.counts = {"stdout": 0, "stderr": 0}
        self.longest = 0
        self.truncated = 0
        self.ready = asyncio.Event()
        self._marker = marker
        self._keep = keep

    async def started(self, pid: int) -> None:
        # A short pause widens the window in which a wrong order (prompt sent before the
        # pid is recorded) would become visible to the child.
        await asyncio.sleep(0.05)
        self.pid = pid
        if self._marker is not None:
            self._marker.write_text(str(pid))

    async def output(self, stream: str, line: str) -> None:
        self.counts[stream] += 1
        self.longest = max(self.longest, len(line.encode()))
        if "…[truncated" in line:
            self.truncated += 1
        if self._keep:
            self.lines[stream].append(line)
        if line == "ready":
            self.ready.set()


def write_script(tmp_path: Path, *parts: str) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(PREAMBLE + "".join(textwrap.dedent(part) for part in parts))
    return path


def make_launch(
    tmp_path: Path,
    argv: tuple[str, ...],
    *,
    prompt: str = "do the work",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 20.0,
    inactivity_timeout_s: float = 20.0,
    task_id: str | None = "task-7",
) -> Launch:
    config = ExecutorConfig(
        name="test-cli",
        argv=argv,
        timeout_s=timeout_s,
        inactivity_timeout_s=inactivity_timeout_s,
    )
    return Launch(
        run_id=42,
        agent_id="agent-1",
        task_id=task_id,
        workspace_id="ws-1",
        prompt=prompt,
        config=config,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")} if env is None else env,
        cwd=str(cwd or tmp_path),
    )


def python(script: Path, *args: str) -> tuple[str, ...]:
    return (sys.executable, str(script), *args)


def last_json(sink: RecordingSink) -> dict[str, Any]:
    for line in reversed(sink.lines["stdout"]):
        if line.startswith("{"):
            obj: dict[str, Any] = json.loads(line)
            return obj
    raise AssertionError("no JSON line on stdout")


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed orphan is a zombie until init reaps it, and a container's init may never
    # do so; a zombie runs nothing, so it counts as gone.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 3.0
    while any(is_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still alive: {[p for p in pids if is_alive(p)]}"
        await asyncio.sleep(0.02)


def read_pids(path: Path) -> list[int]:
    pids: list[int] = json.loads(path.read_text())
    return pids


FAMILY_BODY = """
    pid_file = sys.argv[1]
    child = subprocess.Popen(["sleep", "60"])
    with open(pid_file + ".tmp", "w") as f:
        json.dump([os.getpid(), child.pid], f)
    os.replace(pid_file + ".tmp", pid_file)
"""


async def test_success_reports_result_session_and_usage(tmp_path: Path) -> None:
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "All done.",
        "session_id": "sess-123",
        "total_cost_usd": 0.5,
        "usage": {"input_tokens": 100, "output_tokens": 7},
    }
    script = write_script(
        tmp_path,
        f"""
        sys.stdin.read()
        print(json.dumps({{"type": "system", "subtype": "init", "session_id": "sess-123"}}))
        print("working on it", flush=True)
        print("a warning", file=sys.stderr, flush=True)
        print(json.dumps({{"pid": os.getpid()}}))
        print(json.dumps({result!r}))
        """,
    )
    sink = RecordingSink()
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), sink)

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.reason is RunReason.COMPLETED
    assert outcome.error_family is None
    assert outcome.exit_code == 0
    assert outcome.result == result
    assert outcome.message == "All done."
    assert outcome.external_session_id == "sess-123"
    assert outcome.usage == Usage(
        input_tokens=100, output_tokens=7, cost_subcents=5000, priced=True
    )
    assert "working on it" in sink.lines["stdout"]
    assert sink.lines["stderr"] == ["a warning"]
    assert json.loads(sink.lines["stdout"][2]) == {"pid": sink.pid}


async def test_nonzero_exit_reports_stderr_tail(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        sys.stderr.write("noise " * 20000 + "\\n")
        sys.stderr.write("fatal: boom\\n")
        sys.exit(3)
        """,
    )
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.reason is RunReason.AGENT_FAILED
    assert outcome.error_family is ErrorFamily.CRASH
    assert outcome.exit_code == 3
    assert outcome.message.endswith("fatal: boom")
    assert len(outcome.message.encode()) <= STDERR_TAIL


async def test_missing_files_in_the_agents_stderr_are_not_a_config_failure(
    tmp_path: Path,
) -> None:
    # The agent started: what its own tools printed says nothing about the configuration.
    script = write_script(
        tmp_path,
        """
        sys.stderr.write("cat: notes.md: No such file or directory\\n")
        sys.stderr.write("sh: 1: rg: command not found\\n")
        sys.exit(127)
        """,
    )
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.CRASH
    assert outcome.exit_code == 127


async def test_nonzero_exit_without_output_names_exit_code(tmp_path: Path) -> None:
    script = write_script(tmp_path, "sys.exit(5)\n")
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.message == "exit code 5"
    assert outcome.exit_code == 5


async def test_nonzero_exit_prefers_result_error_and_family(tmp_path: Path) -> None:
    line = {"type": "result", "is_error": True, "result": "API Error: 429 rate limit reached"}
    script = write_script(
        tmp_path,
        f"""
        print("stderr text", file=sys.stderr)
        print(json.dumps({line!r}))
        sys.exit(1)
        """,
    )
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.RATE_LIMIT
    assert outcome.message == "API Error: 429 rate limit reached"
    assert outcome.result == line


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            {"type": "result", "subtype": "success", "is_error": True, "result": "No session"},
            "No session",
        ),
        ({"status": "error", "message": "could not push"}, "could not push"),
        ({"error": {"message": "bad request"}}, "bad request"),
    ],
)
async def test_exit_zero_with_error_result_fails(
    tmp_path: Path, line: dict[str, Any], message: str
) -> None:
    script = write_script(tmp_path, f"print(json.dumps({line!r}))\n")
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.reason is RunReason.AGENT_FAILED
    assert outcome.error_family is ErrorFamily.CRASH
    assert outcome.exit_code == 0
    assert outcome.message == message


@pytest.mark.parametrize("ignore_sigterm", [False, True])
async def test_wall_timeout_kills_the_group(tmp_path: Path, ignore_sigterm: bool) -> None:
    pid_file = tmp_path / "pids.json"
    script = write_script(
        tmp_path,
        FAMILY_BODY,
        """
        if sys.argv[2] == "ignore":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            print("tick", flush=True)
            time.sleep(0.05)
        """,
    )
    mode = "ignore" if ignore_sigterm else "default"
    launch = make_launch(
        tmp_path, python(script, str(pid_file), mode), timeout_s=1.5, inactivity_timeout_s=10
    )
    begun = time.monotonic()
    outcome = await CommandExecutor(kill_grace_s=0.3).run(launch, RecordingSink(keep=False))

    # Deadline + kill grace, with room for a loaded machine (the suite runs in parallel).
    assert time.monotonic() - begun < 6.0
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.reason is RunReason.TIMEOUT
    assert outcome.error_family is ErrorFamily.TIMEOUT
    assert outcome.exit_code is not None
    assert outcome.exit_code < 0
    await assert_all_gone(read_pids(pid_file))


async def test_inactivity_timeout_kills_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids.json"
    script = write_script(
        tmp_path,
        FAMILY_BODY,
        """
        print("hello", flush=True)
        time.sleep(60)
        """,
    )
    launch = make_launch(
        tmp_path, python(script, str(pid_file)), timeout_s=30, inactivity_timeout_s=0.4
    )
    sink = RecordingSink()
    begun = time.monotonic()
    outcome = await CommandExecutor(kill_grace_s=0.3).run(launch, sink)

    assert time.monotonic() - begun < 6.0
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.reason is RunReason.INACTIVITY_TIMEOUT
    assert outcome.error_family is ErrorFamily.TIMEOUT
    assert sink.lines["stdout"] == ["hello"]
    await assert_all_gone(read_pids(pid_file))


async def test_leftover_grandchild_is_killed_after_exit(tmp_path: Path) -> None:
    # The grandchild inherits stdout, so the pipe stays open after the child exits.
    pid_file = tmp_path / "pids.json"
    script = write_script(tmp_path, FAMILY_BODY, 'print(json.dumps({"status": "ok"}))\n')
    launch = make_launch(tmp_path, python(script, str(pid_file)))
    begun = time.monotonic()
    outcome = await CommandExecutor(kill_grace_s=0.5).run(launch, RecordingSink())

    assert time.monotonic() - begun < 3.0
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.result == {"status": "ok"}
    await assert_all_gone(read_pids(pid_file))


async def test_large_output_streams_with_bounded_memory(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        out, err = sys.stdout.buffer, sys.stderr.buffer
        err.write(b"e" * 2_000_000 + b"\\n")        # burst while stdout is still unread
        err.flush()
        line = b"x" * 999 + b"\\n"
        out.write(line * 5_000)                    # 5 MB of ordinary lines
        out.write(b"y" * 3_000_000 + b"\\n")       # one huge plain line
        out.write(b'{"big": "' + b"z" * 5_000_000 + b'"}\\n')  # JSON too big to keep
        out.write(json.dumps({"status": "ok", "summary": "big run"}).encode() + b"\\n")
        out.write(b"tail without newline")
        out.flush()
        err.write(b"f" * 500_000)
        """,
    )
    sink = RecordingSink(keep=False)
    tracemalloc.start()
    try:
        outcome = await CommandExecutor().run(make_launch(tmp_path, python(script)), sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.result == {"status": "ok", "summary": "big run"}
    assert outcome.message == "big run"
    assert sink.counts == {"stdout": 5_004, "stderr": 2}
    assert sink.truncated == 4
    assert sink.longest <= LINE_LIMIT + 64
    # 13.5 MB went through; only one 4 MiB JSON candidate line may be held at a time.
    assert peak < 6 * 1024 * 1024, peak


async def test_env_is_exactly_the_launch_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFICE_SCHEDULER_LEAK_CHECK", "1")
    script = write_script(
        tmp_path,
        """
        # /proc/self/environ is what exec received, before Python adjusts the locale.
        raw = open("/proc/self/environ", "rb").read().split(b"\\0")
        print(json.dumps(sorted(v.decode() for v in raw if v)))
        """,
    )
    env = {"PATH": "/usr/bin:/bin", "ONLY_THIS": "yes", "SECRET_TOKEN": "s3cr=t"}
    sink = RecordingSink()
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script), env=env), sink)

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert json.loads(sink.lines["stdout"][0]) == sorted(f"{k}={v}" for k, v in env.items())


async def test_cwd_is_honoured(tmp_path: Path) -> None:
    work = tmp_path / "work dir"
    work.mkdir()
    script = write_script(tmp_path, 'print(json.dumps({"cwd": os.getcwd()}))\n')
    sink = RecordingSink()
    outcome = await CommandExecutor().run(make_launch(tmp_path, python(script), cwd=work), sink)

    assert outcome.result == {"cwd": str(work.resolve())}


async def test_pid_reported_before_prompt_and_prompt_intact(tmp_path: Path) -> None:
    marker = tmp_path / "started.pid"
    prompt = "héllo → 世界 🚀 \x00\x01\x07\t\r\n\x1b[31mred\x1b[0m {run_id}\n" * 20_000
    script = write_script(
        tmp_path,
        """
        first = sys.stdin.buffer.read(1)
        marker = open(sys.argv[1]).read() if os.path.exists(sys.argv[1]) else None
        data = first + sys.stdin.buffer.read()
        print(json.dumps({
            "pid": os.getpid(),
            "marker": marker,
            "sha": hashlib.sha256(data).hexdigest(),
            "len": len(data),
        }))
        """,
    )
    sink = RecordingSink(marker=marker)
    launch = make_launch(tmp_path, python(script, str(marker)), prompt=prompt)
    outcome = await CommandExecutor().run(launch, sink)

    encoded = prompt.encode()
    assert outcome.result == {
        "pid": sink.pid,
        "marker": str(sink.pid),
        "sha": hashlib.sha256(encoded).hexdigest(),
        "len": len(encoded),
    }


async def test_placeholders_and_prompt_file(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        path = sys.argv[1].removeprefix("--prompt=")
        print(json.dumps({"argv": sys.argv[1:], "prompt": open(path, encoding="utf-8").read()}))
        """,
    )
    argv = python(script, "--prompt={prompt_file}", "{run_id}/{task_id}", "{agent_id}")
    argv += ("{workspace_id}", '{"literal": {"braces": 1}}')
    launch = make_launch(tmp_path, argv, prompt="file prompt ✓\n", task_id=None)
    outcome = await CommandExecutor().run(launch, RecordingSink())

    assert outcome.result is not None
    args = outcome.result["argv"]
    assert args[1:] == ["42/", "agent-1", "ws-1", '{"literal": {"braces": 1}}']
    assert outcome.result["prompt"] == "file prompt ✓\n"
    prompt_path = Path(args[0].removeprefix("--prompt="))
    assert prompt_path.name == "prompt.txt"
    assert not prompt_path.parent.exists()


async def test_agent_ignoring_stdin_is_fine(tmp_path: Path) -> None:
    script = write_script(tmp_path, 'print(json.dumps({"status": "ok"}))\n')
    launch = make_launch(tmp_path, python(script), prompt="p" * 2_000_000)
    outcome = await CommandExecutor().run(launch, RecordingSink())

    assert outcome.status is OutcomeStatus.SUCCEEDED


async def test_missing_command_is_a_config_failure(tmp_path: Path) -> None:
    sink = RecordingSink()
    launch = make_launch(tmp_path, ("/nonexistent/agent-cli", "--flag"))
    outcome = await CommandExecutor().run(launch, sink)

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.CONFIG
    assert "/nonexistent/agent-cli" in outcome.message
    assert sink.pid is None


async def test_non_executable_command_is_a_config_failure(tmp_path: Path) -> None:
    tool = tmp_path / "not-executable"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o644)
    outcome = await CommandExecutor().run(make_launch(tmp_path, (str(tool),)), RecordingSink())

    assert outcome.error_family is ErrorFamily.CONFIG
    assert str(tool) in outcome.message


async def test_missing_cwd_is_a_config_failure(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, (sys.executable, "-c", "pass"), cwd=tmp_path / "gone")
    outcome = await CommandExecutor().run(launch, RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.CONFIG


async def test_empty_argv_is_a_config_failure(tmp_path: Path) -> None:
    outcome = await CommandExecutor().run(make_launch(tmp_path, ()), RecordingSink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.CONFIG
    assert "test-cli" in outcome.message


@pytest.mark.parametrize("ignore_sigterm", [False, True])
async def test_cancellation_kills_the_group(tmp_path: Path, ignore_sigterm: bool) -> None:
    pid_file = tmp_path / "pids.json"
    script = write_script(
        tmp_path,
        FAMILY_BODY,
        """
        if sys.argv[2] == "ignore":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
        """,
    )
    mode = "ignore" if ignore_sigterm else "default"
    sink = RecordingSink()
    launch = make_launch(tmp_path, python(script, str(pid_file), mode))
    task = asyncio.create_task(CommandExecutor(kill_grace_s=0.3).run(launch, sink))
    await asyncio.wait_for(sink.ready.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_all_gone(read_pids(pid_file))


class BlockingSink(RecordingSink):
    """Never finishes recording the pid, so the run can be cancelled right there."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    async def started(self, pid: int) -> None:
        self.pid = pid
        self.entered.set()
        await asyncio.Event().wait()


async def test_cancellation_while_recording_pid_kills_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids.json"
    script = write_script(tmp_path, FAMILY_BODY, 'print("x" * 100_000)\ntime.sleep(60)\n')
    sink = BlockingSink()
    launch = make_launch(tmp_path, python(script, str(pid_file)))
    task = asyncio.create_task(CommandExecutor(kill_grace_s=0.3).run(launch, sink))
    await asyncio.wait_for(sink.entered.wait(), timeout=5)
    while not pid_file.exists():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sink.counts == {"stdout": 0, "stderr": 0}
    await assert_all_gone(read_pids(pid_file))
