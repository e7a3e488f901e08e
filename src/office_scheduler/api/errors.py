"""Error responses: every failure is ``{"error": {"code", "message", "field"}}``.

Domain errors map to 4xx statuses; request validation failures become 422 naming the
dotted location of the first bad input; anything unexpected becomes a logged 500 whose
body carries no traceback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from office_scheduler.domain.errors import (
    AuthError,
    BusyError,
    ConfigurationError,
    ConflictError,
    DatabaseLockedError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    OfficeError,
)
from office_scheduler.store.engine import is_connection_lost

log = structlog.get_logger(__name__)


class PayloadTooLargeError(InvalidInputError):
    """A request body over its route's size limit (413); ``field`` is ``body``."""

    code = "payload_too_large"


#: HTTP status of each domain error (the most specific class wins).
STATUS_BY_ERROR: tuple[tuple[type[OfficeError], int], ...] = (
    (PayloadTooLargeError, 413),
    (NotFoundError, 404),
    (InvalidInputError, 422),
    (ConflictError, 409),
    (AuthError, 401),
    (ForbiddenError, 403),
    (ConfigurationError, 422),
    (DatabaseLockedError, 503),
    (BusyError, 503),
)
#: Where request inputs come from; not part of the reported field name.
_LOCATIONS = frozenset({"body", "query", "path", "header", "cookie"})
_HTTP_CODES = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """Build the JSON error response every failure uses."""
    body = {"error": {"code": code, "message": message, "field": field}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def status_of(exc: OfficeError) -> int:
    """The HTTP status of a domain error (400 for errors without a specific mapping)."""
    for kind, status in STATUS_BY_ERROR:
        if isinstance(exc, kind):
            return status
    return 400


def field_of(location: Sequence[Any]) -> str | None:
    """The dotted field name of a pydantic error location (without ``body``/``query``...)."""
    parts = [str(part) for part in location]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    return ".".join(parts) or (str(location[0]) if location else None)


async def _office_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, OfficeError)
    headers = None
    if isinstance(exc, AuthError):
        headers = {"WWW-Authenticate": "Bearer"}
    elif isinstance(exc, BusyError):
        headers = {"Retry-After": str(exc.retry_after_s)}
    return error_response(status_of(exc), exc.code, exc.message, exc.field, headers=headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if not errors:
        return error_response(422, InvalidInputError.code, "invalid request")
    first = errors[0]
    if first.get("type") == "json_invalid":
        return error_response(422, InvalidInputError.code, "the body is not valid JSON", "body")
    field = field_of(first.get("loc", ()))
    message = str(first.get("msg", "invalid value"))
    if field:
        message = f"{field}: {message}"
    return error_response(422, InvalidInputError.code, message, field)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        # FastAPI's own "There was an error parsing the body" (a form or multipart body it
        # cannot read): bad input, reported like every other validation error.
        return error_response(422, InvalidInputError.code, "the body cannot be parsed", "body")
    code = _HTTP_CODES.get(exc.status_code, "error")
    return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)


class CatchAllMiddleware:
    """Turns an unexpected exception into a logged 500 JSON response without a traceback.

    A lost database connection is a 503 with ``Retry-After: 1`` instead: the transaction
    that failed was rolled back, and the pool reconnects for the next request.

    It sits inside Starlette's own error middleware, so the exception is logged here once
    and not re-raised to the server.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app; answer 500 when it raises before starting its response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            where = {"method": scope.get("method"), "path": scope.get("path")}
            if started:
                log.exception("api_internal_error", **where)
                raise
            if is_connection_lost(exc):
                # Nothing was committed by the failed transaction: the client may retry.
                log.warning("api_database_unavailable", **where, error=str(exc))
                response = error_response(
                    503,
                    "database_unavailable",
                    "the database connection was lost; retry the request",
                    headers={"Retry-After": "1"},
                )
            else:
                log.exception("api_internal_error", **where)
                response = error_response(500, "internal", "internal server error")
            await response(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers and the catch-all middleware on ``app``."""
    app.add_exception_handler(OfficeError, _office_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(CatchAllMiddleware)
