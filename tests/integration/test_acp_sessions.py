"""ACP sessions through the whole pipeline, on both databases (real agent subprocesses).

Task-bound runs resume the prior (task, agent) session with ``session/load`` in a new agent
process; a lost session falls back to ``session/new`` with a run event; taskless runs never
resume; a rate-limited turn is retried at the reset the agent named.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from office_scheduler.config import Settings
from office_scheduler.domain.models import Agent, ExecutorConfig, Run, Task, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunReason, RunStatus
from office_scheduler.executors.acp import AcpExecutor
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import agents
from office_scheduler.testing import FakeClock

AGENT = Path(__file__).resolve().parents[1] / "agents" / "acp_agent.py"
HOLD = timedelta(seconds=10)

pytestmark = pytest.mark.timeout(60)


@dataclass
class AcpOffice:
    service: Service
    clock: FakeClock
    worker: Agent
    project_id: str
    workspace_id: str
    script: Path
    state: Path
    journal: Path

    @property
    def store(self) -> Store:
        return self.service.store

    def set_script(self, **script: Any) -> None:
        script.setdefault("state_dir", str(self.state))
        script.setdefault("journal", str(self.journal))
        self.script.write_text(json.dumps(script))

    def entries(self, event: str) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        rows = [json.loads(line) for line in self.journal.read_text().splitlines()]
        return [row for row in rows if row["event"] == event]

    async def drain(self) -> None:
        self.clock.advance(HOLD)
        await self.service.run_until_idle()

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
        return await self.service.office.create_task(
            workspace_id=self.workspace_id,
            title="Write the page",
            project_id=self.project_id,
            assignee_agent_id=self.worker.id,
        )


@pytest.fixture
async def acp_office(database: Database, now: Any, tmp_path: Path) -> AsyncIterator[AcpOffice]:
    clock = FakeClock(now)
    store = Store.from_database(database)
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    executor = AcpExecutor(cancel_grace_s=1.0, kill_grace_s=1.0)
    service = Service(settings, clock=clock, executors={"acp": executor}, store=store)
    script = tmp_path / "script.json"
    config = ExecutorConfig(
        name="acp-test",
        kind="acp",
        argv=(sys.executable, str(AGENT)),
        env={"ACP_TEST_SCRIPT": str(script)},
        pass_env=("PATH",),
        timeout_s=30,
        inactivity_timeout_s=30,
    )
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5),
            default_executor="acp-test",
            executors={"acp-test": config},
        ),
        now=clock.now(),
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    project = store.office.create_project(
        workspace_id=workspace.id, name="site", directory=str(tmp_path / "site"), now=clock.now()
    )
    office = AcpOffice(
        service=service,
        clock=clock,
        worker=worker,
        project_id=project.id,
        workspace_id=workspace.id,
        script=script,
        state=tmp_path / "state",
        journal=tmp_path / "journal.jsonl",
    )
    office.set_script()
    yield office
    await service.stop()


async def test_the_second_run_of_a_task_resumes_its_session_in_a_new_process(
    acp_office: AcpOffice,
) -> None:
    office = acp_office
    office.set_script(message="first pass")
    task = await office.task()
    await office.drain()
    office.set_script(message="second pass")
    office.clock.advance(HOLD)
    await office.service.wake(office.worker.id, task_id=task.id)
    await office.drain()

    first, second = office.runs()
    assert (first.status, second.status) == (RunStatus.FINISHED, RunStatus.FINISHED)
    (new,) = office.entries("new")
    (load,) = office.entries("load")
    assert load["session_id"] == new["session_id"]
    assert load["found"] is True
    prompts = office.entries("prompt")
    assert [p["session_id"] for p in prompts] == [new["session_id"]] * 2
    assert prompts[0]["pid"] != prompts[1]["pid"]
    stored = office.store.runlog.latest_resumable_session(task.id, office.worker.id)
    assert stored is not None
    assert stored.run_id == second.id
    assert stored.external_session_id == new["session_id"]
    assert stored.cwd == str(Path(office.entries("new")[0]["cwd"]))
    assert stored.resumed_from is not None
    replayed = office.events(second.id, "acp_replay")
    assert [m for m, _ in replayed][-1] == "first pass"
    assert all(data["replay"] is True for _, data in replayed)
    assert office.events(second.id, "acp_session_loaded")
    outputs = [e.message for e in office.store.runlog.list_run_events(second.id)]
    kinds = [e.kind for e in office.store.runlog.list_run_events(second.id)]
    assert ("output.agent", "second pass") in list(zip(kinds, outputs, strict=True))
    assert ("output.agent", "first pass") not in list(zip(kinds, outputs, strict=True))
    assert second.result is not None
    assert second.result["resumed"] is True


async def test_a_lost_session_falls_back_to_a_new_one_and_the_run_succeeds(
    acp_office: AcpOffice,
) -> None:
    office = acp_office
    task = await office.task()
    await office.drain()
    shutil.rmtree(office.state)  # the agent forgot every session
    office.clock.advance(HOLD)
    await office.service.wake(office.worker.id, task_id=task.id)
    await office.drain()

    _, second = office.runs()
    assert second.status is RunStatus.FINISHED
    ((message, data),) = office.events(second.id, "acp_session_fallback")
    assert "starting a new session" in message
    assert "-32002" in data["error"]
    first_id, second_id = [e["session_id"] for e in office.entries("new")]
    assert first_id != second_id
    stored = office.store.runlog.latest_resumable_session(task.id, office.worker.id)
    assert stored is not None
    assert stored.external_session_id == second_id


async def test_taskless_runs_never_resume(acp_office: AcpOffice) -> None:
    office = acp_office
    await office.service.wake(office.worker.id)
    await office.drain()
    office.clock.advance(HOLD)
    await office.service.wake(office.worker.id)
    await office.drain()

    runs = office.runs()
    assert [run.status for run in runs] == [RunStatus.FINISHED, RunStatus.FINISHED]
    assert all(run.task_id is None for run in runs)
    assert office.entries("load") == []
    assert len({e["session_id"] for e in office.entries("new")}) == 2
    for run in runs:
        assert office.events(run.id, "acp_session_fallback") == []


async def test_a_rate_limited_turn_is_retried_at_the_reset(acp_office: AcpOffice) -> None:
    office = acp_office
    office.set_script(mode="rate_limit")
    await office.task()
    office.clock.advance(HOLD)
    failed_at = office.clock.now()
    await office.service.run_until_idle()

    (run,) = office.runs()
    assert run.status is RunStatus.SCHEDULED_RETRY
    assert run.not_before == failed_at + timedelta(minutes=2, seconds=30)
    assert run.error is not None
    assert "try again in 2 minutes" in run.error
    ((_, data),) = office.events(run.id, "retry_scheduled")
    assert data["source"] == "rate_limit_parsed"
    assert data["error_family"] == "rate_limit"


async def test_a_crashing_agent_fails_the_run_with_its_stderr(acp_office: AcpOffice) -> None:
    office = acp_office
    office.set_script(mode="crash")
    await office.task()
    await office.drain()

    (run,) = office.runs()
    assert run.status is RunStatus.SCHEDULED_RETRY
    assert run.error is not None
    assert "scripted crash" in run.error
    stderr = [e.message for e in office.store.runlog.list_run_events(run.id)]
    assert "scripted crash" in stderr


async def test_the_agents_stored_policy_answers_permission_requests(
    acp_office: AcpOffice,
) -> None:
    office = acp_office
    with office.store.db.write() as conn:
        conn.execute(
            sa.update(agents)
            .where(agents.c.id == office.worker.id)
            .values(permission_policy={"mode": "allow_listed", "tools": ["edit"]})
        )
    office.set_script(permission={"title": "Edit index.html", "kind": "edit"})
    await office.task()
    await office.drain()

    (run,) = office.runs()
    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert [e["verdict"] for e in office.entries("permission")] == ["allowed"]
    ((message, data),) = office.events(run.id, "acp_permission")
    assert message == "allowed: Edit index.html"
    assert data["policy"] == "allow_listed: edit"


async def test_the_agent_gets_only_the_explicit_environment(
    acp_office: AcpOffice, monkeypatch: pytest.MonkeyPatch
) -> None:
    office = acp_office
    monkeypatch.setenv("ACP_PARENT_ONLY", "secret")
    await office.task()
    await office.drain()

    (init,) = office.entries("initialize")
    assert init["client"] == "office-scheduler"
    assert "ACP_PARENT_ONLY" not in init["env"]
    for name in ("OFFICE_TOKEN", "OFFICE_RUN_ID", "OFFICE_TASK_ID", "ACP_TEST_SCRIPT"):
        assert name in init["env"]
