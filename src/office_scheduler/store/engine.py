"""Engines for SQLite and PostgreSQL with the settings the scheduler relies on.

SQLite: WAL, ``synchronous=FULL`` (a committed wake survives power loss), a busy timeout,
foreign keys on, and every write transaction opened with ``BEGIN IMMEDIATE`` so that
concurrent writers wait for the lock instead of failing on a stale snapshot. Readers use a
second engine that opens plain deferred transactions and never queue behind the writer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalise_url(url: str) -> str:
    """Return ``url`` with the driver SQLAlchemy should use (``postgresql`` → psycopg 3)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def _sqlite_engine(url: str, *, begin: str, pool_size: int) -> Engine:
    engine = sa.create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        pool_size=pool_size,
        max_overflow=pool_size,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself instead of pysqlite.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA cache_size=-65536")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


@dataclass(frozen=True, slots=True)
class Database:
    """A writer and a reader engine over one database URL.

    Attributes:
        url: the SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
        writer: engine for read-write transactions.
        reader: engine for read-only transactions (the writer itself on PostgreSQL).
    """

    url: str
    writer: Engine
    reader: Engine

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.writer.dialect.name

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """Yield a connection inside one write transaction; commit on success."""
        with self.writer.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """Yield a connection inside one read-only transaction."""
        with self.reader.begin() as conn:
            yield conn

    def dispose(self) -> None:
        """Close every pooled connection; the database must not be used afterwards."""
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()


def open_database(
    url: str,
    *,
    pool_size: int = 5,
    statement_timeout_ms: int = 30_000,
    schema: str | None = None,
) -> Database:
    """Create the engines for ``url``.

    Args:
        url: ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a PostgreSQL URL.
        pool_size: connections kept per engine.
        statement_timeout_ms: PostgreSQL ``statement_timeout`` of every connection.
        schema: PostgreSQL schema to use as ``search_path`` (tests isolate themselves this way).

    Raises:
        ValueError: the URL names a database this product does not support.
    """
    url = normalise_url(url)
    name = sa.engine.make_url(url).get_backend_name()
    if name == "sqlite":
        return Database(
            url=url,
            writer=_sqlite_engine(url, begin="BEGIN IMMEDIATE", pool_size=pool_size),
            reader=_sqlite_engine(url, begin="BEGIN", pool_size=pool_size),
        )
    if name == "postgresql":
        options = [f"-c statement_timeout={statement_timeout_ms}"]
        if schema:
            options.append(f"-c search_path={schema}")
        engine = sa.create_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            connect_args={"options": " ".join(options)},
        )
        return Database(url=url, writer=engine, reader=engine)
    raise ValueError(f"unsupported database {name!r}: use sqlite:/// or postgresql://")
