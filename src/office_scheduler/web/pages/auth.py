"""Sign in with an admin token, sign out."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request
from starlette.responses import RedirectResponse, Response

from office_scheduler.domain.errors import AuthError
from office_scheduler.web.pages.common import page_router
from office_scheduler.web.render import render
from office_scheduler.web.session import (
    SameOriginDep,
    admin_of,
    end_session,
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
    """Check the admin token and start a session; a wrong token shows the form again (401)."""
    target = _local(next)
    secret = token.strip()
    try:
        if not secret:
            raise AuthError("paste the admin token (it is in $OFFICE_HOME/admin_token)")
        await admin_of(secret, service_of(request))
    except AuthError as exc:
        context = {"next": target, "error": exc.message}
        return render(request, "login.html", context, status_code=401)
    response = RedirectResponse(target, status_code=303)
    start_session(response, request, secret)
    return response


@router.post("/logout", dependencies=[SameOriginDep])
async def logout() -> Response:
    """End the session."""
    response = RedirectResponse("/login", status_code=303)
    end_session(response)
    return response
