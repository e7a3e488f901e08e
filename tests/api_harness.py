"""API test harness (importable as ``api_harness``; ``tests`` is on the pytest path).

A Service on a fresh SQLite file behind a TestClient, with request helpers. Every response
goes through a hook that fails the test on a 500, so no test passes while a request crashed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from fastapi.testclient import TestClient

from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor

T = TypeVar("T")

EXECUTORS = {"cli": {"kind": "command", "argv": ["agent-cli"], "env": {"API_KEY": "s3cret"}}}


class Api:
    """The app, its service and an admin token; request helpers default to the admin."""

    def __init__(
        self,
        *,
        service: Service,
        client: TestClient,
        clock: FakeClock,
        executor: ScriptedExecutor,
        admin_token: str,
    ) -> None:
        self.service = service
        self.client = client
        self.clock = clock
        self.executor = executor
        self.admin_token = admin_token

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = "admin",
        json: Any = None,
        params: dict[str, Any] | None = None,
    ) -> httpx2.Response:
        """Send a request with ``token`` (``"admin"``: the admin token; ``None``: none)."""
        headers = {}
        if token is not None:
            secret = self.admin_token if token == "admin" else token
            headers["Authorization"] = f"Bearer {secret}"
        return self.client.request(method, path, json=json, params=params, headers=headers)

    def ok(self, method: str, path: str, *, status: int = 200, **kwargs: Any) -> Any:
        """Send a request, check its status, return its JSON."""
        response = self.request(method, path, **kwargs)
        assert response.status_code == status, response.text
        return response.json()

    def call(self, func: Callable[[], Awaitable[T]]) -> T:
        """Run a coroutine on the app's event loop (where the service's tasks live)."""
        portal = self.client.portal
        assert portal is not None
        return portal.call(func)

    def workspace(self, name: str = "acme", **settings: Any) -> dict[str, Any]:
        """Create a workspace (executor ``cli`` by default, no coalescing hold)."""
        body = {
            "name": name,
            "settings": {
                "coalesce_window_s": 0,
                "default_executor": "cli",
                "executors": EXECUTORS,
                **settings,
            },
        }
        result: dict[str, Any] = self.ok("POST", "/api/v1/workspaces", status=201, json=body)
        return result

    def agent(self, workspace_id: str, name: str = "worker-1", **fields: Any) -> dict[str, Any]:
        """Create an agent."""
        body = {"name": name, "role": "worker", "cooldown_s": 0, **fields}
        path = f"/api/v1/workspaces/{workspace_id}/agents"
        result: dict[str, Any] = self.ok("POST", path, status=201, json=body)
        return result

    def task(self, workspace_id: str, title: str = "Fix the bug", **fields: Any) -> dict[str, Any]:
        """Create a task (a millisecond after the previous one, so listings order them)."""
        self.clock.advance(timedelta(milliseconds=1))
        path = f"/api/v1/workspaces/{workspace_id}/tasks"
        result: dict[str, Any] = self.ok("POST", path, status=201, json={"title": title, **fields})
        return result

    def run_token(self, workspace_id: str, agent_id: str) -> tuple[str, int]:
        """Queue a real run for the agent (an admin ``user`` wake) and mint its run token."""
        wake = self.ok("POST", f"/api/v1/agents/{agent_id}/wake", status=202, json={})
        run_id = wake["run_id"]
        assert isinstance(run_id, int)
        token = self.service.tokens.mint_run(
            workspace_id=workspace_id,
            agent_id=agent_id,
            run_id=run_id,
            attempt=0,
            now=self.clock.now(),
            ttl=timedelta(hours=1),
        )
        return token, run_id


@contextmanager
def open_api(
    tmp_path: Path,
    *,
    url: str | None = None,
    schema: str | None = None,
    database: Database | None = None,
    lifespan_manages_service: bool = False,
) -> Iterator[Api]:
    """A migrated database, a Service with a FakeClock and a scripted executor, its app
    behind a TestClient, and an admin token; everything is closed afterwards.

    The database is ``database`` (the ``database`` fixture's, already migrated) or else
    ``url``/``schema``, migrated here (default: SQLite in ``tmp_path``).
    """
    if database is None:
        store = Store.open(url or f"sqlite:///{tmp_path}/t.db", schema=schema)
        migrate.upgrade(store.db)
    else:
        store = Store.from_database(database)
    clock = FakeClock()
    executor = ScriptedExecutor()
    service = Service(
        Settings(home=tmp_path), clock=clock, executors={"command": executor}, store=store
    )
    admin_token, _record = service.tokens.mint_admin(name="test", now=clock.now())
    responses: list[httpx2.Response] = []

    def no_server_error(response: httpx2.Response) -> None:
        responses.append(response)
        assert response.status_code < 500, f"{response.request.url} answered {response.status_code}"

    app = create_app(service, lifespan_manages_service=lifespan_manages_service)
    try:
        with TestClient(app) as client:
            client.event_hooks = {"request": [], "response": [no_server_error]}
            try:
                yield Api(
                    service=service,
                    client=client,
                    clock=clock,
                    executor=executor,
                    admin_token=admin_token,
                )
            finally:
                if not lifespan_manages_service:
                    assert client.portal is not None
                    client.portal.call(service.close)
    finally:
        store.close()
    assert all(response.status_code < 500 for response in responses)


def error_of(response: httpx2.Response) -> dict[str, Any]:
    """The ``error`` object of an error response (checks the envelope's shape)."""
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "field"}, error
    return error
