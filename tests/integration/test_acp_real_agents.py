"""Opt-in: our ACP client against the published ``@zed-industries/claude-code-acp`` agent.

Run with ``make test-real-agents``. It installs the pinned package from npm into the cache
folder of ``tests/agents/real_clis.py`` and drives it through the ``acp`` executor. No
credentials exist on these machines: ``initialize`` and ``session/new`` complete, then the
prompt turn fails as ``auth``. Deselected by default; skipped with a reason when npm or its
registry is unreachable.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.real_clis import PINS, bin_dir, install, registry_reachable
from office_scheduler.domain.execution import Launch
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus
from office_scheduler.executors.acp import AcpExecutor

pytestmark = [pytest.mark.real_agents, pytest.mark.timeout(600)]


class Sink:
    def __init__(self) -> None:
        self.pid: int | None = None
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.lines: list[tuple[str, str]] = []

    async def started(self, pid: int) -> None:
        self.pid = pid

    async def output(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))

    async def event(self, kind: str, message: str, data: Any) -> None:
        self.events.append((kind, message, dict(data)))


@pytest.fixture
def installed_agent() -> Path:
    """The pinned agent's executable (``tests/agents/real_clis.py``), installed once into the cache.

    The ``real_agents`` marker keeps this test out of the default run (``addopts`` has
    ``-m 'not real_agents'``); ``pytest -m real_agents`` selects it. Skips when npm or its
    registry is unreachable and the cache lacks the package.
    """
    pin = PINS["claude-code-acp"]
    if not (bin_dir(pin) / pin.binary).exists():
        reason = registry_reachable()
        if reason is not None:
            pytest.skip(reason)
    try:
        folder = install(["claude-code-acp"])["claude-code-acp"]
    except RuntimeError as exc:
        pytest.skip(str(exc))
    binary = folder / pin.binary
    assert binary.exists(), f"{pin.spec} installed no {pin.binary} executable"
    return binary


async def test_claude_code_acp_completes_initialize_and_session_new(
    installed_agent: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    node_dir = str(Path(shutil.which("node") or "node").parent)
    launch = Launch(
        run_id=1,
        agent_id="agent-1",
        task_id=None,
        workspace_id="ws-1",
        prompt="Say hello.",
        config=ExecutorConfig(
            name="claude-code-acp",
            kind="acp",
            argv=(str(installed_agent),),
            timeout_s=60,
            inactivity_timeout_s=60,
        ),
        # No credentials: an empty HOME and a PATH that finds node.
        env={
            "HOME": str(home),
            "PATH": os.pathsep.join([node_dir, os.path.dirname(sys.executable), "/usr/bin"]),
        },
        cwd=str(work),
        permission_policy={"mode": "deny"},
    )
    sink = Sink()

    outcome = await AcpExecutor(cancel_grace_s=2.0, kill_grace_s=2.0).run(launch, sink)

    news = [data for kind, _, data in sink.events if kind == "acp_session_new"]
    assert news, f"no session/new: {outcome.message} / {sink.lines[-5:]}"
    assert news[0]["session_id"]
    # No credentials: the turn fails as auth, and since the agent never answered, the
    # session is not kept for resuming.
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error_family is ErrorFamily.AUTH, outcome.message
    assert outcome.external_session_id is None
