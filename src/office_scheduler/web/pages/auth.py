"""Sign in with an admin token, sign out."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from starlette.responses import RedirectResponse, Response

from office_scheduler.auth import source_key
from office_scheduler.domain.errors import AuthError
from office_scheduler.web.pages.common import page_router
from office_scheduler.web.render import render
from office_scheduler.web.session import (
    SameOriginDep,
    admin_of,
    end_session,
    login_throttle,
    service_of,
    start_session,
)

router = page_router()


def _local(target: str | None) -> str:
    """``target`` when it is a path of this site, else ``/`` (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@router.get("/login")
async def login_page(request: Request, next: str | None = None) -> Response:
    """The sign-in form."""
    return render(request, "login.html", {"next": _local(next), "error": None})


@router.post("/login", dependencies=[SameOriginDep])
async def login(
    request: Request,
    token: Annotated[str, Form(max_length=500)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    """Check the admin token and start a session; a wrong token shows the form again (401).

    An address with too many recent failures gets 429 with ``Retry-After``, its token
    unchecked (see :class:`~office_scheduler.web.session.LoginThrottle`).
    """
    target = _local(next)
    secret = token.strip()
    service = service_of(request)
    throttle = login_throttle(request)
    address = source_key(request.client.host) if request.client else "?"
    wait = throttle.wait_s(address, service.clock.now())
    if wait:
        error = f"too many failed sign-ins from your address; try again in {wait} s"
        context = {"next": target, "error": error}
        response = render(request, "login.html", context, status_code=429)
        response.headers["Retry-After"] = str(wait)
        return response
    try:
        if not secret:
            raise AuthError("paste the admin token (it is in $OFFICE_HOME/admin_token)")
        principal = await admin_of(secret, service)
    except AuthError as exc:
        if secret:
            throttle.failed(address, service.clock.now())
        context = {"next": target, "error": exc.message}
        return render(request, "login.html", context, status_code=401)
    response = RedirectResponse(target, status_code=303)
    await start_session(response, request, principal)
    return response


@router.post("/logout", dependencies=[SameOriginDep])
async def logout(request: Request) -> Response:
    """End the session (on the server too: its cookie no longer works anywhere)."""
    response = RedirectResponse("/login", status_code=303)
    await end_session(response, request)
    return response
