"""Rendering: the Jinja2 environment, its filters, and the route class of every page.

:class:`PageRoute` turns the product's errors into an HTML page that shows the message
(with the status the API would give: 404, 409, 422...), and a missing session into a
redirect to ``/login`` (``401`` for htmx fragments and event streams), so no page ever
answers a traceback or a 500 for bad input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from office_scheduler.api.errors import STATUS_BY_ERROR
from office_scheduler.domain.errors import OfficeError
from office_scheduler.error_text import first_error_line
from office_scheduler.web.session import LoginRequired

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def iso_utc(value: datetime | None) -> str:
    """``2026-03-09 06:30:00Z`` for an aware instant; empty for ``None``."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def money(subcents: int | None) -> str:
    """Sub-cents (1/100 of a cent) as dollars, e.g. ``$1.2345``; ``—`` for ``None``."""
    if subcents is None:
        return "—"
    return f"${subcents / 10_000:,.4f}"


def seconds(value: timedelta) -> str:
    """A duration as whole seconds, e.g. ``10``."""
    return f"{value.total_seconds():g}"


def pretty_json(value: object) -> str:
    """Indented JSON for ``<pre>`` blocks."""
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


TEMPLATES.env.filters["utc"] = iso_utc
TEMPLATES.env.filters["money"] = money
TEMPLATES.env.filters["seconds"] = seconds
TEMPLATES.env.filters["pretty_json"] = pretty_json
TEMPLATES.env.filters["error_line"] = first_error_line


def render(
    request: Request, template: str, context: dict[str, Any], *, status_code: int = 200
) -> Response:
    """Render ``template`` with ``context`` (the request is added as ``request``)."""
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status_code)


def status_of(error: OfficeError) -> int:
    """The HTTP status of a product error (as the API maps it)."""
    for kind, status in STATUS_BY_ERROR:
        if isinstance(error, kind):
            return status
    return 400


def _wants_fragment(request: Request) -> bool:
    return "hx-request" in request.headers or request.url.path == "/events"


class PageRoute(APIRoute):
    """A dashboard route: errors become visible messages, a missing session a login."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """Wrap the FastAPI handler with the dashboard's error pages."""
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired:
                if _wants_fragment(request):
                    return Response("sign in again", status_code=401)
                target = request.url.path
                if request.url.query:
                    target += "?" + request.url.query
                return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
            except OfficeError as exc:
                context = {"message": exc.message, "field": exc.field, "code": exc.code}
                return render(request, "error.html", context, status_code=status_of(exc))
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                where = ".".join(str(part) for part in first.get("loc", ())[1:]) or None
                message = (
                    f"{where}: {first.get('msg', 'invalid input')}" if where else "invalid input"
                )
                context = {"message": message, "field": where, "code": "invalid"}
                return render(request, "error.html", context, status_code=422)

        return handle
