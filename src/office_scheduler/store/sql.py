"""Small helpers every store module uses on the connection of its one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, NotFoundError
from office_scheduler.store.rows import Row

__all__ = ["Row", "all_rows", "first_row", "insert", "missing_reference", "unique_conflict"]


def insert(conn: Connection) -> Any:
    """The dialect's INSERT construct (both support ``ON CONFLICT`` and ``RETURNING``)."""
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def first_row(conn: Connection, query: sa.Executable) -> Row | None:
    """The first row of ``query`` as a column-name mapping, or ``None``."""
    return cast(Row | None, conn.execute(query).mappings().first())


def all_rows(conn: Connection, query: sa.Executable) -> list[Row]:
    """Every row of ``query`` as column-name mappings."""
    return cast(list[Row], list(conn.execute(query).mappings().all()))


@contextmanager
def unique_conflict(*, field: str, message: str) -> Iterator[None]:
    """Turn a unique-constraint violation raised inside the block into :class:`ConflictError`.

    The pre-checks of the store methods report duplicates; this covers the race between two
    transactions that both passed the check.
    """
    try:
        yield
    except sa.exc.IntegrityError as exc:
        raise ConflictError(message, field=field) from exc


@contextmanager
def missing_reference(*, field: str, message: str) -> Iterator[None]:
    """Turn a foreign-key violation raised inside the block into :class:`NotFoundError`.

    Use it only around statements whose sole possible integrity failure is the missing
    referenced row named by ``field``.
    """
    try:
        yield
    except sa.exc.IntegrityError as exc:
        raise NotFoundError(message, field=field) from exc
