"""A run's merged wakes are the wakeup requests that point at it, not a JSON document

Revision ID: 0009
Revises: 0013
Create Date: 2026-12-03 19:30:00

``runs.context_snapshot`` held every wake merged into a run and was rewritten whole by each
merge (O(N) per wake for a run with N wakes). The wakeup requests already carry the run
they created or joined (``run_id``), so the snapshot is dropped and read from them.

Upgrade, without loss: every snapshot entry whose wakeup request is missing is inserted
back (status ``coalesced``, with the entry's source, payload and instant), and one whose
request points at no run is pointed at the run. An entry whose request points at another
run is the one a run handed over when it ended before launch (the request moved with it)
and is left there. The index on ``wakeup_requests.run_id`` gains ``id`` (a run's wakes,
newest first). Workspaces get ``prompt_max_wakes`` and ``prompt_max_wake_bytes``.

Downgrade: each run's snapshot is rebuilt from the requests pointing at it, oldest first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0009"
down_revision = "0013"
branch_labels = None
depends_on = None

_CHUNK = 1000

_runs = sa.table(
    "runs",
    sa.column("id", sa.BigInteger()),
    sa.column("workspace_id", sa.String()),
    sa.column("agent_id", sa.String()),
    sa.column("task_id", sa.String()),
    sa.column("classification", sa.String()),
    sa.column("context_snapshot", types.json_type()),
)
_wakeups = sa.table(
    "wakeup_requests",
    sa.column("id", sa.BigInteger()),
    sa.column("workspace_id", sa.String()),
    sa.column("agent_id", sa.String()),
    sa.column("task_id", sa.String()),
    sa.column("source", sa.String()),
    sa.column("classification", sa.String()),
    sa.column("payload", types.json_type()),
    sa.column("status", sa.String()),
    sa.column("run_id", sa.BigInteger()),
    sa.column("requested_at", types.UTCDateTime()),
)


def _chunks(bind: sa.Connection, query: sa.Select[Any]) -> Iterator[Sequence[Any]]:
    """Rows of ``query`` (ordered by its first column, an id) in chunks, by keyset."""
    after: int | None = None
    key = query.selected_columns[0]
    while True:
        page = query if after is None else query.where(key > after)
        rows = bind.execute(page.order_by(key).limit(_CHUNK)).all()
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _move_snapshots(bind: sa.Connection) -> None:
    query = sa.select(
        _runs.c.id,
        _runs.c.workspace_id,
        _runs.c.agent_id,
        _runs.c.task_id,
        _runs.c.classification,
        _runs.c.context_snapshot,
    )
    inserted = False
    for rows in _chunks(bind, query):
        entries = [(run, entry) for run in rows for entry in run.context_snapshot or ()]
        ids = sorted({int(entry["request_id"]) for _run, entry in entries})
        known: dict[int, int | None] = {}
        for start in range(0, len(ids), _CHUNK):
            found = bind.execute(
                sa.select(_wakeups.c.id, _wakeups.c.run_id).where(
                    _wakeups.c.id.in_(ids[start : start + _CHUNK])
                )
            )
            known.update({row.id: row.run_id for row in found})
        missing: dict[int, dict[str, Any]] = {}
        unlinked: dict[int, int] = {}
        for run, entry in entries:
            request_id = int(entry["request_id"])
            if request_id not in known and request_id not in missing:
                missing[request_id] = {
                    "id": request_id,
                    "workspace_id": run.workspace_id,
                    "agent_id": run.agent_id,
                    "task_id": run.task_id,
                    "source": entry["source"],
                    "classification": run.classification,
                    "payload": dict(entry.get("payload") or {}),
                    "status": "coalesced",
                    "run_id": run.id,
                    "requested_at": _instant(entry["requested_at"]),
                }
            elif request_id in known and known[request_id] is None:
                unlinked[request_id] = run.id
                known[request_id] = run.id
        if missing:
            bind.execute(sa.insert(_wakeups), list(missing.values()))
            inserted = True
        if unlinked:
            bind.execute(
                sa.update(_wakeups)
                .where(_wakeups.c.id == sa.bindparam("request_id"))
                .values(run_id=sa.bindparam("linked_run")),
                [{"request_id": key, "linked_run": value} for key, value in unlinked.items()],
            )
    if inserted and bind.dialect.name == "postgresql":
        # Requests inserted with their own ids: the sequence must not hand those out again.
        bind.execute(
            sa.text(
                "SELECT setval(pg_get_serial_sequence('wakeup_requests', 'id'), "
                "(SELECT max(id) FROM wakeup_requests))"
            )
        )


def upgrade() -> None:
    # Plain ALTER statements, no batch table rebuild: SQLite has dropped columns in place
    # since 3.35, and a rebuild of ``runs`` would copy every run.
    _move_snapshots(op.get_bind())
    op.drop_column("runs", "context_snapshot")
    op.drop_index("ix_wakeup_requests_run", table_name="wakeup_requests")
    op.create_index("ix_wakeup_requests_run_id_id", "wakeup_requests", ["run_id", "id"])
    op.add_column(
        "workspace_settings",
        sa.Column("prompt_max_wakes", sa.Integer(), nullable=False, server_default="20"),
    )
    op.add_column(
        "workspace_settings",
        sa.Column("prompt_max_wake_bytes", sa.Integer(), nullable=False, server_default="12000"),
    )


def _rebuild_snapshots(bind: sa.Connection) -> None:
    query = sa.select(
        _wakeups.c.id,
        _wakeups.c.run_id,
        _wakeups.c.source,
        _wakeups.c.payload,
        _wakeups.c.requested_at,
    ).where(_wakeups.c.run_id.is_not(None))
    snapshots: dict[int, list[dict[str, Any]]] = {}
    for rows in _chunks(bind, query):
        for row in rows:
            snapshots.setdefault(row.run_id, []).append(
                {
                    "request_id": row.id,
                    "source": row.source,
                    "payload": row.payload or {},
                    "requested_at": row.requested_at.isoformat(),
                }
            )
    values = [{"run": run_id, "snapshot": entries} for run_id, entries in snapshots.items()]
    for start in range(0, len(values), _CHUNK):
        bind.execute(
            sa.update(_runs)
            .where(_runs.c.id == sa.bindparam("run"))
            .values(context_snapshot=sa.bindparam("snapshot", type_=types.json_type())),
            values[start : start + _CHUNK],
        )


def downgrade() -> None:
    bind = op.get_bind()
    op.drop_column("workspace_settings", "prompt_max_wake_bytes")
    op.drop_column("workspace_settings", "prompt_max_wakes")
    op.drop_index("ix_wakeup_requests_run_id_id", table_name="wakeup_requests")
    op.create_index("ix_wakeup_requests_run", "wakeup_requests", ["run_id"])
    # SQLite adds a NOT NULL column only with a default; it keeps it (harmless there).
    op.add_column(
        "runs",
        sa.Column("context_snapshot", types.json_type(), nullable=False, server_default="[]"),
    )
    _rebuild_snapshots(bind)
    if bind.dialect.name == "postgresql":
        op.alter_column("runs", "context_snapshot", server_default=None)
