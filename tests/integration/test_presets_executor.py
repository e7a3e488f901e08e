"""The ``command`` executor with ``preset: claude|codex|gemini`` against fake CLIs on PATH.

Each fake CLI records its argv, stdin and the MCP wiring it was given, then prints a
recorded-format fixture from ``tests/fixtures/agents``.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.domain.execution import Launch
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus
from office_scheduler.executors.command import CommandExecutor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


class Sink:
    async def started(self, pid: int) -> None:
        self.pid = pid

    async def output(self, stream: str, line: str) -> None:
        pass


def fake_cli(bindir: Path, name: str, fixture: Path, record: Path) -> None:
    """An executable ``name`` that records what it got and prints ``fixture``."""
    script = bindir / name
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import json, os, sys
            argv = sys.argv[1:]
            mcp = None
            if "--mcp-config" in argv:
                mcp = json.load(open(argv[argv.index("--mcp-config") + 1]))
            home = os.environ.get("GEMINI_CLI_HOME")
            if home:
                mcp = json.load(open(os.path.join(home, ".gemini", "settings.json")))
            record = {{"argv": argv, "stdin": sys.stdin.read(), "mcp": mcp}}
            open({str(record)!r}, "w").write(json.dumps(record))
            sys.stdout.write(open({str(fixture)!r}).read())
            """
        )
    )
    script.chmod(0o755)


async def run_preset(
    tmp_path: Path, preset: str, fixture: str, *, resume: str | None = None
) -> tuple[Any, dict[str, Any]]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    record = tmp_path / "record.json"
    fake_cli(bindir, preset, FIXTURES / preset / fixture, record)
    launch = Launch(
        run_id=7,
        agent_id="ag_1",
        task_id="tk_1",
        workspace_id="ws_1",
        prompt="Fix the checkout test.",
        config=ExecutorConfig(name="agent", preset=preset, timeout_s=60),
        env={
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            "OFFICE_API_URL": "http://127.0.0.1:9",
            "OFFICE_TOKEN": "osr_secret",
        },
        cwd=str(tmp_path),
        resume_session_id=resume,
    )
    outcome = await CommandExecutor(kill_grace_s=0.5).run(launch, Sink())
    return outcome, json.loads(record.read_text())


async def test_claude_success_resumes_and_wires_mcp(tmp_path: Path) -> None:
    outcome, seen = await run_preset(
        tmp_path, "claude", "success.jsonl", resume="5d3a1f0e-8c2b-4b7e-9a61-0f4c2d9e7b10"
    )

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.message == "Fixed the failing checkout test and commented on the task."
    assert outcome.external_session_id == "5d3a1f0e-8c2b-4b7e-9a61-0f4c2d9e7b11"
    assert outcome.usage.cost_subcents == 421
    assert outcome.usage.priced is True
    assert seen["argv"][-1:] == ["--resume=5d3a1f0e-8c2b-4b7e-9a61-0f4c2d9e7b10"]
    assert seen["stdin"] == "Fix the checkout test."
    server = seen["mcp"]["mcpServers"]["office"]
    assert server["command"] == sys.executable
    assert server["args"][server["args"].index("--task") + 1] == "tk_1"


async def test_claude_usage_limit_fails_as_rate_limit(tmp_path: Path) -> None:
    outcome, _seen = await run_preset(tmp_path, "claude", "usage_limit.jsonl")

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.RATE_LIMIT
    assert outcome.message == "Claude AI usage limit reached|1772481600"


async def test_claude_refusal_is_not_success(tmp_path: Path) -> None:
    outcome, _seen = await run_preset(tmp_path, "claude", "refusal.jsonl")

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.REFUSAL


async def test_codex_success_is_unpriced(tmp_path: Path) -> None:
    outcome, seen = await run_preset(
        tmp_path, "codex", "success.jsonl", resume="0199a213-81c0-7800-8aa1-bbab2a035a50"
    )

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.message == "All 12 tests pass; the task is marked done."
    assert outcome.usage.priced is False
    assert outcome.usage.cost_subcents == 0
    assert seen["argv"][-3:] == ["resume", "0199a213-81c0-7800-8aa1-bbab2a035a50", "-"]
    assert seen["stdin"] == "Fix the checkout test."


@pytest.mark.parametrize(
    ("fixture", "family"),
    [("auth.jsonl", ErrorFamily.AUTH), ("unknown_model.jsonl", ErrorFamily.CONFIG)],
)
async def test_codex_failures_have_their_family(
    tmp_path: Path, fixture: str, family: ErrorFamily
) -> None:
    outcome, _seen = await run_preset(tmp_path, "codex", fixture)

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is family


async def test_gemini_stream_prompt_in_argv_and_trusted_mcp(tmp_path: Path) -> None:
    outcome, seen = await run_preset(tmp_path, "gemini", "stream_success.jsonl")

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.message == "The flaky test is fixed."
    assert outcome.usage.model == "gemini-2.5-flash"
    assert seen["argv"][-2:] == ["--prompt", "Fix the checkout test."]
    assert seen["stdin"] == ""
    assert seen["mcp"]["mcpServers"]["office"]["trust"] is True
    assert "--skip-trust" in seen["argv"]


async def test_unknown_preset_is_a_config_failure(tmp_path: Path) -> None:
    launch = Launch(
        run_id=7,
        agent_id="ag_1",
        task_id=None,
        workspace_id="ws_1",
        prompt="hi",
        config=ExecutorConfig(name="agent", preset="copilot"),
        env={},
        cwd=str(tmp_path),
    )

    outcome = await CommandExecutor().run(launch, Sink())

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.CONFIG
    assert "copilot" in outcome.message
