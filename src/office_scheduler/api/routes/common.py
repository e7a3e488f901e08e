"""Shared pieces of the route modules: error documentation and page-size parameters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from office_scheduler.api.views import ErrorOut

#: Error responses every authenticated route may give (documented in OpenAPI).
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "missing, unknown, revoked or expired token"},
    403: {"model": ErrorOut, "description": "the token may not do this"},
    404: {"model": ErrorOut, "description": "unknown id (or another workspace's)"},
    409: {"model": ErrorOut, "description": "conflicts with the current state"},
    422: {"model": ErrorOut, "description": "invalid input; `field` names it"},
}

Limit = Annotated[int, Query(ge=1, le=500, description="page size")]
Cursor = Annotated[
    str | None, Query(max_length=1000, description="`next_cursor` of the previous page")
]
