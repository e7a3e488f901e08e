"""The dashboard's aggregate queries on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunReason, RunStatus, TaskState, WorkflowKind
from office_scheduler.store.dashboard import DashboardStore
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import cost_events, runs, wakeup_requests


def _run(
    workspace_id: str, agent_id: str, at: datetime, status: str, reason: str | None
) -> dict[str, Any]:
    return {
        "workspace_id": workspace_id,
        "agent_id": agent_id,
        "source": "user",
        "classification": "event",
        "status": status,
        "reason": reason,
        "requested_at": at,
        "not_before": at,
    }


def test_aggregates(database: Database, now: datetime) -> None:
    store = Store.from_database(database)
    ws = store.office.create_workspace(name="acme", settings=WorkspaceSettings(), now=now)
    alice = store.office.create_agent(
        workspace_id=ws.id, name="alice", role=AgentRole.WORKER, now=now
    )
    bob = store.office.create_agent(workspace_id=ws.id, name="bob", role=AgentRole.WORKER, now=now)
    today = now.replace(hour=0, minute=0)
    rows = [
        _run(ws.id, alice.id, today + timedelta(hours=1), "finished", "completed"),
        _run(ws.id, alice.id, today + timedelta(hours=2), "finished", "blocked"),
        _run(ws.id, alice.id, today - timedelta(hours=1), "failed", "agent_failed"),
        _run(ws.id, bob.id, today - timedelta(days=1, hours=1), "cancelled", "task_terminal"),
        _run(ws.id, bob.id, today + timedelta(hours=3), "queued", None),
        _run(ws.id, bob.id, today + timedelta(hours=3), "scheduled_retry", None),
        _run(ws.id, alice.id, today + timedelta(hours=4), "running", None),
        _run(ws.id, alice.id, today - timedelta(days=20), "finished", "completed"),
    ]
    with database.write() as conn:
        conn.execute(sa.insert(runs), rows)
        conn.execute(
            sa.insert(wakeup_requests),
            [
                {
                    "workspace_id": ws.id,
                    "agent_id": bob.id,
                    "source": source,
                    "classification": "event",
                    "payload": {},
                    "status": "coalesced",
                    "requested_at": now - timedelta(minutes=minutes),
                }
                for source, minutes in (("comment", 5), ("task_assigned", 1))
            ],
        )
        conn.execute(
            sa.insert(cost_events),
            [
                {"workspace_id": ws.id, "agent_id": alice.id, "cost_subcents": 1500, "at": now},
                {"workspace_id": ws.id, "agent_id": alice.id, "cost_subcents": 500, "at": now},
                {
                    "workspace_id": ws.id,
                    "agent_id": alice.id,
                    "cost_subcents": 9,
                    "at": now - timedelta(days=40),
                },
            ],
        )
    dash = DashboardStore(database)

    days = dash.runs_per_day(ws.id, first_day=today - timedelta(days=13), days=14)
    assert [d.day for d in days][-1] == today
    assert days[-1].counts == {"completed": 1, "skipped": 1, "failed": 0, "cancelled": 0, "open": 3}
    assert days[-2].counts == {"completed": 0, "skipped": 0, "failed": 1, "cancelled": 0, "open": 0}
    assert days[-3].counts["cancelled"] == 1
    assert sum(d.total for d in days) == 7

    loads = dash.agent_loads(ws.id, [alice.id, bob.id], spent_since=now - timedelta(days=1))
    current = loads[alice.id].current
    assert current is not None
    assert current.status is RunStatus.RUNNING
    assert (loads[alice.id].waiting, loads[bob.id].waiting) == (0, 2)
    assert loads[alice.id].spent_subcents == 2000
    last_wake = loads[bob.id].last_wake
    assert last_wake is not None
    assert last_wake.source.value == "task_assigned"
    assert loads[alice.id].last_wake is None

    page = dash.search_runs(ws.id, agent_id=alice.id, limit=2)
    assert len(page.items) == 2
    assert page.next_cursor is not None
    rest = dash.search_runs(ws.id, agent_id=alice.id, limit=10, cursor=page.next_cursor)
    assert len(page.items) + len(rest.items) == 5
    blocked = dash.search_runs(ws.id, reason=RunReason.BLOCKED)
    assert [r.reason for r in blocked.items] == [RunReason.BLOCKED]
    recent = dash.search_runs(ws.id, since=today, until=today + timedelta(hours=3))
    assert len(recent.items) == 2

    stamp = dash.change_stamp()
    queued_id = next(r.id for r in dash.search_runs(ws.id, status=RunStatus.QUEUED).items)
    cancelled = store.queue.cancel_queued(queued_id, reason=RunReason.CANCELLED_BY_USER, now=now)
    assert cancelled is not None
    assert cancelled.status is RunStatus.CANCELLED
    assert store.queue.cancel_queued(queued_id, reason=RunReason.CANCELLED_BY_USER, now=now) is None
    store.runlog.add_run_event(queued_id, kind="run_cancelled", now=now)
    assert dash.change_stamp() != stamp

    for title in ("one", "two"):
        store.office.create_task(workspace_id=ws.id, title=title, now=now)
    store.office.create_task(workspace_id=ws.id, title="shipped", now=now, state=TaskState.DONE)
    store.office.create_task(
        workspace_id=ws.id, title="kanban", now=now, workflow=WorkflowKind.KANBAN
    )
    board = {column.state: column for column in dash.board(ws.id, per_column=1)}
    assert list(board) == list(TaskState)
    assert (board[TaskState.TODO].total, len(board[TaskState.TODO].tasks)) == (2, 1)
    assert [t.title for t in board[TaskState.DONE].tasks] == ["shipped"]
    assert board[TaskState.IN_REVIEW].total == 0
