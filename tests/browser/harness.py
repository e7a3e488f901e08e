"""A live demo office for the browser tests: server, scheduler and sample agents in a thread.

The demo office (``examples/demo-office``: coordinator, writer, reviewer running the
deterministic sample agent) is imported into a fresh SQLite file; uvicorn serves the API and
the dashboard on a free loopback port with the service's loops in its lifespan, so agents
act through the same HTTP API the dashboard's pages read.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from office_scheduler.api import create_app
from office_scheduler.cli.runtime import bind, ensure_admin_token, upgrade_database
from office_scheduler.config import Settings
from office_scheduler.files import load_config, plan_import, run_import
from office_scheduler.service import Service
from office_scheduler.store.facade import Store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "demo-office"
CHROMIUM = Path("/usr/bin/chromium")


@dataclass(frozen=True)
class LiveOffice:
    """The running office: its URL, admin token, workspace and agents by name."""

    url: str
    token: str
    workspace_id: str
    agents: dict[str, str]
    home: Path

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call the HTTP API as the admin; returns the JSON body."""
        headers = {"Authorization": f"Bearer {self.token}"}
        response = httpx.request(method, self.url + path, headers=headers, timeout=10, **kwargs)
        assert response.status_code < 300, response.text
        return response.json() if response.content else None


def _import_demo(home: Path, url: str) -> tuple[str, str, dict[str, str]]:
    config = load_config(EXAMPLES)
    projects = []
    for project in config.projects:
        directory = project.directory
        if directory is not None and Path(directory).is_relative_to(EXAMPLES):
            directory = str(home / Path(directory).relative_to(EXAMPLES))
        projects.append(replace(project, directory=directory))
    config = replace(config, projects=tuple(projects))
    upgrade_database(url)
    store = Store.open(url)
    try:
        now = datetime.now(UTC)
        imported = run_import(store, plan_import(store, config), now)
        token = ensure_admin_token(store, home / "admin_token", now)
        assert token is not None
        agents = {a.name: a.id for a in store.office.list_agents(imported.workspace_id)}
    finally:
        store.close()
    return imported.workspace_id, token, agents


@contextmanager
def live_office(home: Path) -> Iterator[LiveOffice]:
    """Run the demo office until the block ends (the server and loops stop cleanly)."""
    url = f"sqlite:///{home / 'office.db'}"
    workspace_id, token, agents = _import_demo(home, url)
    sock, api_url = bind("127.0.0.1", 0)
    settings = Settings(
        home=home,
        database_url=url,
        api_url=api_url,
        safety_tick=timedelta(seconds=0.3),
        shutdown_grace=timedelta(seconds=3),
    )
    service = Service(settings)
    app = create_app(service, lifespan_manages_service=True)
    app.state.dashboard_poll_s = 0.3
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, lifespan="on", timeout_graceful_shutdown=3)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive(), "the office server stopped during startup"
            assert time.monotonic() < deadline, "the office server did not start"
            time.sleep(0.02)
        yield LiveOffice(
            url=api_url, token=token, workspace_id=workspace_id, agents=agents, home=home
        )
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def chromium_path() -> str | None:
    """Debian's Chromium, if installed."""
    found = shutil.which("chromium") or (str(CHROMIUM) if CHROMIUM.exists() else None)
    return found
