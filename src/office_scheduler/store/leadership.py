"""Maintenance leadership: at most one process at a time runs the maintenance passes.

On PostgreSQL the leader holds a session-level ``pg_try_advisory_lock`` on a dedicated
connection outside the pool. The server releases the lock when that connection ends, so a
process that dies (SIGKILL, power loss, a network cut) hands leadership over as soon as its
backend is gone; the next node to try takes it. The lock key is derived from the schema, so
deployments (and parallel test runs) in different schemas of one database never contend.

On SQLite a single scheduler process owns the file (``Service`` takes a file lock), so that
process is always the leader.
"""

from __future__ import annotations

import threading

import psycopg
import structlog

from office_scheduler.store.engine import KEEPALIVES, Database, advisory_key, application_name

log = structlog.get_logger(__name__)

#: Connect timeout of the dedicated connection, in seconds.
CONNECT_TIMEOUT_S = 5


def lock_key(schema: str | None) -> int:
    """The advisory lock key of the maintenance lock of ``schema``."""
    return advisory_key("maintenance", schema)


class Leadership:
    """Whether this process holds maintenance leadership; thread-safe, blocking calls.

    Args:
        db: the database; on PostgreSQL a dedicated connection is opened on first use.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._mutex = threading.Lock()
        self._held = db.dialect != "postgresql"

    @property
    def held(self) -> bool:
        """What the last :meth:`ensure` found (no database access)."""
        return self._held

    def ensure(self) -> bool:
        """Check that the lock is still held, or try to take it; returns whether held.

        A lost connection counts as lost leadership (the server released the lock); the
        next call tries again on a new connection. Database errors are logged, never raised.
        """
        if self._db.dialect != "postgresql":
            return True
        with self._mutex:
            try:
                self._held = self._check_or_take()
            except psycopg.Error as exc:
                if self._held:
                    log.error("maintenance_leadership_lost", error=repr(exc))
                else:
                    log.warning("maintenance_leadership_unavailable", error=repr(exc))
                self._drop()
                self._held = False
            return self._held

    def _check_or_take(self) -> bool:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self._db.conninfo(),
                autocommit=True,
                options=self._db.libpq_options,
                connect_timeout=CONNECT_TIMEOUT_S,
                **KEEPALIVES,
                application_name=application_name(self._db.schema, "maintenance"),
            )
        if self._held:
            # Cheap liveness check: the lock lives exactly as long as this session.
            self._conn.execute("SELECT 1")
            return True
        row = self._conn.execute(
            "SELECT pg_try_advisory_lock(%s)", (lock_key(self._db.schema),)
        ).fetchone()
        taken = bool(row and row[0])
        if taken:
            log.info("maintenance_leadership_taken", schema=self._db.schema)
        return taken

    def backend_pid(self) -> int | None:
        """The server process id of the dedicated connection (tests terminate it)."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    def release(self) -> None:
        """Give leadership up: unlock, then close the dedicated connection (idempotent).

        The explicit unlock makes the lock free when this call returns. Closing alone
        frees it only once the server's backend has noticed the closed socket, so a
        process taking over right after a graceful shutdown could still find it taken.
        """
        with self._mutex:
            if self._held and self._db.dialect == "postgresql":
                self._unlock()
                log.info("maintenance_leadership_released")
            self._drop()
            self._held = self._db.dialect != "postgresql"

    def _unlock(self) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(self._db.schema),))
        except psycopg.Error:  # the connection broke: the server frees the lock itself
            log.debug("leadership_unlock_failed")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:  # pragma: no cover - closing a broken socket
                log.debug("leadership_close_failed")
