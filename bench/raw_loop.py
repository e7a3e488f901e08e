"""The baseline: the same row operations as the product, written on the raw driver.

Per wake, one transaction: lock the agent row, insert the request (unique key, ``ON CONFLICT
DO NOTHING RETURNING id``; a duplicate reads the original and stops), look up the agent's
in-flight run in the same task scope (``queued`` then ``claimed``), merge into it (JSON
context append, counter) or insert a run, mark the request. Per run, one claim transaction
(``UPDATE … RETURNING`` of the oldest due run of an eligible agent) and one finish
transaction (end the run, release its checkout, stamp the agent's cooldown).

It runs on the product's own migrated schema (same tables, indexes and constraints) with
the product's connection settings: SQLite WAL, ``synchronous=FULL``, foreign keys on,
``BEGIN IMMEDIATE``; PostgreSQL ``synchronous_commit`` left at the server default (on),
``SELECT … FOR UPDATE`` on the agent and ``FOR UPDATE SKIP LOCKED`` in the claim.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from bench.common import SQLITE_TS
from bench.workload import OfficeIds, Wake

_CLAIM = """
UPDATE runs SET status = 'claimed', claimed_at = ?, claimed_by = 'raw', lease_expires_at = ?
WHERE id = (
  SELECT r.id FROM runs r JOIN agents a ON a.id = r.agent_id
  WHERE r.status = 'queued' AND r.not_before <= ?
    AND a.status IN ('idle', 'working')
    AND (a.cooldown_until IS NULL OR a.cooldown_until <= ?)
    AND (SELECT count(*) FROM runs l
         WHERE l.agent_id = a.id AND l.status IN ('claimed', 'running'))
        < a.max_concurrent_sessions
  ORDER BY r.not_before, r.id LIMIT 1 {lock})
RETURNING id, agent_id
"""


class RawLoop:
    """Intake, claim and finish on a raw DB-API connection (``sqlite3`` or ``psycopg``).

    Args:
        conn: an open connection; for SQLite in autocommit mode (``isolation_level=None``)
            with the product's pragmas already set.
        office: ids of the office seeded by the product.
    """

    def __init__(self, conn: Any, office: OfficeIds, *, postgres: bool) -> None:
        self._conn = conn
        self._office = office
        self._pg = postgres
        self.claimed = 0

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self._pg else text

    def _ts(self, value: datetime) -> Any:
        return value if self._pg else value.replace(tzinfo=None).strftime(SQLITE_TS)

    def _json(self, value: Any) -> str:
        return json.dumps(value)

    def _begin(self) -> Any:
        cur = self._conn.cursor()
        if not self._pg:
            cur.execute("BEGIN IMMEDIATE")
        return cur

    def intake(self, wake: Wake, now: datetime, hold: timedelta) -> None:
        """One wake, one transaction."""
        agent_id = self._office.agents[wake.agent]
        task_id = None if wake.task is None else self._office.tasks[wake.task]
        jsonb = "::jsonb" if self._pg else ""
        cur = self._begin()
        q = self._sql
        cur.execute(
            q("SELECT * FROM agents WHERE id = ?" + (" FOR UPDATE" if self._pg else "")),
            (agent_id,),
        )
        cur.fetchone()
        payload = {"n": wake.key}
        cur.execute(
            q(
                "INSERT INTO wakeup_requests (workspace_id, agent_id, task_id, source,"
                " classification, payload, idempotency_key, status, requested_at)"
                f" VALUES (?, ?, ?, ?, ?, ?{jsonb}, ?, 'queued', ?)"
                " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id"
            ),
            (
                self._office.workspace,
                agent_id,
                task_id,
                wake.source.value,
                "periodic" if wake.periodic else "event",
                self._json(payload),
                wake.key,
                self._ts(now),
            ),
        )
        got = cur.fetchone()
        if got is None:
            cur.execute(q("SELECT * FROM wakeup_requests WHERE idempotency_key = ?"), (wake.key,))
            cur.fetchone()
            self._conn.commit() if self._pg else cur.execute("COMMIT")
            return
        request_id = got[0]
        scope = "task_id IS NULL" if task_id is None else "task_id = ?"
        scope_args: tuple[Any, ...] = () if task_id is None else (task_id,)
        run = None
        for status in ("queued", "claimed"):
            cur.execute(
                q(
                    "SELECT id, status, context_version, coalesced_count,"
                    f" classification FROM runs WHERE agent_id = ? AND status = ? AND {scope}"
                    " ORDER BY id DESC LIMIT 1"
                ),
                (agent_id, status, *scope_args),
            )
            run = cur.fetchone()
            if run is not None:
                break
        if run is not None:
            # The merged wake is its request row (marked below); the run gains a count.
            promote = run[4] == "periodic" and not wake.periodic
            cur.execute(
                q(
                    "UPDATE runs SET context_version = ?,"
                    " coalesced_count = ?, classification = ? WHERE id = ? AND status = ?"
                ),
                (run[2] + 1, run[3] + 1, "event" if promote else run[4], run[0], run[1]),
            )
            run_id, status = run[0], "coalesced"
        else:
            not_before = now + hold if wake.hold else now
            cur.execute(
                q(
                    "INSERT INTO runs (workspace_id, agent_id, task_id, source, classification,"
                    " status, idempotency_key, context_version,"
                    " coalesced_count, retry_count, requested_at, not_before)"
                    " VALUES (?, ?, ?, ?, ?, 'queued', ?, 1, 1, 0, ?, ?) RETURNING id"
                ),
                (
                    self._office.workspace,
                    agent_id,
                    task_id,
                    wake.source.value,
                    "periodic" if wake.periodic else "event",
                    wake.key,
                    self._ts(now),
                    self._ts(not_before),
                ),
            )
            run_id, status = cur.fetchone()[0], "claimed"
        cur.execute(
            q("UPDATE wakeup_requests SET status = ?, run_id = ? WHERE id = ?"),
            (status, run_id, request_id),
        )
        self._conn.commit() if self._pg else cur.execute("COMMIT")

    def claim(self, now: datetime) -> tuple[int, str] | None:
        """Claim the oldest due run of an eligible agent (one transaction)."""
        cur = self._begin()
        lock = "FOR UPDATE OF r SKIP LOCKED" if self._pg else ""
        ts = self._ts(now)
        cur.execute(
            self._sql(_CLAIM.format(lock=lock)),
            (ts, self._ts(now + timedelta(minutes=1)), ts, ts),
        )
        row = cur.fetchone()
        self._conn.commit() if self._pg else cur.execute("COMMIT")
        return None if row is None else (row[0], row[1])

    def finish(self, run_id: int, agent_id: str, now: datetime) -> None:
        """End a claimed run, release its checkout, start the agent's cooldown."""
        cur = self._begin()
        q = self._sql
        ts = self._ts(now)
        cur.execute(
            q(
                "UPDATE runs SET status = 'finished', reason = 'completed', finished_at = ?,"
                " lease_expires_at = NULL WHERE id = ? AND status IN ('claimed', 'running')"
            ),
            (ts, run_id),
        )
        cur.execute(
            q(
                "UPDATE tasks SET checkout_agent_id = NULL, checkout_run_id = NULL,"
                " checkout_at = NULL WHERE checkout_run_id = ?"
            ),
            (run_id,),
        )
        cur.execute(
            q("UPDATE agents SET last_wakeup_finished_at = ?, cooldown_until = ? WHERE id = ?"),
            (ts, self._ts(now + timedelta(seconds=10)), agent_id),
        )
        self._conn.commit() if self._pg else cur.execute("COMMIT")

    def drain(self, now: datetime) -> int:
        """Claim and finish until nothing is claimable at ``now``; returns runs done."""
        done = 0
        while (got := self.claim(now)) is not None:
            self.finish(got[0], got[1], now)
            done += 1
        self.claimed += done
        return done


def sqlite_connect(path: str) -> sqlite3.Connection:
    """A raw ``sqlite3`` connection with the product's pragmas (store/engine.py)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA cache_size=-65536")
    return conn
