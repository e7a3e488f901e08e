"""Input limits every request meets before a route sees it (one ASGI middleware).

- **Body size:** a body over :attr:`Limits.max_body_bytes` (1 MiB) is refused with 413, by
  its ``Content-Length`` before any byte is read, or as soon as a streamed (chunked) body
  passes the limit. The body is buffered here, so routes read it from memory.
- **JSON depth:** a body nested deeper than :attr:`Limits.max_json_depth` (32) arrays or
  objects is refused with 422 (field ``body``) without being parsed.
- **Slow bodies:** a body not received completely within :attr:`Limits.body_timeout_s`
  (30 s) is answered 408, so a client trickling bytes cannot hold a request open.
- **Webhook rate:** each public webhook URL (``/api/routine-triggers/{id}/fire``) has a
  token bucket of :attr:`Limits.webhook_burst` requests refilled at
  :attr:`Limits.webhook_per_second`; a request finding it empty gets 429 with
  ``Retry-After`` (whole seconds). Every request counts, wrongly signed ones too, so a
  leaked URL cannot be used to guess secrets quickly. The buckets live in this process:
  with several ``office serve`` processes each has its own (the limit is per process).

String and list lengths, pagination caps and field validation are the request models'
(422 naming the field); idle connections and oversized headers are uvicorn's to refuse
(``office serve`` sets its keep-alive timeout and header limit; docs/security.md).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from office_scheduler.api.errors import PayloadTooLargeError, error_response
from office_scheduler.domain.errors import InvalidInputError

#: The public webhook route; group 1 is the trigger's public id.
WEBHOOK_PATH = re.compile(r"^/api/routine-triggers/([^/]+)/fire/?$")
#: A JSON string, or an unterminated one running to the end of the body: the pattern
#: never fails once it has started, so the body is scanned once (a pattern that needed
#: the closing quote rescanned the rest from every quote of '"\\"\\"\\…': quadratic).
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


@dataclass(kw_only=True)
class Limits:
    """The limits of one app; change them on ``app.state.limits`` (tests do).

    Attributes:
        max_body_bytes: largest request body, bytes.
        max_json_depth: deepest nesting of arrays/objects in a body.
        body_timeout_s: longest time to receive a whole body, seconds.
        webhook_burst: requests one webhook URL may receive at once.
        webhook_per_second: how fast its bucket refills, requests per second.
        clock: monotonic seconds (injected by tests).
    """

    max_body_bytes: int = 1024 * 1024
    max_json_depth: int = 32
    body_timeout_s: float = 30.0
    webhook_burst: int = 30
    webhook_per_second: float = 1.0
    clock: Callable[[], float] = time.monotonic
    _buckets: OrderedDict[str, tuple[float, float]] = field(
        default_factory=OrderedDict, init=False, repr=False
    )

    #: Most webhook URLs whose buckets are remembered (the least recently used go first).
    MAX_BUCKETS = 10_000

    def take(self, key: str) -> float:
        """Take one request from ``key``'s bucket.

        Returns:
            0 when the request may proceed, else the seconds until the bucket has one.
        """
        now = self.clock()
        tokens, last = self._buckets.pop(key, (float(self.webhook_burst), now))
        tokens = min(float(self.webhook_burst), tokens + (now - last) * self.webhook_per_second)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.webhook_per_second
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.MAX_BUCKETS:
            self._buckets.popitem(last=False)
        return wait


def json_depth(body: bytes) -> int:
    """How deeply ``body``'s arrays and objects nest (brackets inside strings ignored)."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub(b"", body)):
        if bracket in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


class _TooLarge(Exception):
    pass


class LimitsMiddleware:
    """Applies :class:`Limits` to every HTTP request (see the module docstring)."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then hand it on with its body replayed from memory."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        hook = WEBHOOK_PATH.match(scope.get("path", ""))
        if hook is not None and scope.get("method") == "POST":
            wait = limits.take(hook.group(1))
            if wait > 0:
                retry = str(max(1, math.ceil(wait)))
                response = error_response(
                    429,
                    "rate_limited",
                    f"too many requests to this webhook; retry in {retry} s",
                    headers={"Retry-After": retry},
                )
                await response(scope, receive, send)
                return
        declared = _content_length(scope)
        try:
            if declared is not None and declared > limits.max_body_bytes:
                raise _TooLarge
            async with asyncio.timeout(limits.body_timeout_s):
                body, disconnected = await _read_body(receive, limits.max_body_bytes)
        except TimeoutError:
            message = f"the request body did not arrive within {limits.body_timeout_s:g} s"
            await error_response(408, "request_timeout", message, "body")(scope, receive, send)
            return
        except _TooLarge:
            message = f"the request body is larger than {limits.max_body_bytes} bytes"
            await error_response(413, PayloadTooLargeError.code, message, "body")(
                scope, receive, send
            )
            return
        if body and json_depth(body) > limits.max_json_depth:
            message = f"the body nests deeper than {limits.max_json_depth} levels"
            await error_response(422, InvalidInputError.code, message, "body")(scope, receive, send)
            return
        await self.app(scope, _replay(body, disconnected, receive), send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The whole body (at most ``limit`` bytes) and whether the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False


def _replay(body: bytes, disconnected: bool, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent and not disconnected:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if disconnected:
            return {"type": "http.disconnect"}
        return await receive()

    return replay


def install_limits(app: FastAPI, limits: Limits | None = None) -> Limits:
    """Add the limits middleware to ``app``; its :class:`Limits` is ``app.state.limits``."""
    chosen = limits or Limits()
    app.state.limits = chosen
    app.add_middleware(LimitsMiddleware, limits=chosen)
    return chosen
