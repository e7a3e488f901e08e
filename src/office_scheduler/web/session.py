"""Dashboard sessions: a random session id in an HTTP-only, SameSite=Strict cookie.

Signing in with an admin token opens a server-side session
(:meth:`~office_scheduler.auth.TokenService.start_session`): the cookie holds only the
session's random id, never the token. A session ends when it expires (12 hours), on
sign-out, and as soon as its admin token is revoked (each request checks both). Run
tokens are refused: agents never use the dashboard. Repeated failed sign-ins from one
address are slowed (:class:`LoginThrottle`). Forms are protected against cross-site posts
twice: the cookie is ``SameSite=Strict`` (a browser never sends it with a request started
by another site) and every unsafe request must carry an ``Origin`` (or, failing that, a
``Referer``) naming this server.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request
from starlette.responses import Response

from office_scheduler.auth import SESSION_TTL, Principal
from office_scheduler.domain.errors import AuthError, ForbiddenError
from office_scheduler.intake import causation
from office_scheduler.service import Service

#: Name of the session cookie.
COOKIE = "office_session"
#: How long a browser keeps the session cookie (seconds): as long as the session lasts.
COOKIE_MAX_AGE_S = int(SESSION_TTL.total_seconds())


class LoginRequired(Exception):
    """No valid dashboard session: pages redirect to ``/login``, fragments and streams 401."""


def service_of(request: Request) -> Service:
    """The service the application serves."""
    service: Service = request.app.state.service
    return service


async def admin_of(secret: str, service: Service) -> Principal:
    """The admin principal of ``secret``.

    Raises:
        AuthError: an unknown, revoked or expired token, or a run token.
    """
    principal = await service.tokens.authenticate_async(secret, now=service.clock.now())
    if not principal.is_admin:
        raise AuthError("the dashboard needs an admin token (run tokens are for agents)")
    return principal


async def session_admin(session_id: str, service: Service) -> Principal:
    """The admin of a live dashboard session.

    Raises:
        AuthError: an unknown, ended or expired session, or its token is no longer active.
    """
    now = service.clock.now()
    return await asyncio.to_thread(service.tokens.session, session_id, now=now)


async def require_session(request: Request) -> Principal:
    """The signed-in admin of this request.

    Raises:
        LoginRequired: no session cookie, or its session is no longer live.
    """
    session_id = request.cookies.get(COOKIE)
    if not session_id:
        raise LoginRequired
    try:
        principal = await session_admin(session_id, service_of(request))
    except AuthError:
        raise LoginRequired from None
    causation.act_as_person()  # what the dashboard does is a person's action (depth 0)
    return principal


SessionDep = Annotated[Principal, Depends(require_session)]


def _origin(value: str) -> tuple[str, str]:
    parts = urlsplit(value)
    return (parts.scheme.lower(), parts.netloc.lower())


def require_same_origin(request: Request) -> None:
    """Refuse an unsafe request that does not come from a page of this server.

    Raises:
        ForbiddenError: no ``Origin``/``Referer`` header, or one naming another site.
    """
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if not claimed or claimed == "null":
        raise ForbiddenError("form refused: the request did not say which page sent it")
    own = (request.url.scheme, request.headers.get("host", request.url.netloc).lower())
    if _origin(claimed) != own:
        raise ForbiddenError("form refused: it was sent from another site")


SameOriginDep = Depends(require_same_origin)


async def start_session(response: Response, request: Request, principal: Principal) -> None:
    """Open a session for ``principal`` and set its cookie (``Secure`` over https)."""
    service = service_of(request)
    now = service.clock.now()
    session_id = await asyncio.to_thread(service.tokens.start_session, principal, now=now)
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=COOKIE_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


async def end_session(response: Response, request: Request) -> None:
    """End the request's session on the server and delete its cookie."""
    session_id = request.cookies.get(COOKIE)
    if session_id:
        service = service_of(request)
        now = service.clock.now()
        await asyncio.to_thread(service.tokens.end_session, session_id, now=now)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")


@dataclass(kw_only=True)
class LoginThrottle:
    """Slows repeated failed sign-ins from one address (a token bucket of failures).

    Each address may fail :attr:`burst` times at once, then once per :attr:`refill`;
    while its bucket is empty every sign-in from it, right or wrong, is answered 429
    without checking the token. The buckets live in this process.

    Attributes:
        burst: failures an address may make at once.
        refill: how long an address waits for one more attempt.
        max_addresses: most addresses remembered (the oldest are forgotten first).
    """

    burst: int = 5
    refill: timedelta = timedelta(seconds=30)
    max_addresses: int = 10_000
    _buckets: dict[str, tuple[float, datetime]] = field(default_factory=dict, repr=False)

    def _level(self, address: str, now: datetime) -> float:
        tokens, last = self._buckets.get(address, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - last) / self.refill)

    def wait_s(self, address: str, now: datetime) -> int:
        """Whole seconds before ``address`` may try again (0: now)."""
        level = self._level(address, now)
        if level >= 1:
            return 0
        return max(1, math.ceil((1 - level) * self.refill.total_seconds()))

    def failed(self, address: str, now: datetime) -> None:
        """Count one failed sign-in from ``address``."""
        level = self._level(address, now) - 1
        self._buckets.pop(address, None)
        self._buckets[address] = (level, now)
        while len(self._buckets) > self.max_addresses:
            del self._buckets[next(iter(self._buckets))]


def login_throttle(request: Request) -> LoginThrottle:
    """The application's :class:`LoginThrottle` (created on first use)."""
    state = request.app.state
    throttle = getattr(state, "login_throttle", None)
    if not isinstance(throttle, LoginThrottle):
        throttle = LoginThrottle()
        state.login_throttle = throttle
    return throttle
