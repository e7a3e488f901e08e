"""What every page shares: its router, the page context and the after-POST redirect."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from office_scheduler.web.params import WORKSPACE_COOKIE, Scope
from office_scheduler.web.render import PageRoute, render

#: Rows per page of every list.
PAGE_SIZE = 50


def page_router() -> APIRouter:
    """A router of dashboard pages (left out of the API's OpenAPI schema)."""
    return APIRouter(route_class=PageRoute, include_in_schema=False)


def show(
    request: Request,
    template: str,
    scope: Scope,
    *,
    section: str,
    status_code: int = 200,
    **context: Any,
) -> Response:
    """Render a page of ``section`` for the workspace of ``scope``.

    The context always has ``scope``, ``section``, ``names`` (agent id → name) and the
    ``notice``/``error`` message of the previous POST, if any.
    """
    values = {
        "scope": scope,
        "section": section,
        "names": scope.agent_names(),
        "notice": request.query_params.get("notice"),
        "error": request.query_params.get("error"),
        **context,
    }
    response = render(request, template, values, status_code=status_code)
    if request.query_params.get("ws") == scope.workspace.id:
        response.set_cookie(WORKSPACE_COOKIE, scope.workspace.id, samesite="strict", path="/")
    return response


def back(path: str, *, notice: str | None = None, error: str | None = None) -> Response:
    """Redirect (303) to ``path`` after a POST, carrying a message to show there."""
    query = {key: value for key, value in (("notice", notice), ("error", error)) if value}
    separator = "&" if "?" in path else "?"
    target = f"{path}{separator}{urlencode(query)}" if query else path
    return RedirectResponse(target, status_code=303)


def query_without(request: Request, *names: str) -> str:
    """The request's query string without ``names`` (for pagination links)."""
    kept = [(key, value) for key, value in request.query_params.multi_items() if key not in names]
    return urlencode(kept)
