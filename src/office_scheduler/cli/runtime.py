"""Running the office in one process: scheduler service and HTTP API (uvicorn embedded).

Also the first admin token, migrations and our own signal handling.

Shutdown order (DESIGN §7): stop accepting HTTP → stop the loops (running sessions get the
grace period, then are requeued) → dispose the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog
import uvicorn

from office_scheduler.auth import TokenService
from office_scheduler.cli.http_server import server_config
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.engine import open_database
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)

_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}  # noqa: S104


def upgrade_database(url: str) -> str:
    """Migrate the database at ``url`` to the newest schema; returns the revision."""
    db = open_database(url)
    try:
        migrate.upgrade(db)
        return migrate.current_revision(db) or "base"
    finally:
        db.dispose()


def write_secret(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path`` readable by the owner only (mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    path.chmod(0o600)


def ensure_admin_token(store: Store, path: Path, now: datetime) -> str | None:
    """Mint the first admin token when no admin token is active, and save it at ``path``.

    Returns:
        The new secret (to be shown once), or ``None`` when an admin token already exists.
    """
    if store.tokens.count_active_admin(now) > 0:
        return None
    secret, _ = TokenService(store).mint_admin(name="first admin", now=now)
    write_secret(path, secret)
    return secret


def bind(host: str, port: int) -> tuple[socket.socket, str]:
    """Bind a listening TCP socket (port 0 picks a free one).

    Returns:
        The socket and the URL agents and clients should use to reach it.

    Raises:
        OSError: the address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    bound_port = sock.getsockname()[1]
    reach = _WILDCARD_HOSTS.get(host, host)
    shown = f"[{reach}]" if ":" in reach else reach
    return sock, f"http://{shown}:{bound_port}"


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal capture: the CLI owns SIGINT/SIGTERM and exits 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class OfficeRuntime:
    """The service's loops and the HTTP API running in the current event loop.

    Args:
        service: the scheduler service (closed when the runtime exits).
        sock: a bound socket to serve the API on; ``None`` runs without the API.
        scheduler: whether to run the scheduler loops in this process.
    """

    def __init__(self, service: Service, *, sock: socket.socket | None, scheduler: bool) -> None:
        self.service = service
        self._sock = sock
        self._scheduler = scheduler
        self._server: _EmbeddedServer | None = None
        self._serving: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OfficeRuntime:
        try:
            if self._scheduler:
                await self.service.start()
            if self._sock is not None:
                await self._start_api(self._sock)
        except BaseException:
            await self._shutdown()
            raise
        return self

    async def _start_api(self, sock: socket.socket) -> None:
        from office_scheduler.api import create_app

        app = create_app(self.service, lifespan_manages_service=False)
        self._server = _EmbeddedServer(server_config(app))
        self._serving = asyncio.create_task(self._server.serve(sockets=[sock]), name="http")
        while not self._server.started:
            if self._serving.done():
                self._serving.result()
                raise RuntimeError("the HTTP server stopped during startup")
            await asyncio.sleep(0.02)

    async def wait(self, stop: asyncio.Event) -> None:
        """Return when ``stop`` is set; raise when a loop or the HTTP server fails."""
        waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]
        if self.service.failed is not None:
            waiters.append(self.service.failed)
        if self._serving is not None:
            waiters.append(self._serving)
        try:
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiters[0].cancel()
        for future in done:
            if future is not waiters[0]:
                future.result()
                if future is self._serving:
                    raise RuntimeError("the HTTP server stopped unexpectedly")

    async def _shutdown(self) -> None:
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._serving
        await self.service.close()
        if self._sock is not None:
            self._sock.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._shutdown()


def install_signal_handlers(stop: asyncio.Event) -> None:
    """Make SIGINT and SIGTERM set ``stop``; a second signal exits at once (status 130)."""
    loop = asyncio.get_running_loop()

    def handle(signum: signal.Signals) -> None:
        if stop.is_set():
            os._exit(130)
        log.info("shutting_down", signal=signum.name)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, handle, signum)
