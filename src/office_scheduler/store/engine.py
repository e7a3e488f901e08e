"""Engines for SQLite and PostgreSQL with the settings the scheduler relies on.

SQLite: WAL, ``synchronous=FULL`` (a committed wake survives power loss), a busy timeout,
foreign keys on, and every write transaction opened with ``BEGIN IMMEDIATE`` so that
concurrent writers wait for the lock instead of failing on a stale snapshot (the threads of
one process wait on a Python lock first: :attr:`Database.writer_lock`). Readers use a
second engine that opens plain deferred transactions and never queue behind the writer.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.permissions import create_private_file

SQLITE_BUSY_TIMEOUT_MS = 30_000
#: TCP keepalives of PostgreSQL connections that live long (listener, leadership lock): a
#: peer that vanished without closing the socket is noticed within about 25 seconds.
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


#: SQLSTATEs of a server going away (class 08 is checked separately): admin, crash and
#: startup shutdowns (PostgreSQL "Operator Intervention").
_SERVER_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})
#: SQLite errors that mean "try again later", not "this statement is wrong".
_SQLITE_TRANSIENT = ("database is locked", "unable to open database", "disk i/o error")


def is_connection_lost(error: BaseException) -> bool:
    """Whether ``error`` is a lost or refused database connection (not a bad statement).

    Such a failure says nothing about the run being processed, so callers put the run
    back in the queue (or retry) instead of failing it. PostgreSQL: the connection was
    invalidated, or the SQLSTATE is a connection exception (class ``08``) or a server
    shutdown (``57P01``-``57P03``), or the driver failed before the server answered (no
    SQLSTATE). A statement timeout (``57014``), deadlock (``40P01``) or serialization
    failure is *not* a lost connection: retrying or requeueing it blindly could loop.
    SQLite: a locked, unopenable or failing database file.
    """
    if isinstance(error, sa.exc.DisconnectionError):
        return True
    if not isinstance(error, sa.exc.DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    if not isinstance(error, sa.exc.OperationalError):
        return False
    state = getattr(error.orig, "sqlstate", None)
    if isinstance(error.orig, psycopg.Error):
        return state is None or state.startswith("08") or state in _SERVER_GONE_STATES
    return any(text in str(error.orig).lower() for text in _SQLITE_TRANSIENT)


#: SQLSTATEs of a transaction PostgreSQL rolled back to break a lock cycle or a
#: serialization conflict: nothing of it was written, so running it again is safe.
_ROLLED_BACK_STATES = frozenset({"40P01", "40001"})


def is_deadlock(error: BaseException) -> bool:
    """Whether PostgreSQL rolled the transaction back to break a lock cycle or a conflict.

    SQLSTATE ``40P01`` (deadlock detected) or ``40001`` (serialization failure): nothing
    of the transaction was written, so it may be run again.
    """
    if not isinstance(error, sa.exc.DBAPIError) or not isinstance(error.orig, psycopg.Error):
        return False
    return getattr(error.orig, "sqlstate", None) in _ROLLED_BACK_STATES


def in_transaction(conn: Connection) -> bool:
    """Whether the database still holds ``conn``'s transaction open.

    SQLite ends the whole transaction by itself on some errors (``SQLITE_FULL``,
    ``SQLITE_IOERR``, ``SQLITE_NOMEM``), savepoints included, while SQLAlchemy still
    thinks it is open. PostgreSQL keeps a failed transaction open until it is rolled back.
    """
    if conn.dialect.name != "sqlite":
        return True
    return bool(getattr(conn.connection.dbapi_connection, "in_transaction", True))


def normalise_url(url: str) -> str:
    """Return ``url`` with the driver SQLAlchemy should use (``postgresql`` → psycopg 3)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


#: SQLAlchemy driver names this product runs on (``postgresql://`` is normalised to psycopg).
_DRIVERS = frozenset({"sqlite", "sqlite+pysqlite", "postgresql+psycopg"})
_URL_FORMS = "use sqlite:///PATH or postgresql://USER@HOST/DATABASE"


def _supported_url(url: str) -> sa.engine.URL:
    """``url`` parsed, if it names a database this product runs on.

    Raises:
        InvalidInputError: empty, unparseable, another database or driver, or a SQLite
            URL with a host part (``sqlite://file.db`` instead of ``sqlite:///file.db``).
    """
    if not url.strip():
        raise InvalidInputError(f"the database URL is empty: {_URL_FORMS}", field="database_url")
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise InvalidInputError(
            f"not a database URL: {url!r}: {_URL_FORMS}", field="database_url"
        ) from None
    if parsed.drivername not in _DRIVERS:
        raise InvalidInputError(
            f"unsupported database {parsed.drivername!r}: {_URL_FORMS}", field="database_url"
        )
    if parsed.get_backend_name() == "sqlite" and (parsed.host or not parsed.database):
        raise InvalidInputError(
            f"a SQLite URL names a file after three slashes, as in sqlite:///office.db "
            f"(got {url!r})",
            field="database_url",
        )
    return parsed


def _create_sqlite_file(database: str | None) -> None:
    """Create a missing SQLite database file owner-only (0600) before SQLite creates it 0644.

    SQLite gives the ``-wal`` and ``-shm`` files the database file's mode. In-memory
    databases and unwritable places are left to SQLite (it reports its own error).
    """
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    with contextlib.suppress(OSError):
        create_private_file(Path(database))


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


class WriterLock:
    """SQLite's single write lock, taken in Python by the threads of one process.

    SQLite lets one connection write at a time; a second one meeting ``BEGIN IMMEDIATE``
    waits in SQLite's busy handler, which polls in sleeps of up to 100 ms. Threads of one
    process queue on this lock instead, and are handed the write lock the moment it is
    free. Reentrant, and owned by the thread that took it: a transaction must end in the
    thread that began it (the store never carries one across threads).

    A thread waits at most the busy timeout here for the other threads of its process;
    when another *process* then holds SQLite's lock, ``BEGIN IMMEDIATE`` may wait up to
    the busy timeout again.

    Args:
        timeout_s: seconds to wait before giving up (:data:`SQLITE_BUSY_TIMEOUT_MS`).
    """

    def __init__(self, timeout_s: float) -> None:
        self._lock = threading.RLock()
        self._timeout_s = timeout_s

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock; ``False`` when it is held elsewhere past the timeout (or at once)."""
        if not blocking:
            return self._lock.acquire(blocking=False)
        return self._lock.acquire(timeout=self._timeout_s)

    def release(self) -> None:
        """Give the lock back (the thread that took it)."""
        self._lock.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block.

        Raises:
            sqlalchemy.exc.OperationalError: "database is locked" after the timeout, the
                error SQLite's busy handler gives (:func:`is_connection_lost` counts it as
                transient).
        """
        if not self.acquire():
            locked = sqlite3.OperationalError("database is locked")
            raise sa.exc.OperationalError("BEGIN IMMEDIATE", None, locked)
        try:
            yield
        finally:
            self.release()


class _Pins(threading.local):
    """The connection each thread has pinned with :meth:`Database.transaction`/``snapshot``."""

    writing: Connection | None = None
    reading: Connection | None = None


@dataclass(frozen=True, slots=True)
class Database:
    """A writer and a reader engine over one database URL.

    Store methods open their own transaction through :meth:`write` or :meth:`read`. A
    caller that makes several store calls in a row can run them in one transaction (one
    commit, one pooled connection) with :meth:`transaction`, or their reads on one
    connection with :meth:`snapshot`; the calls themselves do not change.

    Attributes:
        url: the SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
        writer: engine for read-write transactions.
        reader: engine for read-only transactions (on PostgreSQL the writer's pool in
            autocommit mode).
        libpq_options: PostgreSQL only: the ``options`` every connection is opened with
            (statement timeout, ``search_path``); dedicated connections outside the pool
            (the wake listener, the maintenance leadership lock) use them too.
        schema: PostgreSQL only: the schema named in ``search_path``, if any.
        writer_lock: SQLite only: taken around every write transaction, so the threads of
            this process queue for SQLite's single write lock in Python (:class:`WriterLock`);
            other processes still meet the busy timeout.
    """

    url: str
    writer: Engine
    reader: Engine
    libpq_options: str = ""
    schema: str | None = None
    writer_lock: WriterLock | None = field(default=None, repr=False, compare=False)
    _pins: _Pins = field(default_factory=_Pins, repr=False, compare=False)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.writer.dialect.name

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """Yield a connection inside one write transaction; commit on success.

        Inside :meth:`transaction` (same thread) this is the pinned transaction's
        connection: the caller's writes commit or roll back with the whole block.
        """
        pinned = self._pins.writing
        if pinned is not None:
            yield pinned
            return
        with self._writer_turn(), self.writer.begin() as conn:
            yield conn

    def _writer_turn(self) -> AbstractContextManager[None]:
        return nullcontext() if self.writer_lock is None else self.writer_lock.held()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """Yield a connection inside one read-only transaction.

        Inside :meth:`transaction` or :meth:`snapshot` (same thread) this is the pinned
        connection, so the reads see the block's own writes and one another's snapshot.
        """
        pinned = self._pins.writing or self._pins.reading
        if pinned is not None:
            yield pinned
            return
        with self.reader.begin() as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Run every store call made in this thread inside the block as one write transaction.

        One commit at the end (one ``fsync`` on SQLite, one round trip on PostgreSQL)
        instead of one per call; an exception leaving the block rolls all of them back.
        Nested use joins the outer transaction. A store method that raises inside the block
        has not undone its own writes: let the exception leave the block, or wrap the call
        in ``conn.begin_nested()`` to keep the rest.
        """
        if self._pins.writing is not None:
            yield self._pins.writing
            return
        with self._writer_turn(), self.writer.begin() as conn:
            self._pins.writing = conn
            try:
                yield conn
            finally:
                self._pins.writing = None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run the reads of every store call made in this thread inside the block together.

        They share one pooled read connection (on SQLite one transaction, so one
        snapshot; on PostgreSQL autocommit statements, as outside the block). Writes
        inside the block are not affected: they open their own transactions.
        """
        if self._pins.writing is not None or self._pins.reading is not None:
            yield
            return
        with self.reader.begin() as conn:
            self._pins.reading = conn
            try:
                yield
            finally:
                self._pins.reading = None

    def conninfo(self) -> str:
        """PostgreSQL only: a libpq URI for a dedicated connection (no pool, no driver name).

        Raises:
            ValueError: the database is not PostgreSQL.
        """
        if self.dialect != "postgresql":
            raise ValueError("dedicated connections exist only on PostgreSQL")
        url = sa.engine.make_url(self.url)
        url = url.set(drivername="postgresql").difference_update_query(["options"])
        return url.render_as_string(hide_password=False)

    def dispose(self) -> None:
        """Close every pooled connection; the database must not be used afterwards."""
        self.writer.dispose()
        if self.reader.pool is not self.writer.pool:
            self.reader.dispose()


def advisory_key(purpose: str, schema: str | None) -> int:
    """A signed 64-bit PostgreSQL advisory lock key for ``purpose`` within ``schema``.

    Keyed by schema, so offices that share one server in separate schemas never wait on
    each other's locks.
    """
    digest = hashlib.sha256(f"office-scheduler:{purpose}:{schema or ''}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


#: A connection back in the pool for longer than this is pinged before it is handed out.
#: Connections in steady use skip the ping (the "alive bypass window" of JDBC pools).
PING_AFTER_IDLE_S = 0.5


def _ping_when_idle(engine: Engine) -> None:
    """Ping connections that sat idle in ``engine``'s pool; replace those that are dead."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("checked_in_at")
        if idle_since is None or time.monotonic() - idle_since <= PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # The pool discards this connection and checks out (or opens) another.
            raise sa.exc.DisconnectionError(f"idle connection is dead: {exc}") from exc


_SEARCH_PATH = re.compile(r"(?:^|\s)-c\s*search_path=(\S+)")


def _libpq_options(url: sa.URL, statement_timeout_ms: int, schema: str | None) -> str:
    """Join the URL's own ``options`` with the statement timeout and ``search_path``.

    A schema given in the URL (``?options=-csearch_path%3Dname``) is kept when ``schema``
    is not given, so a deployment can point every process at one schema by URL alone.
    """
    given = url.query.get("options", "")
    parts = [given if isinstance(given, str) else " ".join(given)]
    parts.append(f"-c statement_timeout={statement_timeout_ms}")
    if schema:
        parts.append(f"-c search_path={schema}")
    return " ".join(part for part in parts if part)


def application_name(schema: str | None, role: str = "") -> str:
    """The ``application_name`` of this product's connections (shown in ``pg_stat_activity``).

    It names the schema, so an operator (or a test) can tell deployments apart.
    """
    parts = ["office-scheduler", role, schema or ""]
    return " ".join(part for part in parts if part)[:63]


def _schema_of(options: str) -> str | None:
    found = _SEARCH_PATH.findall(options)
    return found[-1].split(",")[0].strip('"') if found else None


def open_database(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int | None = None,
    statement_timeout_ms: int = 30_000,
    schema: str | None = None,
) -> Database:
    """Create the engines for ``url``.

    On PostgreSQL, reads run on autocommit connections of the same pool: one round trip per
    statement instead of ``BEGIN``/statement/``ROLLBACK``, with the same per-statement
    snapshots as the default ``READ COMMITTED`` transactions. A pooled connection is pinged
    on checkout only when it sat idle for longer than :data:`PING_AFTER_IDLE_S` (a ping on
    every checkout would add a round trip to every transaction of the hot path). A connection
    the server dropped while in steady use (restart, ``pg_terminate_backend``) fails the one
    transaction that uses it; SQLAlchemy then discards every connection opened before the
    failure, intake retries once, the scheduler loops retry the pass, and the API answers
    503 with ``Retry-After``.

    Args:
        url: ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a PostgreSQL URL
            (an ``options`` query parameter, e.g. a ``search_path``, is kept).
        pool_size: connections kept per engine.
        max_overflow: extra connections opened under load and closed afterwards
            (default: ``pool_size``).
        statement_timeout_ms: PostgreSQL ``statement_timeout`` of every connection.
        schema: PostgreSQL schema to use as ``search_path`` (tests isolate themselves this way).

    Raises:
        InvalidInputError: the URL is not one of the forms above (field ``database_url``).
    """
    url = normalise_url(url)
    parsed = _supported_url(url)
    name = parsed.get_backend_name()
    overflow = pool_size if max_overflow is None else max_overflow
    if name == "sqlite":
        _create_sqlite_file(parsed.database)
        return Database(
            url=url,
            writer=_sqlite_engine(url, begin="BEGIN IMMEDIATE", pool_size=pool_size),
            reader=_sqlite_engine(url, begin="BEGIN", pool_size=pool_size),
            writer_lock=WriterLock(SQLITE_BUSY_TIMEOUT_MS / 1000),
        )
    if name == "postgresql":
        options = _libpq_options(parsed, statement_timeout_ms, schema)
        in_schema = _schema_of(options)
        engine = sa.create_engine(
            parsed.difference_update_query(["options"]),
            pool_size=pool_size,
            max_overflow=overflow,
            pool_pre_ping=False,
            connect_args={"options": options, "application_name": application_name(in_schema)},
        )
        _ping_when_idle(engine)
        return Database(
            url=url,
            writer=engine,
            reader=engine.execution_options(isolation_level="AUTOCOMMIT"),
            libpq_options=options,
            schema=in_schema,
        )
    raise AssertionError(f"unreachable: {name!r} passed _supported_url")
