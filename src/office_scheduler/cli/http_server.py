"""How ``office serve`` runs uvicorn: slow-header deadline and a masked access log.

- **Slow clients:** uvicorn arms its keep-alive timeout only after a response, so a
  connection that never sends (or never finishes) its request line and headers stayed open
  forever. :class:`HeaderDeadlineProtocol` closes it once ``header_timeout_s`` pass
  without a complete request head, on a new connection and between keep-alive requests.
- **Access log:** a public webhook URL is the only credential of a ``none``-mode trigger,
  so uvicorn's access log (which writes every path) is off; :class:`AccessLog` logs each
  request through structlog (``http_request``, debug level: ``-vv``) with the webhook's
  public id replaced by ``***``.
"""

from __future__ import annotations

import asyncio
import re
import time

import structlog
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger("office_scheduler.http")

#: Longest wait for a request line plus headers, on a new or a kept-alive connection.
HEADER_TIMEOUT_S = 10.0
_WEBHOOK_ID = re.compile(r"(/api/routine-triggers/)[^/]*")


def masked_path(path: str) -> str:
    """``path`` with a public webhook id replaced by ``***`` (other paths unchanged)."""
    return _WEBHOOK_ID.sub(r"\1***", path)


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol that closes connections slow to send a request head.

    The deadline starts when the connection opens and again after each response; it is
    met when the next request's headers are complete (uvicorn starts a new request cycle).
    """

    header_timeout_s: float = HEADER_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection and start the deadline for its first request head."""
        super().connection_made(transport)
        self._arm_header_deadline()

    def on_response_complete(self) -> None:
        """Finish a response and start the deadline for the next request head."""
        # Armed before super(): a pipelined request it starts is a new cycle, so it is safe.
        self._arm_header_deadline()
        super().on_response_complete()

    def _arm_header_deadline(self) -> None:
        waiting_after = self.cycle
        self.loop.call_later(self.header_timeout_s, self._header_deadline, waiting_after)

    def _header_deadline(self, waiting_after: object) -> None:
        if self.cycle is waiting_after and not self.transport.is_closing():
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderDeadlineProtocol]:
    """A :class:`HeaderDeadlineProtocol` with a ``seconds`` deadline (tests use short ones)."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": seconds})


class AccessLog:
    """ASGI middleware logging each HTTP request with webhook ids masked.

    Fields: ``method``, ``path`` (masked, no query string), ``status`` (500 when the app
    failed before answering), ``duration_ms``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on and log it when the app is done."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            log.debug(
                "http_request",
                method=scope["method"],
                path=masked_path(scope["path"]),
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 1),
            )


def server_config(app: ASGIApp, *, header_timeout_s: float = HEADER_TIMEOUT_S) -> uvicorn.Config:
    """The uvicorn settings of ``office serve`` for ``app`` (limits: docs/security.md)."""
    return uvicorn.Config(
        AccessLog(app),
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=5,
        # Off: it writes webhook URLs, the credential of 'none'-mode triggers.
        access_log=False,
        http=with_header_timeout(header_timeout_s),
        # An idle keep-alive connection closes after 5 s; a request line plus headers over
        # 64 KiB is refused.
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=64 * 1024,
    )
