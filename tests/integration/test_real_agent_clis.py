"""Opt-in (``make test-real-agents``): the presets against the published agent CLIs, offline.

Installs ``@anthropic-ai/claude-code``, ``@openai/codex``, ``@google/gemini-cli`` and
``@zed-industries/claude-code-acp`` at the versions pinned in ``tests/agents/real_clis.py``
into a cache folder and runs them through the ``command`` executor exactly as a preset
launches them. No provider is reachable from the test machines, so what is checked is what
happens before a model answers: every flag a preset passes (new session and resume, with
the documented ``preset_args``) is accepted by the real binary; a real no-credentials answer
is classified ``auth``, runs once and leaves no session to resume; Gemini passes its trust and
settings checks and lists the office MCP server; Codex's offline reconnect loop ends by the
stall rule; ``gemini --acp`` is trusted and answers ``auth`` (``claude-code-acp``: see
``test_acp_real_agents.py``). Deselected by default; skipped with a reason when npm or its
registry is unreachable and nothing is cached yet.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agents.real_clis import PINS, bin_dir, install, registry_reachable
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.executors.presets import build_invocation

pytestmark = [pytest.mark.real_agents, pytest.mark.timeout(600)]

#: The ``preset_args`` docs/agents.md shows for each CLI (what it needs to act unattended).
DOCUMENTED_ARGS: dict[str, tuple[str, ...]] = {
    "claude": ("--permission-mode", "acceptEdits"),
    "codex": ("--sandbox", "workspace-write"),
    "gemini": ("--approval-mode", "auto_edit"),
}
#: Texts of the CLIs' argument parsers rejecting a flag.
FLAG_REJECTED = ("unknown option", "Unknown argument", "unexpected argument")
STALL_S = 4.0


@pytest.fixture(scope="module")
def clis() -> dict[str, Path]:
    """The pinned CLIs' bin folders; installs what the cache lacks."""
    missing = [name for name, pin in PINS.items() if not (bin_dir(pin) / pin.binary).exists()]
    if missing:
        reason = registry_reachable()
        if reason is not None:
            pytest.skip(reason)
    try:
        return install(list(PINS))
    except RuntimeError as exc:
        pytest.skip(str(exc))


class Sink:
    def __init__(self) -> None:
        self.starts = 0
        self.lines: list[tuple[str, str]] = []
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def started(self, pid: int) -> None:
        self.starts += 1

    async def output(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))

    async def event(self, kind: str, message: str, data: Any) -> None:
        self.events.append((kind, message, dict(data)))

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def make_launch(
    tmp_path: Path,
    clis: dict[str, Path],
    preset: str,
    *,
    resume: str | None = None,
    preset_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Launch:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    node = Path(shutil.which("node") or "/usr/bin/node").parent
    path = [str(clis[preset]), str(node), os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    return Launch(
        run_id=7,
        agent_id="ag_1",
        task_id="tk_1",
        workspace_id="ws_1",
        prompt="Say hello.",
        full_prompt="Say hello.",
        config=ExecutorConfig(
            name=preset,
            preset=preset,
            preset_args=preset_args,
            timeout_s=240,
            inactivity_timeout_s=120,
            stall_timeout_s=STALL_S,
        ),
        env={
            "HOME": str(home),
            "PATH": os.pathsep.join(path),
            "LANG": "C.UTF-8",
            "OFFICE_API_URL": "http://127.0.0.1:9",
            "OFFICE_TOKEN": "osr_not_a_real_token",
            **(env or {}),
        },
        cwd=str(work),
        resume_session_id=resume,
    )


async def run(launch: Launch) -> tuple[Outcome, Sink]:
    sink = Sink()
    outcome = await CommandExecutor(kill_grace_s=1.0).run(launch, sink)
    return outcome, sink


#: What a session of each CLI ends as without a provider: Claude without a login answers
#: "Not logged in" (auth); Codex and Gemini (with a fake key) retry the network until the
#: stall rule ends them (transient).
OFFLINE: dict[str, tuple[ErrorFamily, dict[str, str]]] = {
    "claude": (ErrorFamily.AUTH, {}),
    "codex": (ErrorFamily.TRANSIENT, {}),
    "gemini": (ErrorFamily.TRANSIENT, {"GEMINI_API_KEY": "not-a-real-key"}),
}


@pytest.mark.parametrize("resume", [False, True], ids=["new", "resume"])
@pytest.mark.parametrize("preset", ["claude", "codex", "gemini"])
async def test_every_preset_flag_is_accepted(
    clis: dict[str, Path], tmp_path: Path, preset: str, resume: bool
) -> None:
    family, env = OFFLINE[preset]
    launch = make_launch(
        tmp_path,
        clis,
        preset,
        resume=str(uuid.uuid4()) if resume else None,
        preset_args=DOCUMENTED_ARGS[preset],
        env=env,
    )

    outcome, sink = await run(launch)

    output = sink.text()
    assert not [text for text in FLAG_REJECTED if text in output], output[-2000:]
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is family, (outcome.message, output[-2000:])
    fallbacks = [data for kind, _, data in sink.events if kind == "session_fallback"]
    # An unknown session id is reported as a lost session, never as a bad flag.
    assert len(fallbacks) == (1 if resume else 0), output[-2000:]


@pytest.mark.parametrize("preset", ["claude", "codex", "gemini"])
async def test_a_bad_flag_is_a_config_failure(
    clis: dict[str, Path], tmp_path: Path, preset: str
) -> None:
    """The control for the test above: the real parsers do reject an unknown flag."""
    launch = make_launch(tmp_path, clis, preset, preset_args=("--no-such-flag",))

    outcome, _sink = await run(launch)

    assert outcome.error_family is ErrorFamily.CONFIG, outcome.message


@pytest.mark.parametrize("preset", ["claude", "gemini"])
async def test_no_credentials_is_auth_once_and_leaves_no_session(
    clis: dict[str, Path], tmp_path: Path, preset: str
) -> None:
    outcome, sink = await run(make_launch(tmp_path, clis, preset))

    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.AUTH, outcome.message
    assert "\x1b[" not in outcome.message
    assert sink.starts == 1
    assert not [kind for kind, _, _ in sink.events if kind == "session_fallback"]
    # The model never answered: nothing to resume, the retry starts afresh.
    assert outcome.external_session_id is None


async def test_gemini_with_a_fake_key_is_trusted_and_lists_the_office_server(
    clis: dict[str, Path], tmp_path: Path
) -> None:
    launch = make_launch(tmp_path, clis, "gemini", env={"GEMINI_API_KEY": "not-a-real-key"})

    outcome, sink = await run(launch)

    stderr = "\n".join(line for stream, line in sink.lines if stream == "stderr")
    assert "trusted directory" not in stderr
    assert "Security Warning" not in stderr
    assert outcome.error_family is ErrorFamily.TRANSIENT, outcome.message
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    invocation = build_invocation(launch, run_dir)
    assert invocation is not None
    listed = subprocess.run(
        [str(clis["gemini"] / "gemini"), "mcp", "list"],
        env={**launch.env, **invocation.env},
        cwd=launch.cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    text = listed.stdout + listed.stderr
    assert "office" in text, text
    assert "Disabled" not in text, text
    assert "untrusted" not in text, text
    assert "Security Warning" not in text, text


async def test_codex_offline_reconnect_loop_ends_by_the_stall_rule(
    clis: dict[str, Path], tmp_path: Path
) -> None:
    started = time.monotonic()

    outcome, sink = await run(make_launch(tmp_path, clis, "codex"))

    elapsed = time.monotonic() - started
    assert outcome.error_family is ErrorFamily.TRANSIENT, outcome.message
    assert outcome.message.startswith("Reconnecting"), outcome.message
    assert any("Reconnecting" in line for _, line in sink.lines)
    # Far below the 120 s inactivity and 240 s wall limits: the stall rule ended it.
    assert elapsed < 100


async def test_gemini_acp_is_trusted_and_answers_auth_without_a_key(
    clis: dict[str, Path], tmp_path: Path
) -> None:
    from office_scheduler.executors.acp import AcpExecutor

    base = make_launch(tmp_path, clis, "gemini")
    launch = Launch(
        run_id=base.run_id,
        agent_id=base.agent_id,
        task_id=None,
        workspace_id=base.workspace_id,
        prompt=base.prompt,
        config=ExecutorConfig(
            name="gemini-acp",
            kind="acp",
            argv=(str(clis["gemini"] / "gemini"), "--acp", "--skip-trust"),
            timeout_s=120,
            inactivity_timeout_s=90,
        ),
        env=base.env,
        cwd=base.cwd,
        permission_policy={"mode": "deny"},
    )
    sink = Sink()

    outcome = await asyncio.wait_for(
        AcpExecutor(cancel_grace_s=2.0, kill_grace_s=2.0).run(launch, sink), 180
    )

    stderr = "\n".join(line for stream, line in sink.lines if stream == "stderr")
    assert "trusted directory" not in stderr
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.AUTH, outcome.message
    assert outcome.external_session_id is None
