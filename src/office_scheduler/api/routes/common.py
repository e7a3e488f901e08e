"""Shared pieces of the route modules: error documentation, paging parameters, cursors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Query

from office_scheduler.api.views import ErrorOut
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.store.pagination import decode_cursor

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

#: Largest integer the id columns hold (signed 64-bit).
MAX_INT = 2**63 - 1


def checked_cursor(cursor: str | None, shape: Sequence[type]) -> str | None:
    """Reject a cursor whose values the database cannot take (before the store sees it).

    The store decodes cursors itself; this only guards against values that decode but
    overflow the database (a day before year 1 in UTC, an id beyond 64 bits).

    Args:
        cursor: the cursor from the query string.
        shape: the types of the listing's sort key.

    Raises:
        InvalidInputError: an invalid cursor (field ``cursor``).
    """
    if cursor is None:
        return None
    for value in decode_cursor(cursor, shape):
        if isinstance(value, datetime):
            try:
                value.astimezone(UTC)
            except OverflowError:
                raise InvalidInputError(f"invalid cursor {cursor!r}", field="cursor") from None
        elif isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
            raise InvalidInputError(f"invalid cursor {cursor!r}", field="cursor")
    return cursor
