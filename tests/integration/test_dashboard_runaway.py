"""Dashboard: causation on the run page, held wakes on the overview, Release buttons."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from helpers import dashboard_session
from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.domain.models import Agent, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, IntakeOutcome, WakeSource, WakeupStatus
from office_scheduler.intake.causation import acting
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

BASE = "http://dashboard.test"
SAME_SITE = {"origin": BASE}


@dataclass
class Dashboard:
    client: httpx.AsyncClient
    service: Service
    agent: Agent


@pytest.fixture
async def dashboard(database: Database, now: object, tmp_path: Path) -> AsyncIterator[Dashboard]:
    clock = FakeClock(now)  # type: ignore[arg-type]
    store = Store.from_database(database)
    service = Service(Settings(home=tmp_path / "home"), clock=clock, store=store, executors={})
    workspace = store.office.create_workspace(
        name="acme", settings=WorkspaceSettings(), now=clock.now()
    )
    agent = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    secret, _ = service.tokens.mint_admin(name="dashboard", now=clock.now())
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(
        transport=transport,
        base_url=BASE,
        cookies={"office_session": dashboard_session(service, secret)},
    ) as client:
        yield Dashboard(client, service, agent)
    await service.stop()


async def test_held_wakes_are_shown_and_released_from_the_dashboard(dashboard: Dashboard) -> None:
    service, ann = dashboard.service, dashboard.agent
    service.store.runaway.set_agent_limits(
        ann.id, {"max_self_wakes_per_hour": 0}, now=service.clock.now()
    )
    with acting(True):
        first = await service.wake(ann.id, idempotency_key="person")
    assert first.run is not None
    held = []
    with acting(first.run.id):
        for key in ("a", "b"):
            result = await service.wake(ann.id, source=WakeSource.SELF, idempotency_key=key)
            assert result.outcome is IntakeOutcome.HELD
            held.append(result.request.id)

    run_page = await dashboard.client.get(f"/runs/{first.run.id}")
    assert "started by a person, depth 0" in run_page.text
    bob = service.store.office.create_agent(
        workspace_id=ann.workspace_id, name="bob", role=AgentRole.WORKER, now=service.clock.now()
    )
    with acting(first.run.id):
        caused = await service.wake(bob.id, idempotency_key="from ann's run")
    assert caused.run is not None
    run_page = await dashboard.client.get(f"/runs/{caused.run.id}")
    assert f"caused by run {first.run.id}, depth 1" in run_page.text
    overview = await dashboard.client.get("/")
    assert "Held wakes: " in overview.text
    assert ">2</strong>" in overview.text
    listing = await dashboard.client.get("/wakeups", params={"status": "held"})
    assert f'action="/wakeups/{held[0]}/release"' in listing.text

    one = await dashboard.client.post(f"/wakeups/{held[0]}/release", headers=SAME_SITE)
    assert one.status_code == 303
    assert "released" in one.headers["location"]
    assert service.store.queue.get_wakeup(held[0]).status is WakeupStatus.RELEASED

    [item] = service.store.runlog.list_inbox(ann.workspace_id)
    inbox = await dashboard.client.get("/inbox")
    assert f'action="/inbox/{item.id}/release"' in inbox.text
    done = await dashboard.client.post(f"/inbox/{item.id}/release", headers=SAME_SITE)
    assert done.status_code == 303
    assert "1+held+wake" in done.headers["location"]
    assert service.store.queue.get_wakeup(held[1]).status is WakeupStatus.RELEASED
    assert service.store.runlog.get_inbox_item(item.id).status.value == "resolved"
    again = await dashboard.client.post(f"/wakeups/{held[0]}/release", headers=SAME_SITE)
    assert "was+not+held" in again.headers["location"]
    overview = await dashboard.client.get("/")
    assert "Held wakes: " not in overview.text
