"""What in-process CLI tests share: an environment without the caller's ``OFFICE_*``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

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
