"""Agent output that a database cannot store as-is, through the whole pipeline (both DBs).

NUL characters, lone surrogates and ``NaN`` in agent output and results are cleaned before
they are stored (PostgreSQL rejects NUL in text and JSON); absurd token counts are clamped;
run-event ``data`` is size-capped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.config import Settings
from office_scheduler.domain.models import Agent, ExecutorConfig, Run, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunReason, RunStatus
from office_scheduler.executors.acp import AcpExecutor
from office_scheduler.executors.base import Executor
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.pipeline.storable import MAX_DATA_STRING
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

AGENT = Path(__file__).resolve().parents[1] / "agents" / "acp_agent.py"
HOLD = timedelta(seconds=10)

pytestmark = pytest.mark.timeout(60)

# Prints a line with a NUL, then a result with NUL, a lone surrogate, NaN and absurd tokens.
COMMAND_AGENT = r"""
import json, sys
sys.stdout.write("before\x00after\n")
print(json.dumps({
    "status": "ok",
    "summary": "sum\u0000mary",
    "lone": "\ud800",
    "total_cost_usd": float("nan"),
    "usage": {"input_tokens": -500, "output_tokens": 10**23},
}))
"""


@dataclass
class Office:
    service: Service
    clock: FakeClock
    worker: Agent
    workspace_id: str
    script: Path

    @property
    def store(self) -> Store:
        return self.service.store

    async def one_run(self) -> Run:
        await self.service.office.create_task(
            workspace_id=self.workspace_id, title="Write the page", assignee_agent_id=self.worker.id
        )
        self.clock.advance(HOLD)
        await self.service.run_until_idle()
        page = self.store.listing.list_runs(agent_id=self.worker.id, limit=10)
        (run,) = page.items
        return run

    def events(self, run_id: int) -> list[tuple[str, str, dict[str, Any]]]:
        return [
            (e.kind, e.message, dict(e.data)) for e in self.store.runlog.list_run_events(run_id)
        ]


@pytest.fixture
async def office(database: Database, now: Any, tmp_path: Path) -> AsyncIterator[Office]:
    clock = FakeClock(now)
    store = Store.from_database(database)
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    executors: dict[str, Executor] = {
        "acp": AcpExecutor(cancel_grace_s=1.0, kill_grace_s=1.0),
        "command": CommandExecutor(kill_grace_s=0.5),
    }
    service = Service(settings, clock=clock, executors=executors, store=store)
    script = tmp_path / "script.json"
    configs = {
        "acp-test": ExecutorConfig(
            name="acp-test",
            kind="acp",
            argv=(sys.executable, str(AGENT)),
            env={"ACP_TEST_SCRIPT": str(script)},
            pass_env=("PATH",),
            timeout_s=30,
        ),
        "cmd": ExecutorConfig(name="cmd", argv=(sys.executable, "-c", COMMAND_AGENT), timeout_s=30),
    }
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(coalesce_window=timedelta(seconds=5), executors=configs),
        now=clock.now(),
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    yield Office(service, clock, worker, workspace.id, script)
    await service.stop()


async def test_nul_in_an_acp_agent_message_and_a_huge_tool_title_are_stored_cleaned(
    office: Office, tmp_path: Path
) -> None:
    office.store.office.update_agent(office.worker.id, now=office.clock.now(), executor="acp-test")
    office.script.write_text(
        json.dumps(
            {
                "message": "hello\x00world",
                "tool_title": "T" * 1_000_000,
                "state_dir": str(tmp_path / "state"),
            }
        )
    )

    run = await office.one_run()

    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert run.result is not None
    assert run.result["result"] == "helloworld"
    events = office.events(run.id)
    assert ("output.agent", "helloworld", {}) in events
    ((_, message, data),) = [e for e in events if e[0] == "acp_tool_call"]
    assert len(message) < 4100
    assert data["title"].startswith("T" * 100)
    assert len(data["title"]) <= MAX_DATA_STRING + 40
    assert len(json.dumps(data)) <= 16_000


async def test_nul_nan_and_absurd_tokens_from_a_command_agent_are_stored_cleaned(
    office: Office,
) -> None:
    office.store.office.update_agent(office.worker.id, now=office.clock.now(), executor="cmd")

    run = await office.one_run()

    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert run.result is not None
    assert run.result["summary"] == "summary"
    assert run.result["lone"] == ""
    assert run.result["total_cost_usd"] is None
    assert run.usage is not None
    assert (run.usage["input_tokens"], run.usage["output_tokens"]) == (0, 10**12)
    outputs = [message for kind, message, _ in office.events(run.id) if kind == "output.stdout"]
    assert outputs[0] == "beforeafter"
    assert all("\x00" not in message for message in outputs)
