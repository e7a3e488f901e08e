"""What in-process CLI tests share: an environment without the caller's ``OFFICE_*``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from click.testing import CliRunner, Result
from starlette.types import ASGIApp

from api_harness import Api
from office_scheduler.cli import office
from office_scheduler.cli.runtime import bind

#: Environment overrides that unset every variable the ``office`` command reads.
CLEAN_ENV: dict[str, str | None] = {
    name: None
    for name in (
        "OFFICE_HOME",
        "OFFICE_DATABASE_URL",
        "OFFICE_API_URL",
        "OFFICE_TOKEN",
        "OFFICE_AGENT_ID",
        "OFFICE_WORKSPACE_ID",
        "OFFICE_TASK_ID",
        "OFFICE_LOG_FORMAT",
    )
}


@contextmanager
def serving_in_thread(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in a thread; yields its URL."""
    sock, url = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "uvicorn stopped during startup"
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


class ServedCli:
    """The ``office`` command against a served API, as its admin; subclasses add records."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        self.api, self.url, self.home = api, url, home

    def run(self, *args: str) -> Result:
        """Invoke ``office --api-url URL ARGS…`` in-process with the admin token."""
        env: dict[str, str | None] = dict(CLEAN_ENV)
        env |= {"OFFICE_HOME": str(self.home), "OFFICE_TOKEN": self.api.admin_token}
        return CliRunner().invoke(office, ["--api-url", self.url, *args], env=env)

    def json(self, *args: str) -> Any:
        """``run`` with ``--json``, which must succeed; its parsed output."""
        result = self.run("--json", *args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return json.loads(result.stdout)
