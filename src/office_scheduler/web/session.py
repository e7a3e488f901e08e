"""Dashboard sessions: an admin token kept in an HTTP-only, SameSite=Strict cookie.

The cookie holds the admin token itself, so revoking the token ends every session at once
(each request authenticates it again through :class:`~office_scheduler.auth.TokenService`).
Run tokens are refused: agents never use the dashboard. Forms are protected against
cross-site posts twice: the cookie is ``SameSite=Strict`` (a browser never sends it with a
request started by another site) and every unsafe request must carry an ``Origin`` (or,
failing that, a ``Referer``) naming this server.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request
from starlette.responses import Response

from office_scheduler.auth import Principal
from office_scheduler.domain.errors import AuthError, ForbiddenError
from office_scheduler.intake import causation
from office_scheduler.service import Service

#: Name of the session cookie.
COOKIE = "office_session"
#: How long a browser keeps the session cookie (seconds): one week.
COOKIE_MAX_AGE_S = 7 * 24 * 3600


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


async def require_session(request: Request) -> Principal:
    """The signed-in admin of this request.

    Raises:
        LoginRequired: no session cookie, or its token is no longer a valid admin token.
    """
    secret = request.cookies.get(COOKIE)
    if not secret:
        raise LoginRequired
    try:
        principal = await admin_of(secret, service_of(request))
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


def start_session(response: Response, request: Request, secret: str) -> None:
    """Set the session cookie (``Secure`` when the request came over https)."""
    response.set_cookie(
        COOKIE,
        secret,
        max_age=COOKIE_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def end_session(response: Response) -> None:
    """Delete the session cookie."""
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
