"""Input limits every request meets before a route sees it (one ASGI middleware).

- **Body size:** a body over :attr:`Limits.max_body_bytes` (1 MiB) is refused with 413, by
  its ``Content-Length`` before any byte is read, or as soon as a streamed (chunked) body
  passes the limit. The body is buffered here, so routes read it from memory.
- **Authentication first:** a body to ``/api/v1/`` larger than :attr:`Limits.preauth_bytes`
  (64 KiB; by ``Content-Length`` or as soon as a streamed body passes it) is read and
  checked only once its bearer token is valid; otherwise 401 before the rest arrives.
- **UTF-8:** a body that JSON would read as UTF-16 or UTF-32 is refused with 422 (field
  ``body``): the depth scan reads bytes as UTF-8, and JSON is UTF-8 (RFC 8259).
- **JSON depth:** a body nested deeper than :attr:`Limits.max_json_depth` (32) arrays or
  objects is refused with 422 (field ``body``) without being parsed. A body larger than
  :attr:`Limits.preauth_bytes` is scanned in a worker thread, at most
  :attr:`Limits.scan_slots` at a time, so the event loop (``/healthz``, the scheduler)
  keeps running while it is.
- **Slow bodies:** a body not received completely within :attr:`Limits.body_timeout_s`
  (30 s) is answered 408, so a client trickling bytes cannot hold a request open.
- **Webhook rate:** each public webhook URL (``/api/routine-triggers/{id}/fire``) has a
  token bucket of :attr:`Limits.webhook_burst` requests refilled at
  :attr:`Limits.webhook_per_second`; a request finding it empty gets 429 with
  ``Retry-After`` (whole seconds). A request the route refuses as unauthenticated (401) or
  unknown (404) is given back to the URL's bucket and taken from its source address's
  failure bucket instead (:attr:`Limits.failure_burst`, :attr:`Limits.failure_per_second`),
  so wrongly signed posts cannot spend a URL's rate for its real sender, and an address
  out of failures gets 429 on every webhook URL. The buckets live in this process: with
  several ``office serve`` processes each has its own (the limit is per process).
  Webhook bodies over 256 KiB are refused here (413) before they are scanned.

String and list lengths, pagination caps and field validation are the request models'
(422 naming the field); idle connections and oversized headers are uvicorn's to refuse
(``office serve`` sets its keep-alive timeout and header limit; docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import accumulate

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from office_scheduler.api.errors import PayloadTooLargeError, error_response
from office_scheduler.auth import source_key
from office_scheduler.domain.errors import AuthError, InvalidInputError
from office_scheduler.routines.webhooks import MAX_BODY_BYTES as WEBHOOK_MAX_BODY_BYTES

#: The public webhook route; group 1 is the trigger's public id.
WEBHOOK_PATH = re.compile(r"^/api/routine-triggers/([^/]+)/fire/?$")
#: A JSON string, or an unterminated one running to the end of the body: the pattern
#: never fails once it has started, so the body is scanned once (a pattern that needed
#: the closing quote rescanned the rest from every quote of '"\\"\\"\\…': quadratic).
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
#: Opening brackets become +1, closing ones -1 (as signed bytes); every other byte goes.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
#: The encodings :func:`json.detect_encoding` names for a body the depth scan can read.
_UTF8 = frozenset({"utf-8", "utf-8-sig"})
#: The API whose large bodies wait for a valid bearer token.
API_PREFIX = "/api/v1/"
#: Checks a bearer secret: True when it is a valid token.
Authenticate = Callable[[str], Awaitable[bool]]


@dataclass(kw_only=True)
class Limits:
    """The limits of one app; change them on ``app.state.limits`` (tests do).

    Attributes:
        max_body_bytes: largest request body, bytes.
        max_json_depth: deepest nesting of arrays/objects in a body.
        body_timeout_s: longest time to receive a whole body, seconds.
        webhook_burst: requests one webhook URL may receive at once.
        webhook_per_second: how fast its bucket refills, requests per second.
        failure_burst: refused webhook requests (401/404) one source address may send at
            once.
        failure_per_second: how fast an address's failure bucket refills, per second.
        preauth_bytes: the body size above which ``/api/v1/`` needs a valid token before
            the body is read further, and above which the depth scan leaves the loop.
        scan_slots: most depth scans running in worker threads at once.
        authenticate: checks a bearer secret (``create_app`` sets it); ``None`` lets every
            large body through to the scan.
        clock: monotonic seconds (injected by tests).
    """

    max_body_bytes: int = 1024 * 1024
    max_json_depth: int = 32
    body_timeout_s: float = 30.0
    webhook_burst: int = 30
    webhook_per_second: float = 1.0
    failure_burst: int = 30
    failure_per_second: float = 1.0
    preauth_bytes: int = 64 * 1024
    scan_slots: int = 2
    authenticate: Authenticate | None = None
    clock: Callable[[], float] = time.monotonic
    _buckets: OrderedDict[str, tuple[float, float]] = field(
        default_factory=OrderedDict, init=False, repr=False
    )
    _scans: asyncio.Semaphore | None = field(default=None, init=False, repr=False)

    #: Most webhook URLs whose buckets are remembered (the least recently used go first).
    MAX_BUCKETS = 10_000

    def take(self, key: str, *, failure: bool = False, amount: float = 1.0) -> float:
        """Take ``amount`` requests from ``key``'s bucket (a negative amount gives back).

        Args:
            key: a webhook URL's public id, or a source address when ``failure``.
            failure: use the failure limits (:attr:`failure_burst`) instead of the URL's.
            amount: how many requests to take; ``-1`` returns one taken earlier.

        Returns:
            0 when the request may proceed, else the seconds until the bucket has one.
        """
        burst, rate = (
            (self.failure_burst, self.failure_per_second)
            if failure
            else (self.webhook_burst, self.webhook_per_second)
        )
        name = f"fail:{key}" if failure else f"url:{key}"
        now = self.clock()
        tokens, last = self._buckets.pop(name, (float(burst), now))
        tokens = min(float(burst), tokens + (now - last) * rate)
        wait = 0.0
        if amount <= 0 or tokens >= 1:
            tokens = min(float(burst), tokens - amount)
        else:
            wait = (1 - tokens) / rate
        self._buckets[name] = (tokens, now)
        while len(self._buckets) > self.MAX_BUCKETS:
            self._buckets.popitem(last=False)
        return wait

    def available(self, key: str) -> float:
        """Seconds until source address ``key``'s failure bucket has a request (0: now)."""
        tokens, last = self._buckets.get(f"fail:{key}", (float(self.failure_burst), 0.0))
        refilled = tokens + (self.clock() - last) * self.failure_per_second
        tokens = min(float(self.failure_burst), refilled)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.failure_per_second

    async def depth(self, body: bytes) -> int:
        """:func:`json_depth` of ``body``; a large body is scanned in a worker thread."""
        if len(body) <= self.preauth_bytes:
            return json_depth(body)
        if self._scans is None:
            self._scans = asyncio.Semaphore(self.scan_slots)
        async with self._scans:
            return await asyncio.to_thread(json_depth_in_pieces, body)


def json_depth(body: bytes) -> int:
    """How deeply ``body``'s arrays and objects nest (brackets inside strings ignored).

    The strings and every byte but brackets are dropped by the regex and ``translate``
    (C loops); the running depth is then one ``accumulate`` over signed bytes, about
    0.05 s for a mebibyte of brackets.
    """
    steps = _JSON_STRING.sub(b"", body).translate(_STEPS, _NOT_BRACKETS)
    return max(0, max(accumulate(memoryview(steps).cast("b")), default=0))


#: Most bytes one C-level call of :func:`json_depth_in_pieces` works through.
_PIECE = 64 * 1024


def json_depth_in_pieces(body: bytes) -> int:
    """:func:`json_depth` for a worker thread, in pieces.

    No single C call covers more than one string or 64 KiB, so the thread hands the GIL
    (and with it the event loop) back every few milliseconds instead of holding it for
    the whole scan.
    """
    depth = deepest = 0
    pos = 0
    for match in _JSON_STRING.finditer(body):
        depth, deepest = _walk(body, pos, match.start(), depth, deepest)
        pos = match.end()
    depth, deepest = _walk(body, pos, len(body), depth, deepest)
    return deepest


def _walk(body: bytes, start: int, end: int, depth: int, deepest: int) -> tuple[int, int]:
    """The running and deepest nesting after ``body[start:end]`` (a stretch outside strings)."""
    for piece in range(start, end, _PIECE):
        steps = body[piece : min(end, piece + _PIECE)].translate(_STEPS, _NOT_BRACKETS)
        if steps:
            running = list(accumulate(memoryview(steps).cast("b"), initial=depth))
            depth, deepest = running[-1], max(deepest, max(running))
    return depth, deepest


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
        path = scope.get("path", "")
        hook = WEBHOOK_PATH.match(path)
        if hook is not None and scope.get("method") == "POST":
            await self._webhook(hook.group(1), scope, receive, send)
            return
        max_bytes = limits.max_body_bytes
        await self._checked(scope, receive, send, max_bytes, path.startswith(API_PREFIX))

    async def _webhook(self, public_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A webhook delivery: the URL's bucket, the source's failure bucket, then the body."""
        limits = self.limits
        client = scope.get("client")
        source = source_key(str(client[0])) if client else "?"
        wait = limits.available(source) or limits.take(public_id)
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
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        reached = False
        try:
            reached = await self._checked(scope, receive, watch, WEBHOOK_MAX_BODY_BYTES, False)
        finally:
            # Refused before the route authenticated it (too large, too deep, too slow) or
            # by the route as unsigned or unknown: the source's failure, not the URL's rate.
            if not reached or status in (401, 404):
                limits.take(public_id, amount=-1)
                limits.take(source, failure=True)

    async def _checked(
        self, scope: Scope, receive: Receive, send: Send, max_bytes: int, preauth: bool
    ) -> bool:
        """Read the body, scan its depth, then call the app.

        With ``preauth``, a body larger than :attr:`Limits.preauth_bytes` is read on only
        once its bearer token is valid (else 401).

        Returns:
            Whether the app was called (``False``: answered here, 401, 408, 413 or 422).
        """
        limits = self.limits
        declared = _content_length(scope)
        authenticated = False

        async def authenticate() -> None:
            nonlocal authenticated
            if preauth and not authenticated and limits.authenticate is not None:
                secret = _bearer(scope)
                if not secret or not await limits.authenticate(secret):
                    raise AuthError("missing bearer token" if not secret else "invalid token")
            authenticated = True

        try:
            if declared is not None and declared > max_bytes:
                raise _TooLarge
            if declared is not None and declared > limits.preauth_bytes:
                await authenticate()
            async with asyncio.timeout(limits.body_timeout_s):
                body, disconnected = await _read_body(
                    receive, max_bytes, limits.preauth_bytes, authenticate
                )
        except AuthError:
            message = "invalid, revoked or expired token"
            if not _bearer(scope):
                message = "missing bearer token"
            response = error_response(
                401, AuthError.code, message, headers={"WWW-Authenticate": "Bearer"}
            )
            await response(scope, receive, send)
            return False
        except TimeoutError:
            message = f"the request body did not arrive within {limits.body_timeout_s:g} s"
            await error_response(408, "request_timeout", message, "body")(scope, receive, send)
            return False
        except _TooLarge:
            message = f"the request body is larger than {max_bytes} bytes"
            await error_response(413, PayloadTooLargeError.code, message, "body")(
                scope, receive, send
            )
            return False
        if body and json.detect_encoding(body) not in _UTF8:
            # The depth scan reads bytes as UTF-8 (every ASCII byte is that character);
            # in UTF-16 or UTF-32 a character can hold a quote byte and hide brackets
            # from it, and JSON between systems is UTF-8 anyway (RFC 8259 §8.1).
            message = "the request body must be UTF-8"
            await error_response(422, InvalidInputError.code, message, "body")(scope, receive, send)
            return False
        if body and await limits.depth(body) > limits.max_json_depth:
            message = f"the body nests deeper than {limits.max_json_depth} levels"
            await error_response(422, InvalidInputError.code, message, "body")(scope, receive, send)
            return False
        await self.app(scope, _replay(body, disconnected, receive), send)
        return True


def _bearer(scope: Scope) -> str:
    """The bearer secret of the request's ``Authorization`` header ('' when none)."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, _, secret = value.decode("latin-1").partition(" ")
            return secret.strip() if kind.lower() == "bearer" else ""
    return ""


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def _read_body(
    receive: Receive, limit: int, large: int, on_large: Callable[[], Awaitable[None]]
) -> tuple[bytes, bool]:
    """The whole body (at most ``limit`` bytes) and whether the client went away.

    ``on_large`` is awaited when the body passes ``large`` bytes (it may raise to stop).
    """
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
        if size > large:
            await on_large()
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


def install_limits(
    app: FastAPI, limits: Limits | None = None, *, authenticate: Authenticate | None = None
) -> Limits:
    """Add the limits middleware to ``app``; its :class:`Limits` is ``app.state.limits``.

    Args:
        app: the application.
        limits: the limits (default :class:`Limits`).
        authenticate: checks a bearer secret before a large ``/api/v1/`` body is read.
    """
    chosen = limits or Limits()
    if authenticate is not None:
        chosen.authenticate = authenticate
    app.state.limits = chosen
    app.add_middleware(LimitsMiddleware, limits=chosen)
    return chosen
