"""The ``acp`` executor against the scriptable ACP test agent (real subprocesses, no DB)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import JSON, ExecutorConfig
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunReason
from office_scheduler.executors.acp import AcpExecutor
from office_scheduler.executors.acp.transport import LINE_LIMIT

AGENT = Path(__file__).resolve().parents[1] / "agents" / "acp_agent.py"

pytestmark = pytest.mark.timeout(60)


class Sink:
    """Records what the executor reports: pid, output lines, run events."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.lines: list[tuple[str, str]] = []
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def started(self, pid: int) -> None:
        self.pid = pid

    async def output(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))

    async def event(self, kind: str, message: str, data: Any) -> None:
        self.events.append((kind, message, dict(data)))

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.events]

    def stream(self, name: str) -> list[str]:
        return [line for stream, line in self.lines if stream == name]


class Agent:
    """One scripted agent setup: script file, persisted sessions, journal."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.state = tmp_path / "state"
        self.journal = tmp_path / "journal.jsonl"
        self.script_path = tmp_path / "script.json"

    def launch(
        self,
        *,
        task_id: str | None = "task-1",
        resume: str | None = None,
        policy: JSON | None = None,
        timeout_s: float = 20.0,
        inactivity_timeout_s: float = 20.0,
        full_prompt: str | None = None,
        **script: Any,
    ) -> Launch:
        script.setdefault("state_dir", str(self.state))
        script.setdefault("journal", str(self.journal))
        self.script_path.write_text(json.dumps(script))
        config = ExecutorConfig(
            name="acp-test",
            kind="acp",
            argv=(sys.executable, str(AGENT)),
            timeout_s=timeout_s,
            inactivity_timeout_s=inactivity_timeout_s,
        )
        return Launch(
            run_id=7,
            agent_id="agent-1",
            task_id=task_id,
            workspace_id="ws-1",
            prompt="Write the page\nThen stop.",
            config=config,
            env={"PATH": os.environ["PATH"], "ACP_TEST_SCRIPT": str(self.script_path)},
            cwd=str(self.dir),
            resume_session_id=resume,
            resume_cwd=str(self.dir) if resume else None,
            permission_policy=policy,
            full_prompt=full_prompt,
        )

    def entries(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        rows = [json.loads(line) for line in self.journal.read_text().splitlines()]
        return [row for row in rows if event is None or row["event"] == event]


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    return Agent(tmp_path)


async def run(launch: Launch, sink: Sink | None = None) -> tuple[Outcome, Sink]:
    sink = sink or Sink()
    outcome = await AcpExecutor(cancel_grace_s=1.0, kill_grace_s=1.0).run(launch, sink)
    return outcome, sink


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of the process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def wait_gone(pgid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def test_a_first_run_opens_a_new_session_and_streams_the_turn(agent: Agent) -> None:
    outcome, sink = await run(agent.launch(message="page written"))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.reason is RunReason.COMPLETED
    (new,) = agent.entries("new")
    assert outcome.external_session_id == new["session_id"]
    assert outcome.result == {
        "result": "page written",
        "stop_reason": "end_turn",
        "session_id": new["session_id"],
        "resumed": False,
    }
    assert outcome.message == "page written"
    assert sink.stream("agent") == ["page written"]
    assert sink.stream("thought") == ["thinking"]
    assert sink.kinds() == ["acp_session_new", "acp_tool_call"]
    assert sink.events[1][2]["tool_kind"] == "read"
    (prompt,) = agent.entries("prompt")
    assert prompt["text"] == "Write the page\nThen stop."
    assert prompt["pid"] == sink.pid
    assert agent.entries("load") == []
    assert sink.pid is not None
    assert wait_gone(sink.pid)


async def test_a_second_process_resumes_the_session_and_replay_is_not_output(
    agent: Agent,
) -> None:
    first, _ = await run(agent.launch(message="step one"))
    assert first.external_session_id is not None

    launch = agent.launch(
        resume=first.external_session_id, message="step two", full_prompt="the FULL prompt"
    )
    second, sink = await run(launch)

    assert second.status is OutcomeStatus.SUCCEEDED
    assert second.external_session_id == first.external_session_id
    assert second.result is not None
    assert second.result["resumed"] is True
    (load,) = agent.entries("load")
    assert load["found"] is True
    first_prompt, second_prompt = agent.entries("prompt")
    assert load["pid"] == second_prompt["pid"] != first_prompt["pid"]  # another process
    assert second_prompt["text"] == "Write the page\nThen stop."  # the delta, not the full one
    replay = [(m, d["update"]) for k, m, d in sink.events if k == "acp_replay"]
    assert replay == [
        ("Write the page", "user_message_chunk"),
        ("Then stop.", "user_message_chunk"),
        ("step one", "agent_message_chunk"),
    ]
    assert all(d["replay"] is True for k, _, d in sink.events if k == "acp_replay")
    assert sink.kinds().index("acp_session_loaded") > sink.kinds().index("acp_replay")
    assert sink.stream("agent") == ["step two"]  # the replayed "step one" is not output
    assert second.message == "step two"


async def test_a_lost_session_falls_back_once_to_a_new_one(agent: Agent) -> None:
    outcome, sink = await run(agent.launch(resume="sess-gone", full_prompt="the FULL prompt"))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    # The delta assumed the lost history: the new session gets the full prompt.
    assert [e["text"] for e in agent.entries("prompt")] == ["the FULL prompt"]
    (new,) = agent.entries("new")
    assert outcome.external_session_id == new["session_id"] != "sess-gone"
    assert [e["found"] for e in agent.entries("load")] == [False]
    fallback = [(m, d) for k, m, d in sink.events if k == "acp_session_fallback"]
    assert len(fallback) == 1
    message, data = fallback[0]
    assert "sess-gone" in message
    assert "-32002" in data["error"]
    assert sink.kinds() == ["acp_session_fallback", "acp_session_new", "acp_tool_call"]


async def test_an_agent_without_load_support_starts_fresh_and_says_why(agent: Agent) -> None:
    outcome, sink = await run(agent.launch(resume="sess-1", no_load=True))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert agent.entries("load") == []
    (fallback,) = [m for k, m, _ in sink.events if k == "acp_session_fallback"]
    assert "does not support session/load" in fallback


async def test_a_taskless_run_never_loads_a_session(agent: Agent) -> None:
    first, _ = await run(agent.launch(task_id=None))

    second, sink = await run(agent.launch(task_id=None, resume=first.external_session_id))

    assert agent.entries("load") == []
    assert len(agent.entries("new")) == 2
    assert second.external_session_id != first.external_session_id
    assert "acp_session_fallback" not in sink.kinds()


@pytest.mark.parametrize(
    ("mode", "reason", "wall_s", "idle_s"),
    [
        # Deadlines leave room for the agent's start-up (importing acp takes ~0.6 s, more
        # on a loaded machine), so the session exists before the deadline strikes.
        ("hang", RunReason.TIMEOUT, 4.0, 60.0),
        ("hang_hard", RunReason.INACTIVITY_TIMEOUT, 60.0, 3.0),
    ],
)
async def test_a_deadline_cancels_the_session_then_kills_the_whole_group(
    agent: Agent, mode: str, reason: RunReason, wall_s: float, idle_s: float
) -> None:
    started = time.monotonic()
    launch = agent.launch(mode=mode, grandchild=True, timeout_s=wall_s, inactivity_timeout_s=idle_s)
    outcome, sink = await run(launch)
    elapsed = time.monotonic() - started

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.reason is reason
    assert outcome.error_family is ErrorFamily.TIMEOUT
    assert "process group killed" in outcome.message
    # The agent never answered in the new session: nothing is kept to resume.
    assert outcome.external_session_id is None
    (cancel,) = agent.entries("cancel")
    (created,) = agent.entries("new")
    assert cancel["session_id"] == created["session_id"]
    (child,) = agent.entries("child")
    assert sink.pid is not None
    assert wait_gone(sink.pid), "the agent's process group survived"
    assert child["child"] not in group_members(sink.pid)
    # cancel grace + kill grace bound the stop (1 s each here), plus agent start-up.
    assert elapsed < min(wall_s, idle_s) + 1.0 + 2.0 + 4.0


async def test_a_megabyte_of_stderr_does_not_hang_the_session(agent: Agent) -> None:
    started = time.monotonic()
    outcome, sink = await run(agent.launch(stderr_bytes=1 << 20, inactivity_timeout_s=10))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert time.monotonic() - started < 10
    stderr = sink.stream("stderr")
    assert sum(len(line) + 1 for line in stderr) >= 1 << 20
    assert sink.stream("agent") == ["done: Write the page"]


@pytest.mark.parametrize(
    ("policy", "verdict"),
    [
        ({"mode": "allow_all"}, "allowed"),
        ({"mode": "allow_listed", "tools": ["edit"]}, "allowed"),
        ({"mode": "allow_listed", "tools": ["edit *.txt"]}, "allowed"),
        ({"mode": "allow_listed", "tools": ["read", "Bash(*)"]}, "denied"),
        ({"mode": "deny"}, "denied"),
        (None, "denied"),  # the default allows read-only tools only
    ],
)
async def test_permission_requests_follow_the_agents_policy(
    agent: Agent, policy: JSON | None, verdict: str
) -> None:
    launch = agent.launch(policy=policy, permission={"title": "Edit notes.txt", "kind": "edit"})

    outcome, sink = await run(launch)

    assert outcome.status is OutcomeStatus.SUCCEEDED
    (seen,) = agent.entries("permission")
    assert seen["verdict"] == verdict
    assert seen["option"] == ("yes" if verdict == "allowed" else "no")
    assert f"(permission {verdict})" in outcome.message
    (logged,) = [d for k, _, d in sink.events if k == "acp_permission"]
    assert logged["decision"] == verdict
    assert logged["title"] == "Edit notes.txt"
    assert logged["tool_kind"] == "edit"


async def test_a_read_only_tool_is_allowed_by_the_default_policy(agent: Agent) -> None:
    outcome, _ = await run(agent.launch(permission={"title": "Read a.txt", "kind": "read"}))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert [e["verdict"] for e in agent.entries("permission")] == ["allowed"]


async def test_an_invalid_policy_is_a_configuration_error(agent: Agent) -> None:
    outcome, sink = await run(agent.launch(policy={"mode": "sometimes"}))

    assert outcome.error_family is ErrorFamily.CONFIG
    assert "permission_policy: mode must be one of" in outcome.message
    assert sink.pid is None  # nothing was started


@pytest.mark.parametrize(
    ("script", "family", "text"),
    [
        ({"mode": "crash"}, ErrorFamily.CRASH, "scripted crash"),
        ({"mode": "fail"}, ErrorFamily.CRASH, "the scripted agent failed"),
        ({"mode": "rate_limit"}, ErrorFamily.RATE_LIMIT, "try again in 2 minutes"),
        ({"mode": "auth"}, ErrorFamily.AUTH, "Authentication required"),
        ({"mode": "refusal"}, ErrorFamily.REFUSAL, "stop reason refusal"),
        ({"mode": "max_tokens"}, ErrorFamily.TIMEOUT, "stop reason max_tokens"),
        ({"mode": "max_turn_requests"}, ErrorFamily.TIMEOUT, "stop reason max_turn_requests"),
    ],
)
async def test_failures_map_to_error_families(
    agent: Agent, script: dict[str, Any], family: ErrorFamily, text: str
) -> None:
    outcome, sink = await run(agent.launch(**script))

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is family
    assert text in outcome.message
    assert sink.pid is not None
    assert wait_gone(sink.pid)


async def test_a_missing_program_is_a_configuration_error(agent: Agent) -> None:
    launch = agent.launch()
    config = ExecutorConfig(name="x", kind="acp", argv=(str(agent.dir / "no-such-agent"),))
    missing = Launch(**{**_fields(launch), "config": config})

    outcome, _ = await run(missing)

    assert outcome.error_family is ErrorFamily.CONFIG
    assert "cannot start ACP agent" in outcome.message


def _fields(launch: Launch) -> dict[str, Any]:
    return {name: getattr(launch, name) for name in Launch.__slots__}


async def test_cancelling_the_run_stops_the_agent_group(agent: Agent) -> None:
    sink = Sink()
    task = asyncio.create_task(run(agent.launch(mode="hang_hard"), sink))
    for _ in range(200):
        if agent.entries("prompt"):
            break
        await asyncio.sleep(0.05)
    assert agent.entries("prompt"), "the agent never received the prompt"

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert sink.pid is not None
    assert wait_gone(sink.pid)
    assert len(agent.entries("cancel")) == 1


async def test_a_line_over_the_limit_fails_the_run_without_holding_it(agent: Agent) -> None:
    tracemalloc.start()
    try:
        outcome, sink = await run(agent.launch(huge_line=20 * 2**20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.CRASH
    assert f"agent sent a line over {LINE_LIMIT} bytes" in outcome.message
    assert peak < 2 * LINE_LIMIT
    assert sink.pid is not None


async def test_garbage_lines_are_dropped_counted_and_sampled_once(
    agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    outcome, sink = await run(agent.launch(garbage_lines=20_000, message="still fine"))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.message == "still fine"
    garbage = [(m, d) for kind, m, d in sink.events if kind == "acp_protocol_garbage"]
    ((message, data),) = garbage
    assert data["count"] == 20_002  # 20,000 text lines, a JSON array and a JSON string
    assert data["sample"] == "not json 0"
    assert "20002" in message
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_terminal_requests_get_method_not_found(agent: Agent) -> None:
    outcome, _sink = await run(agent.launch(terminal=True))

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert [entry["code"] for entry in agent.entries("terminal")] == [-32601]
