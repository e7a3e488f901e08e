"""Cross-process pokes on PostgreSQL: ``NOTIFY`` on intake, ``LISTEN`` per process.

Intake sends ``pg_notify(channel, '')`` inside its transaction, so the notification is
delivered exactly when the wake is committed (and never for a rolled-back one); PostgreSQL
folds repeated notifications of one transaction into one. Every scheduler process keeps one
dedicated connection listening on the channel and pokes its runs loop on each notification.
The channel name includes the schema, so deployments (and parallel tests) that share a
database but not a schema never wake each other. On SQLite there is one process, which pokes
itself directly; everything here is then a no-op.
"""

from __future__ import annotations

import re
from functools import cache

import psycopg
import sqlalchemy as sa
import structlog
from psycopg import sql as psql
from sqlalchemy.engine import Connection

from office_scheduler.store.engine import KEEPALIVES, Database, application_name

log = structlog.get_logger(__name__)

#: PostgreSQL truncates identifiers (and so channel names) to 63 bytes.
MAX_CHANNEL = 63
CONNECT_TIMEOUT_S = 5


@cache
def wake_channel(schema: str | None) -> str:
    """The channel name for wakes in ``schema`` (``office_wake`` for the default one)."""
    suffix = re.sub(r"[^a-z0-9_]", "_", (schema or "").lower())
    return f"office_wake_{suffix}"[:MAX_CHANNEL] if suffix else "office_wake"


_NOTIFY = sa.select(sa.func.pg_notify(sa.bindparam("channel", type_=sa.String), ""))


def notify_wake(conn: Connection, schema: str | None) -> None:
    """Queue a wake notification in the caller's transaction (PostgreSQL; no-op elsewhere)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY, {"channel": wake_channel(schema)})


class WakeListener:
    """A dedicated ``LISTEN`` connection; :meth:`wait` returns how many wakes arrived.

    Args:
        db: a PostgreSQL database (use :func:`listens` first).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._channel = wake_channel(db.schema)
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None

    @property
    def channel(self) -> str:
        """The channel this listener follows."""
        return self._channel

    @property
    def connected(self) -> bool:
        """Whether the listening connection is open."""
        return self._conn is not None and not self._conn.closed

    async def connect(self) -> None:
        """Open the connection and ``LISTEN`` (closing a previous, broken one first).

        Raises:
            psycopg.Error: the server cannot be reached.
        """
        await self.close()
        conn = await psycopg.AsyncConnection.connect(
            self._db.conninfo(),
            autocommit=True,
            options=self._db.libpq_options,
            connect_timeout=CONNECT_TIMEOUT_S,
            **KEEPALIVES,
            application_name=application_name(self._db.schema, "listener"),
        )
        await conn.execute(psql.SQL("LISTEN {}").format(psql.Identifier(self._channel)))
        self._conn = conn

    async def wait(self, seconds: float) -> int:
        """Wait up to ``seconds`` for notifications; returns how many arrived.

        Returns as soon as one arrives (later ones queued by the server are taken too).

        Raises:
            psycopg.Error: the connection was lost (call :meth:`connect` again).
        """
        if self._conn is None:
            raise psycopg.OperationalError("the wake listener is not connected")
        count = 0
        async for _ in self._conn.notifies(timeout=seconds, stop_after=1):
            count += 1
        return count

    def backend_pid(self) -> int | None:
        """The server process id of the listening connection (tests terminate it)."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except psycopg.Error:  # pragma: no cover - closing a broken socket
                log.debug("wake_listener_close_failed")


def listens(db: Database) -> bool:
    """Whether ``db`` supports cross-process wake notifications (PostgreSQL)."""
    return db.dialect == "postgresql"
