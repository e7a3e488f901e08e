"""Migration 0009 moves ``runs.context_snapshot`` to wakeup-request rows and back, losslessly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.models import WakeRequest, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, WakeSource
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store import migrate
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.store.types import UTCDateTime, json_type

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

_runs = sa.table(
    "runs",
    sa.column("id", sa.BigInteger()),
    sa.column("workspace_id", sa.String()),
    sa.column("agent_id", sa.String()),
    sa.column("source", sa.String()),
    sa.column("classification", sa.String()),
    sa.column("status", sa.String()),
    sa.column("context_snapshot", json_type()),
    sa.column("context_version", sa.Integer()),
    sa.column("coalesced_count", sa.Integer()),
    sa.column("requested_at", UTCDateTime()),
    sa.column("not_before", UTCDateTime()),
)
_wakeups = sa.table(
    "wakeup_requests",
    sa.column("id", sa.BigInteger()),
    sa.column("workspace_id", sa.String()),
    sa.column("agent_id", sa.String()),
    sa.column("source", sa.String()),
    sa.column("classification", sa.String()),
    sa.column("payload", json_type()),
    sa.column("status", sa.String()),
    sa.column("run_id", sa.BigInteger()),
    sa.column("requested_at", UTCDateTime()),
)


def _entry(request_id: int, source: str, minute: int) -> dict[str, Any]:
    at = T0.replace(minute=minute)
    return {
        "request_id": request_id,
        "source": source,
        "payload": {"n": request_id},
        "requested_at": at.isoformat(),
    }


def _wakeup(
    ids: tuple[str, str], request_id: int, source: str, run_id: int | None
) -> dict[str, Any]:
    workspace_id, agent_id = ids
    return {
        "id": request_id,
        "workspace_id": workspace_id,
        "agent_id": agent_id,
        "source": source,
        "classification": "event",
        "payload": {"n": request_id},
        "status": "coalesced" if run_id else "queued",
        "run_id": run_id,
        "requested_at": T0.replace(minute=request_id),
    }


def test_snapshots_become_rows_and_come_back(database: Database) -> None:
    store = Store.from_database(database)
    space = store.office.create_workspace(name="acme", settings=WorkspaceSettings(), now=T0)
    agent = store.office.create_agent(
        workspace_id=space.id, name="ann", role=AgentRole.WORKER, now=T0
    )
    ids = (space.id, agent.id)
    migrate.downgrade(database, "0006")
    run = {
        "workspace_id": space.id,
        "agent_id": agent.id,
        "classification": "event",
        "status": "finished",
        "requested_at": T0,
        "not_before": T0,
    }
    with database.writer.begin() as conn:
        # Run 1 carries wakes 1 (linked), 2 (its request lost its run) and 3 (no request
        # at all); it handed wake 4 over to run 2, whose snapshot has it too.
        conn.execute(
            sa.insert(_runs),
            [
                {
                    **run,
                    "id": 1,
                    "source": "user",
                    "context_snapshot": [
                        _entry(1, "user", 1),
                        _entry(2, "comment", 2),
                        _entry(3, "agent_error", 3),
                        _entry(4, "self", 4),
                    ],
                    "context_version": 4,
                    "coalesced_count": 4,
                },
                {
                    **run,
                    "id": 2,
                    "source": "self",
                    "status": "queued",
                    "context_snapshot": [_entry(4, "self", 4)],
                    "context_version": 1,
                    "coalesced_count": 1,
                },
            ],
        )
        conn.execute(
            sa.insert(_wakeups),
            [
                _wakeup(ids, 1, "user", 1),
                _wakeup(ids, 2, "comment", None),
                _wakeup(ids, 4, "self", 2),
            ],
        )

    migrate.upgrade(database)
    first = store.queue.run_wakes(1, newest=10)
    assert [(e.request_id, e.source, e.payload) for e in first.entries] == [
        (1, WakeSource.USER, {"n": 1}),
        (2, WakeSource.COMMENT, {"n": 2}),
        (3, WakeSource.AGENT_ERROR, {"n": 3}),
    ]
    assert first.entries[2].requested_at == T0.replace(minute=3)
    assert first.decisions == frozenset({3})
    assert [e.request_id for e in store.queue.run_wakes(2, newest=10).entries] == [4]
    assert store.queue.get_wakeup(3).run_id == 1
    # Requests inserted with their own ids: the next wake still gets a fresh id.
    fresh = store.queue.enqueue(
        WakeRequest(workspace_id=space.id, agent_id=agent.id, source=WakeSource.USER),
        now=T0,
        hold=timedelta(0),
        decide=decide_merge,
    )
    assert fresh.request.id == 5
    with database.writer.begin() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
    assert "context_snapshot" not in columns

    migrate.downgrade(database, "0006")
    with database.writer.begin() as conn:
        found = conn.execute(
            sa.select(_runs.c.id, _runs.c.context_snapshot).order_by(_runs.c.id)
        ).all()
    assert [(run_id, [e["request_id"] for e in snapshot]) for run_id, snapshot in found] == [
        (1, [1, 2, 3]),
        (2, [4, 5]),
    ]
    assert found[0][1][2] == _entry(3, "agent_error", 3)
    migrate.upgrade(database)
    assert store.queue.run_wakes(1, newest=10).total == 3
