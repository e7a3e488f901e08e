"""Cross-process pokes on PostgreSQL: ``NOTIFY`` on intake, ``LISTEN`` per process.

Intake sends ``pg_notify(channel, due)`` inside its transaction, so the notification is
delivered exactly when the wake is committed (and never for a rolled-back one); PostgreSQL
folds repeated identical notifications of one transaction into one. The payload says when
the run may first be claimed: empty for now, else the instant as Unix seconds (a coalescing
hold or the agent's cooldown). Every scheduler process keeps one dedicated connection
listening on the channel; a due wake pokes its runs loop at once, a later one only moves
its next look forward, so a held wake costs no claim attempt in every process.
The channel name includes the schema, so deployments (and parallel tests) that share a
database but not a schema never wake each other. On SQLite there is one process, which pokes
itself directly; everything here is then a no-op.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime
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


_NOTIFY = sa.select(
    sa.func.pg_notify(
        sa.bindparam("channel", type_=sa.String), sa.bindparam("payload", type_=sa.String)
    )
)


def notify_wake(conn: Connection, schema: str | None, due: datetime | None = None) -> None:
    """Queue a wake notification in the caller's transaction (PostgreSQL; no-op elsewhere).

    Args:
        conn: the intake transaction's connection.
        schema: the office's schema (names the channel).
        due: when the run may first be claimed (aware); ``None`` for now.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(_NOTIFY, {"channel": wake_channel(schema), "payload": wake_payload(due)})


def wake_payload(due: datetime | None) -> str:
    """The payload for ``due``: ``""`` for now, else Unix seconds in whole milliseconds.

    Rounded up, so that a listener woken by it is never early.
    """
    return "" if due is None else f"{math.ceil(due.timestamp() * 1000) / 1000:.3f}"


def earliest_due(payloads: Iterable[str]) -> datetime | None:
    """The earliest instant named by wake payloads: ``None`` when any says "now".

    A payload that is not a number counts as "now" (the safe reading: look at once).
    """
    earliest: datetime | None = None
    for payload in payloads:
        try:
            due = datetime.fromtimestamp(float(payload), tz=UTC)
        except (ValueError, OverflowError, OSError):
            return None
        earliest = due if earliest is None else min(earliest, due)
    return earliest


class WakeListener:
    """A dedicated ``LISTEN`` connection; :meth:`wait` returns the wakes' payloads.

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
        try:
            await conn.execute(psql.SQL("LISTEN {}").format(psql.Identifier(self._channel)))
        except BaseException:
            # Cancelled (the loop stopping) or failed before it was ours to close later.
            await conn.close()
            raise
        self._conn = conn

    async def wait(self, seconds: float) -> list[str]:
        """Wait up to ``seconds`` for notifications; returns their payloads (see the module).

        Returns as soon as one arrives (later ones queued by the server are taken too).

        Raises:
            psycopg.Error: the connection was lost (call :meth:`connect` again).
        """
        if self._conn is None:
            raise psycopg.OperationalError("the wake listener is not connected")
        return [
            notice.payload async for notice in self._conn.notifies(timeout=seconds, stop_after=1)
        ]

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
