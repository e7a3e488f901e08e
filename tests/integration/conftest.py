"""Fixtures for scheduler tests: a Service on the test database with a FakeClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers import Office
from office_scheduler.config import Settings
from office_scheduler.domain.models import (
    ExecutorConfig,
    WorkspaceSettings,
)
from office_scheduler.domain.status import AgentRole
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor


@pytest.fixture
def clock(now: datetime) -> FakeClock:
    return FakeClock(now)


@pytest.fixture
async def office(database: Database, clock: FakeClock, tmp_path: Path) -> AsyncIterator[Office]:
    store = Store.from_database(database)
    executor = ScriptedExecutor()
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    service = Service(settings, clock=clock, executors={"command": executor}, store=store)
    now = clock.now()
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5),
            default_executor="fake",
            executors={"fake": ExecutorConfig(name="fake", argv=("agent",))},
        ),
        now=now,
    )
    coordinator = store.office.create_agent(
        workspace_id=workspace.id, name="boss", role=AgentRole.COORDINATOR, now=now
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=now
    )
    other = store.office.create_agent(
        workspace_id=workspace.id, name="bob", role=AgentRole.WORKER, now=now
    )
    project = store.office.create_project(
        workspace_id=workspace.id, name="site", directory=str(tmp_path / "site"), now=now
    )
    yield Office(
        service=service,
        clock=clock,
        executor=executor,
        workspace=workspace,
        coordinator=coordinator,
        worker=worker,
        other_worker=other,
        project=project,
    )
    await service.stop()
