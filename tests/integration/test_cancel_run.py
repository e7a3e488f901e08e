"""Service.cancel_run (and the dashboard's Cancel run button): queued runs, and a running
agent stopped through its executor."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import dashboard_session
from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.domain.errors import AuthError, ConflictError, NotFoundError
from office_scheduler.domain.events import RunEnded
from office_scheduler.domain.models import Agent, ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunReason, RunStatus
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

HOLD = timedelta(seconds=10)

pytestmark = pytest.mark.timeout(60)

# Reports its pid and run token, then waits for a minute (it is cancelled long before).
WAITING_AGENT = r"""
import json, os, sys, time
sys.stdin.read()
report = {"pid": os.getpid(), "token": os.environ["OFFICE_TOKEN"]}
path = os.environ["REPORT"]
with open(path + ".tmp", "w") as handle:
    json.dump(report, handle)
os.replace(path + ".tmp", path)
time.sleep(60)
"""


@dataclass
class Office:
    service: Service
    clock: FakeClock
    worker: Agent
    workspace_id: str
    report: Path

    @property
    def store(self) -> Store:
        return self.service.store

    async def wake_worker(self) -> int:
        await self.service.office.create_task(
            workspace_id=self.workspace_id, title="Wait", assignee_agent_id=self.worker.id
        )
        (run,) = self.store.listing.list_runs(agent_id=self.worker.id, limit=10).items
        return run.id


@pytest.fixture
async def office(database: Database, now: Any, tmp_path: Path) -> AsyncIterator[Office]:
    clock = FakeClock(now)
    store = Store.from_database(database)
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    executors = {"command": CommandExecutor(kill_grace_s=0.5)}
    service = Service(settings, clock=clock, executors=executors, store=store)
    report = tmp_path / "report.json"
    waiting = ExecutorConfig(
        name="waiting",
        argv=(sys.executable, "-c", WAITING_AGENT),
        env={"REPORT": str(report)},
        timeout_s=120,
    )
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5),
            default_executor="waiting",
            executors={"waiting": waiting},
        ),
        now=clock.now(),
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    yield Office(service, clock, worker, workspace.id, report)
    await service.stop()


async def _agent_report(path: Path) -> dict[str, Any]:
    """The waiting agent's report, once its process has written it (a real subprocess)."""
    for _ in range(1000):
        if path.exists():
            report: dict[str, Any] = json.loads(path.read_text())
            return report
        await asyncio.sleep(0.02)
    raise AssertionError("the agent never started")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_cancelling_a_running_run_kills_the_agent_and_ends_the_run(office: Office) -> None:
    ended_events: list[RunEnded] = []

    async def on_end(event: RunEnded) -> None:
        ended_events.append(event)

    office.service.bus.subscribe(on_end, RunEnded)
    run_id = await office.wake_worker()
    office.clock.advance(HOLD)
    drain = asyncio.create_task(office.service.run_until_idle())
    report = await _agent_report(office.report)
    assert office.store.queue.get_run(run_id).status is RunStatus.RUNNING
    assert office.service.runs.inflight_run_ids == [run_id]

    ended = await office.service.cancel_run(run_id)

    assert (ended.status, ended.reason) == (RunStatus.CANCELLED, RunReason.CANCELLED_BY_USER)
    assert ended.error == "cancelled by a user"
    assert office.store.queue.get_run(run_id).status is RunStatus.CANCELLED
    assert not _alive(report["pid"]), "the agent's process was stopped"
    with pytest.raises(AuthError):
        office.service.tokens.authenticate(report["token"], now=office.clock.now())
    assert [event.run.id for event in ended_events] == [run_id]
    assert ended_events[0].run.status is RunStatus.CANCELLED
    kinds = [event.kind for event in office.store.runlog.list_run_events(run_id)]
    assert "run_cancelled" in kinds
    await asyncio.wait_for(drain, timeout=10)  # the drain ends: nothing is left running
    assert office.service.runs.inflight_run_ids == []
    assert not office.service.runs.cancel_requested(run_id)
    with pytest.raises(ConflictError, match="cancelled; only queued"):
        await office.service.cancel_run(run_id)


async def test_cancelling_a_queued_run_ends_it_and_publishes(office: Office) -> None:
    ended_events: list[RunEnded] = []

    async def on_end(event: RunEnded) -> None:
        ended_events.append(event)

    office.service.bus.subscribe(on_end, RunEnded)
    run_id = await office.wake_worker()

    ended = await office.service.cancel_run(run_id)

    assert (ended.status, ended.reason) == (RunStatus.CANCELLED, RunReason.CANCELLED_BY_USER)
    assert [event.run.id for event in ended_events] == [run_id]
    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    assert not office.report.exists(), "a cancelled run never launches its agent"


async def test_a_run_claimed_by_another_process_or_unknown_is_refused(office: Office) -> None:
    run_id = await office.wake_worker()
    office.clock.advance(HOLD)
    office.store.queue.claim(
        now=office.clock.now(), node_id="other-node", lease=timedelta(minutes=5), limit=1
    )

    with pytest.raises(ConflictError, match="another scheduler process \\(other-node\\)"):
        await office.service.cancel_run(run_id)
    assert office.store.queue.get_run(run_id).status is RunStatus.CLAIMED
    with pytest.raises(NotFoundError):
        await office.service.cancel_run(run_id + 1000)


async def test_the_dashboard_cancel_button_stops_a_running_run(office: Office) -> None:
    base = "http://dashboard.test"
    secret, _ = office.service.tokens.mint_admin(name="dashboard", now=office.clock.now())
    run_id = await office.wake_worker()
    office.clock.advance(HOLD)
    drain = asyncio.create_task(office.service.run_until_idle())
    report = await _agent_report(office.report)
    transport = httpx.ASGITransport(app=create_app(office.service))
    async with httpx.AsyncClient(
        transport=transport,
        base_url=base,
        cookies={"office_session": dashboard_session(office.service, secret)},
    ) as client:
        page = await client.get(f"/runs/{run_id}")
        assert page.status_code == 200
        assert f'action="/runs/{run_id}/cancel"' in page.text

        refused = await client.post(f"/runs/{run_id}/cancel")  # no Origin: not from a page
        assert refused.status_code == 403
        assert office.store.queue.get_run(run_id).status is RunStatus.RUNNING

        response = await client.post(f"/runs/{run_id}/cancel", headers={"origin": base})
        assert response.status_code == 303
        assert response.headers["location"] == f"/runs/{run_id}?notice=Run+{run_id}+cancelled"

        after = await client.get(f"/runs/{run_id}")
        assert f'action="/runs/{run_id}/cancel"' not in after.text
        again = await client.post(f"/runs/{run_id}/cancel", headers={"origin": base})
        assert again.status_code == 409
        assert "only queued, retrying or running runs can be cancelled" in again.text

    run = office.store.queue.get_run(run_id)
    assert (run.status, run.reason) == (RunStatus.CANCELLED, RunReason.CANCELLED_BY_USER)
    assert not _alive(report["pid"])
    await asyncio.wait_for(drain, timeout=10)
