"""Resumed ``claude`` preset sessions through the whole pipeline, on both databases.

A fake ``claude`` CLI on PATH keeps its sessions as files; a session it does not know makes
it answer ``No conversation found with session ID: <id>`` (exit 1) like Claude Code does.
A lost session falls back once to a new session within the same run; a session of another
executor or another working directory is never resumed.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.config import Settings
from office_scheduler.domain.models import Agent, ExecutorConfig, Run, Task, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunStatus
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

HOLD = timedelta(seconds=10)
NOT_LOGGED_IN = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "agents"
    / "claude"
    / "real-2.1.332-not-logged-in.jsonl"
)

pytestmark = pytest.mark.timeout(60)

FAKE_CLAUDE = """
import json, os, sys, uuid
from pathlib import Path
argv = sys.argv[1:]
state = Path(os.environ["FAKE_CLAUDE_STATE"])
state.mkdir(exist_ok=True)
resume = next((a.split("=", 1)[1] for a in argv if a.startswith("--resume=")), None)
entry = {"resume": resume, "stdin": sys.stdin.read(), "cwd": os.getcwd()}
with open(os.environ["FAKE_CLAUDE_JOURNAL"], "a") as journal:
    journal.write(json.dumps(entry) + "\\n")
logged_out = os.environ.get("FAKE_CLAUDE_LOGGED_OUT", "")
if logged_out and os.path.exists(logged_out):
    # What Claude Code 2.1.332 really prints without a login (init names a session).
    sys.stdout.write(open(os.environ["FAKE_CLAUDE_NOT_LOGGED_IN"]).read())
    sys.exit(1)
if resume and not (state / resume).exists():
    sys.stderr.write(f"No conversation found with session ID: {resume}\\n")
    sys.exit(1)
session = resume or str(uuid.uuid4())
(state / session).touch()
print(json.dumps({"type": "system", "subtype": "init", "session_id": session}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "done", "session_id": session}))
"""


@dataclass
class PresetOffice:
    service: Service
    clock: FakeClock
    worker: Agent
    project_id: str
    workspace_id: str
    state: Path
    journal: Path

    @property
    def store(self) -> Store:
        return self.service.store

    def calls(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines()]

    def runs(self) -> list[Run]:
        page = self.store.listing.list_runs(agent_id=self.worker.id, limit=100)
        return sorted(page.items, key=lambda run: run.id)

    def events(self, run_id: int, kind: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (e.message, dict(e.data))
            for e in self.store.runlog.list_run_events(run_id)
            if e.kind == kind
        ]

    async def task(self) -> Task:
        task = await self.service.office.create_task(
            workspace_id=self.workspace_id,
            title="Write the page",
            project_id=self.project_id,
            assignee_agent_id=self.worker.id,
        )
        await self.drain()
        return task

    async def again(self, task: Task) -> Run:
        self.clock.advance(HOLD)
        await self.service.wake(self.worker.id, task_id=task.id)
        await self.drain()
        return self.runs()[-1]

    async def drain(self) -> None:
        self.clock.advance(HOLD)
        await self.service.run_until_idle()


@pytest.fixture
async def preset_office(
    database: Database, now: Any, tmp_path: Path
) -> AsyncIterator[PresetOffice]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "claude"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE_CLAUDE))
    script.chmod(0o755)
    state, journal = tmp_path / "claude-state", tmp_path / "claude.jsonl"
    env = {
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_CLAUDE_STATE": str(state),
        "FAKE_CLAUDE_JOURNAL": str(journal),
        "FAKE_CLAUDE_LOGGED_OUT": str(tmp_path / "logged-out"),
        "FAKE_CLAUDE_NOT_LOGGED_IN": str(NOT_LOGGED_IN),
    }
    clock = FakeClock(now)
    store = Store.from_database(database)
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    executors = {"command": CommandExecutor(kill_grace_s=0.5)}
    service = Service(settings, clock=clock, executors=executors, store=store)
    configs = {
        name: ExecutorConfig(name=name, preset="claude", env=env, timeout_s=30)
        for name in ("claude-a", "claude-b")
    }
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5), default_executor="claude-a", executors=configs
        ),
        now=clock.now(),
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    project = store.office.create_project(
        workspace_id=workspace.id, name="site", directory=str(tmp_path / "site"), now=clock.now()
    )
    yield PresetOffice(
        service=service,
        clock=clock,
        worker=worker,
        project_id=project.id,
        workspace_id=workspace.id,
        state=state,
        journal=journal,
    )
    await service.stop()


async def test_a_lost_session_falls_back_once_and_is_never_resumed_again(
    preset_office: PresetOffice,
) -> None:
    office = preset_office
    task = await office.task()
    (first_call,) = office.calls()
    (lost,) = [path.name for path in office.state.iterdir()]
    (office.state / lost).unlink()  # the CLI forgot the session

    second = await office.again(task)

    assert second.status is RunStatus.FINISHED
    assert second.prompt_kind == "delta"
    resumed, fresh = office.calls()[1:]
    assert resumed["resume"] == lost
    assert fresh["resume"] is None
    assert fresh["stdin"] != resumed["stdin"]  # the full prompt, not the delta
    assert fresh["stdin"].splitlines()[0] == first_call["stdin"].splitlines()[0]
    ((message, data),) = office.events(second.id, "session_fallback")
    assert "No conversation found with session ID" in message
    assert data["session_id"] == lost
    assert data["full_prompt"] is True
    newest = office.store.runlog.latest_resumable_session(task.id, office.worker.id)
    assert newest is not None
    assert newest.run_id == second.id
    assert newest.external_session_id not in (None, lost)

    third = await office.again(task)

    assert third.status is RunStatus.FINISHED
    assert office.calls()[-1]["resume"] == newest.external_session_id
    assert len(office.calls()) == 4
    assert office.events(third.id, "session_fallback") == []


async def test_a_session_the_model_never_answered_in_is_not_resumed(
    preset_office: PresetOffice, tmp_path: Path
) -> None:
    office = preset_office
    logged_out = tmp_path / "logged-out"
    logged_out.touch()
    task = await office.task()
    (failed,) = office.runs()
    assert failed.status is RunStatus.SCHEDULED_RETRY
    assert "Not logged in" in (failed.error or "")
    # The empty session's id is not stored, so nothing is resumable.
    assert office.store.runlog.latest_resumable_session(task.id, office.worker.id) is None
    logged_out.unlink()

    office.clock.advance(timedelta(minutes=5))  # past the jittered backoff
    await office.drain()

    (retried,) = office.runs()
    assert retried.status is RunStatus.FINISHED
    assert retried.prompt_kind == "full"
    first_call, retry_call = office.calls()
    assert retry_call["resume"] is None
    assert retry_call["stdin"] == first_call["stdin"]


async def test_a_session_of_another_executor_is_not_resumed(preset_office: PresetOffice) -> None:
    office = preset_office
    task = await office.task()
    office.store.office.update_agent(office.worker.id, now=office.clock.now(), executor="claude-b")

    second = await office.again(task)

    assert second.status is RunStatus.FINISHED
    assert second.prompt_kind == "full"
    assert [call["resume"] for call in office.calls()] == [None, None]


async def test_a_session_from_another_directory_is_not_resumed(
    preset_office: PresetOffice, tmp_path: Path
) -> None:
    office = preset_office
    task = await office.task()
    office.store.office.update_project(
        office.project_id, now=office.clock.now(), directory=str(tmp_path / "moved")
    )

    second = await office.again(task)

    assert second.status is RunStatus.FINISHED
    assert second.prompt_kind == "full"
    first, again = office.calls()
    assert (first["resume"], again["resume"]) == (None, None)
    assert again["cwd"] == str(tmp_path / "moved")
