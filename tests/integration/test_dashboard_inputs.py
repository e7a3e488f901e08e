"""Dashboard pages over HTTP with hostile input: visible 4xx messages, never a 500."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from helpers import dashboard_session
from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.domain.models import Agent, WorkspaceSettings
from office_scheduler.domain.status import AgentRole
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


@pytest.mark.parametrize("editing", [False, True], ids=["create", "edit"])
async def test_a_file_in_the_routine_form_is_a_visible_422(
    dashboard: Dashboard, editing: bool
) -> None:
    # Regression: the form reader called str methods on the UploadFile (500).
    routines = dashboard.service.routines
    workspace_id = dashboard.agent.workspace_id
    path = "/routines/new"
    if editing:
        routine = await routines.create_routine(workspace_id, {"name": "nightly"})
        path = f"/routines/{routine.id}/edit"

    response = await dashboard.client.post(
        path,
        data={"cron_expression": "0 9 * * *"},
        files={"name": ("name.txt", b"renamed")},
        headers=SAME_SITE,
    )

    assert response.status_code == 422
    assert "name must be text, not a file" in response.text
    stored = dashboard.service.store.routines.list_routines(workspace_id)
    assert [r.name for r in stored] == (["nightly"] if editing else [])


async def test_a_bad_cursor_on_an_agent_page_is_a_422_and_leaves_no_query_unawaited(
    dashboard: Dashboard,
) -> None:
    # Regression: the cursor was checked while the page's queries were being built, so a
    # bad one left an already-created coroutine never awaited (a RuntimeWarning).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        response = await dashboard.client.get(
            f"/agents/{dashboard.agent.id}", params={"cursor": "x" * 300}
        )
        gc.collect()

    assert response.status_code == 422
    assert "cursor must be at most 200 characters" in response.text
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
