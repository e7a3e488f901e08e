"""Bulk seeding straight into the product's tables (``executemany`` on SQLite, ``COPY`` on PG).

Only the setup of the large benchmarks uses it; every figure is then measured through the
product's own store calls. Rows carry every NOT NULL column of ``store/schema.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from bench.common import SQLITE_TS
from office_scheduler.store.engine import Database
from office_scheduler.store.queue_heads import reconcile_heads
from office_scheduler.store.schema import agents, workflows, workspace_settings, workspaces

RUN_COLUMNS = (
    "workspace_id",
    "agent_id",
    "task_id",
    "source",
    "classification",
    "status",
    "context_version",
    "coalesced_count",
    "retry_count",
    "requested_at",
    "not_before",
    "finished_at",
)
BATCH = 20_000


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None).strftime(SQLITE_TS)
    return value


def copy_rows(
    db: Database, table: str, columns: tuple[str, ...], rows: Iterator[tuple[Any, ...]]
) -> int:
    """Insert ``rows`` (tuples in ``columns`` order) fast; returns how many.

    Runs loaded this way bypass the store, so the agents' queue heads are corrected
    afterwards, as the maintenance loop would do.
    """
    count = _copy(db, table, columns, rows)
    if table == "runs":
        with db.write() as conn:
            reconcile_heads(conn)
    return count


def _copy(
    db: Database, table: str, columns: tuple[str, ...], rows: Iterator[tuple[Any, ...]]
) -> int:
    raw = db.writer.raw_connection()
    count = 0
    try:
        cursor = raw.cursor()
        if db.dialect == "sqlite":
            marks = ", ".join("?" for _ in columns)
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            cursor.execute("BEGIN IMMEDIATE")
            batch: list[tuple[Any, ...]] = []
            for row in rows:
                batch.append(tuple(_sqlite_value(v) for v in row))
                if len(batch) >= BATCH:
                    cursor.executemany(sql, batch)
                    count += len(batch)
                    batch.clear()
            if batch:
                cursor.executemany(sql, batch)
                count += len(batch)
            cursor.execute("COMMIT")
        else:
            # The product's connections carry a 30 s statement timeout; a big COPY needs more.
            cursor.execute("SET LOCAL statement_timeout = 0")
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
            raw.commit()
        return count
    finally:
        raw.close()


def analyze(db: Database) -> None:
    """Refresh the planner's statistics (as autovacuum / ``PRAGMA optimize`` would)."""
    with db.write() as conn:
        conn.exec_driver_sql("ANALYZE")


def seed_office(
    db: Database, agent_count: int, now: datetime
) -> tuple[str, list[str], dict[str, str]]:
    """A workspace (default settings) with ``agent_count`` idle workers, no cooldown yet.

    Returns:
        ``(workspace_id, agent_ids, workflow id by kind)``.
    """
    workspace_id = uuid.uuid4().hex
    flows = {kind: uuid.uuid4().hex for kind in ("office", "routine", "kanban")}
    with db.write() as conn:
        conn.execute(
            sa.insert(workspaces).values(
                id=workspace_id,
                name=f"bench-{workspace_id[:8]}",
                office_workflow_id=flows["office"],
                routine_workflow_id=flows["routine"],
                kanban_workflow_id=flows["kanban"],
                created_at=now,
            )
        )
        conn.execute(
            sa.insert(workflows),
            [
                {
                    "id": fid,
                    "workspace_id": workspace_id,
                    "kind": kind,
                    "name": kind,
                    "created_at": now,
                }
                for kind, fid in flows.items()
            ],
        )
        conn.execute(
            sa.insert(workspace_settings).values(
                workspace_id=workspace_id, coalesce_window_s=5, executors={}, updated_at=now
            )
        )
        agent_ids = [f"agent-{n:05d}-{workspace_id[:6]}" for n in range(agent_count)]
        conn.execute(
            sa.insert(agents),
            [
                {
                    "id": agent_id,
                    "workspace_id": workspace_id,
                    "name": f"a{n}",
                    "role": "worker",
                    "status": "idle",
                    "skip_idle_wakeups": True,
                    "cooldown_s": 10.0,
                    "max_concurrent_sessions": 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, agent_id in enumerate(agent_ids)
            ],
        )
    return workspace_id, agent_ids, flows


def run_row(
    workspace_id: str, agent_id: str, status: str, at: datetime, *, finished: bool = False
) -> tuple[Any, ...]:
    """One ``runs`` row in :data:`RUN_COLUMNS` order."""
    return (
        workspace_id,
        agent_id,
        None,
        "user",
        "event",
        status,
        1,
        1,
        0,
        at,
        at,
        at + timedelta(seconds=30) if finished else None,
    )
