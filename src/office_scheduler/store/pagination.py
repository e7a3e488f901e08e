"""Keyset pagination: pages of records with an opaque cursor naming the last item's sort key.

A cursor is the urlsafe base64 of a JSON array holding the sort key of the last item of a
page (datetimes as ISO-8601 text). Callers treat it as opaque; the store decodes it against
the shape of the key it orders by.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from office_scheduler.domain.errors import InvalidInputError

T = TypeVar("T")

#: Largest page a caller may ask for; larger limits are capped to it.
MAX_LIMIT = 500

CursorValue = str | int | datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Page(Generic[T]):
    """One page of an ordered listing.

    Attributes:
        items: the records of this page, in the listing's order.
        next_cursor: pass it back to get the following page; ``None`` on the last page.
    """

    items: list[T]
    next_cursor: str | None


def check_limit(limit: int, *, maximum: int = MAX_LIMIT) -> int:
    """Validate a page size.

    Args:
        limit: the requested number of items.
        maximum: the cap applied to larger requests.

    Returns:
        ``limit``, capped to ``maximum``.

    Raises:
        InvalidInputError: ``limit`` is not a positive integer (field ``limit``).
    """
    if type(limit) is not int or limit < 1:
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}", field="limit")
    return min(limit, maximum)


def encode_cursor(key: Sequence[CursorValue]) -> str:
    """Encode a sort key as an opaque cursor.

    Args:
        key: the sort key of the last item of a page; datetimes must be aware.

    Returns:
        The urlsafe base64 text of the key's JSON (without padding).
    """
    values = [value.isoformat() if isinstance(value, datetime) else value for value in key]
    raw = json.dumps(values, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_cursor(cursor: str) -> InvalidInputError:
    return InvalidInputError(f"invalid cursor {cursor!r}", field="cursor")


def _convert(value: object, kind: type, cursor: str) -> CursorValue:
    if kind is datetime:
        if not isinstance(value, str):
            raise _bad_cursor(cursor)
        try:
            instant = datetime.fromisoformat(value)
        except ValueError:
            raise _bad_cursor(cursor) from None
        if instant.tzinfo is None:
            raise _bad_cursor(cursor)
        return instant
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad_cursor(cursor)
        return value
    if kind is str:
        if not isinstance(value, str):
            raise _bad_cursor(cursor)
        return value
    raise TypeError(f"unsupported cursor component type {kind!r}")


def decode_cursor(cursor: str, shape: Sequence[type]) -> tuple[Any, ...]:
    """Decode a cursor made by :func:`encode_cursor`.

    Args:
        cursor: the opaque cursor text.
        shape: the type of each component of the sort key (``datetime``, ``int`` or ``str``).

    Returns:
        The sort key, one value per entry of ``shape`` (datetimes aware).

    Raises:
        InvalidInputError: the cursor is not one this listing produced (field ``cursor``).
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        raise _bad_cursor(cursor) from None
    if not isinstance(values, list) or len(values) != len(shape):
        raise _bad_cursor(cursor)
    return tuple(_convert(value, kind, cursor) for value, kind in zip(values, shape, strict=True))


def make_page(
    items: Sequence[T], *, limit: int, key: Callable[[T], Sequence[CursorValue]]
) -> Page[T]:
    """Build a page from up to ``limit + 1`` fetched items.

    Args:
        items: the items fetched in listing order; one more than ``limit`` means more follow.
        limit: the page size.
        key: the sort key of an item, encoded into the cursor.

    Returns:
        The first ``limit`` items and, when more follow, the cursor after the last of them.
    """
    page = list(items[:limit])
    next_cursor = encode_cursor(key(page[-1])) if len(items) > limit and page else None
    return Page(items=page, next_cursor=next_cursor)
