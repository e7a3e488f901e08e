"""A session id printed by an agent never becomes a command-line option of its next run.

A fake ``claude`` CLI prints the session id it is told to (a flag, then a real UUID) and
journals its argv; the runs go through the whole pipeline and are read over the HTTP API.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch
from office_scheduler.domain.models import ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunStatus
from office_scheduler.executors import session_ids
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.executors.presets import build_invocation
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

HOLD = timedelta(seconds=10)
UUID = "5d3a1f0e-8c2b-4b7e-9a61-0f4c2d9e7b11"

pytestmark = pytest.mark.timeout(60)

FAKE_CLAUDE = """
import json, os, sys
from pathlib import Path
with open(os.environ["FAKE_JOURNAL"], "a") as journal:
    journal.write(json.dumps(sys.argv[1:]) + "\\n")
sys.stdin.read()
session = Path(os.environ["FAKE_SESSION_FILE"]).read_text()
print(json.dumps({"type": "system", "subtype": "init", "session_id": session}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "done", "session_id": session}))
"""


@dataclass
class Office:
    service: Service
    clock: FakeClock
    workspace_id: str
    agent_id: str
    journal: Path
    session_file: Path
    admin: str

    def argvs(self) -> list[list[str]]:
        return [json.loads(line) for line in self.journal.read_text().splitlines()]

    async def run(self, task_id: str, prints: str) -> int:
        self.session_file.write_text(prints)
        self.clock.advance(HOLD)
        await self.service.wake(self.agent_id, task_id=task_id)
        self.clock.advance(HOLD)
        await self.service.run_until_idle()
        runs = self.service.store.listing.list_runs(agent_id=self.agent_id, limit=100).items
        return max(run.id for run in runs)


@pytest.fixture
async def office(database: Database, now: Any, tmp_path: Path) -> AsyncIterator[Office]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "claude"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE_CLAUDE))
    script.chmod(0o755)
    journal, session_file = tmp_path / "argv.jsonl", tmp_path / "session"
    env = {
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_JOURNAL": str(journal),
        "FAKE_SESSION_FILE": str(session_file),
    }
    clock = FakeClock(now)
    store = Store.from_database(database)
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    service = Service(
        settings, clock=clock, executors={"command": CommandExecutor(kill_grace_s=0.5)}, store=store
    )
    config = ExecutorConfig(name="claude", preset="claude", env=env, timeout_s=30)
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5),
            default_executor="claude",
            executors={"claude": config},
        ),
        now=clock.now(),
    )
    agent = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    admin, _ = service.tokens.mint_admin(name="t", now=clock.now())
    yield Office(service, clock, workspace.id, agent.id, journal, session_file, admin)
    await service.stop()


async def _events(office: Office, run_id: int) -> list[dict[str, Any]]:
    transport = httpx.ASGITransport(app=create_app(office.service))
    headers = {"Authorization": f"Bearer {office.admin}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get(f"/api/v1/runs/{run_id}", headers=headers)
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


async def test_a_printed_flag_is_dropped_and_the_next_run_starts_fresh(office: Office) -> None:
    task = await office.service.office.create_task(
        workspace_id=office.workspace_id, title="t", assignee_agent_id=office.agent_id
    )
    first = await office.run(task.id, "--dangerously-skip-permissions")
    assert office.service.store.queue.get_run(first).status is RunStatus.FINISHED
    dropped = [e for e in await _events(office, first) if e["kind"] == "session_id_dropped"]
    assert len(dropped) == 1
    assert dropped[0]["data"]["session_id"] == "--dangerously-skip-permissions"

    second = await office.run(task.id, UUID)
    assert office.service.store.queue.get_run(second).status is RunStatus.FINISHED
    third = await office.run(task.id, UUID)
    argvs = office.argvs()
    assert len(argvs) == 3
    assert "--dangerously-skip-permissions" not in argvs[1], "never on a command line"
    assert not any(arg.startswith("--resume") for arg in argvs[1]), "started fresh"
    assert argvs[2][-1] == f"--resume={UUID}", "a real id is resumed, as one argument"
    kinds = [e["kind"] for e in await _events(office, third)]
    assert "session_id_dropped" not in kinds


@pytest.mark.parametrize(
    ("preset", "good", "bad"),
    [
        ("claude", UUID, "--dangerously-skip-permissions"),
        ("gemini", UUID, "latest --yolo"),
        ("codex", "0199a213-81c0-7800-8aa1-bbab2a035a53", "--last"),
    ],
)
async def test_a_stored_id_of_the_wrong_shape_is_never_resumed(
    tmp_path: Path, preset: str, good: str, bad: str
) -> None:
    events: list[tuple[str, dict[str, Any]]] = []

    class Sink:
        async def started(self, pid: int) -> None:
            pass

        async def output(self, stream: str, line: str) -> None:
            pass

        async def event(self, kind: str, message: str, data: Any) -> None:
            events.append((kind, dict(data)))

    config = ExecutorConfig(name=preset, preset=preset)
    base = Launch(
        run_id=1,
        workspace_id="w",
        agent_id="a",
        task_id="t",
        config=config,
        prompt="delta",
        full_prompt="full",
        env={},
        cwd=str(tmp_path),
    )
    for stored, kept in [(good, True), (bad, False)]:
        launch = await session_ids.screen_launch(replace(base, resume_session_id=stored), Sink())
        invocation = build_invocation(launch, tmp_path)
        assert invocation is not None
        assert (launch.resume_session_id == stored) is kept
        assert not any(arg.startswith("-") and bad in arg for arg in invocation.argv)
        assert all(bad not in arg for arg in invocation.argv)
    assert [kind for kind, _ in events] == ["session_id_dropped"]
    assert session_ids.is_valid(preset, good)
    assert not session_ids.is_valid(preset, bad)
    assert session_ids.is_valid(None, bad), "hand-written argv never carries it"
