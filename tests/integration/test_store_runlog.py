"""Contract tests of RunLogStore: run events, sessions, activity, inbox (both databases)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.models import ActivityEntry, WorkspaceSettings
from office_scheduler.domain.status import (
    AgentRole,
    Classification,
    InboxKind,
    InboxStatus,
    RunStatus,
    WakeSource,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.office import OfficeStore
from office_scheduler.store.runlog import RunLogStore
from office_scheduler.store.schema import runs


@dataclass(frozen=True, kw_only=True)
class Setup:
    workspace_id: str
    agent_id: str
    task_id: str
    run_id: int


def _insert_run(database: Database, workspace_id: str, agent_id: str, now: datetime) -> int:
    """A bare queued run (the queue store's own tests cover how runs are really made)."""
    with database.write() as conn:
        result = conn.execute(
            sa.insert(runs)
            .values(
                workspace_id=workspace_id,
                agent_id=agent_id,
                source=WakeSource.USER.value,
                classification=Classification.EVENT.value,
                status=RunStatus.QUEUED.value,
                requested_at=now,
                not_before=now,
            )
            .returning(runs.c.id)
        )
        run_id: int = result.scalar_one()
        return run_id


@pytest.fixture
def setup(office_store: OfficeStore, database: Database, now: datetime) -> Setup:
    ws = office_store.create_workspace(name="acme", settings=WorkspaceSettings(), now=now)
    agent = office_store.create_agent(
        workspace_id=ws.id, name="dev", role=AgentRole.WORKER, now=now
    )
    task = office_store.create_task(workspace_id=ws.id, title="t", now=now)
    run_id = _insert_run(database, ws.id, agent.id, now)
    return Setup(workspace_id=ws.id, agent_id=agent.id, task_id=task.id, run_id=run_id)


def test_run_events(runlog_store: RunLogStore, setup: Setup, now: datetime) -> None:
    runlog_store.add_run_event(setup.run_id, kind="claimed", now=now)
    runlog_store.add_run_events(
        [
            (setup.run_id, "output", f"line {i}", {"n": i}, now + timedelta(seconds=i))
            for i in range(5)
        ]
    )
    runlog_store.add_run_events([])
    events = runlog_store.list_run_events(setup.run_id)
    assert [e.kind for e in events] == ["claimed"] + ["output"] * 5
    assert events[0].message == ""
    assert events[0].data == {}
    assert events[3].message == "line 2"
    assert events[3].data == {"n": 2}
    assert events[3].at == now + timedelta(seconds=2)
    assert events == sorted(events, key=lambda e: e.id)

    tail = runlog_store.list_run_events(setup.run_id, after_id=events[2].id, limit=2)
    assert tail == events[3:5]
    assert runlog_store.list_run_events(setup.run_id + 1000) == []
    with pytest.raises(InvalidInputError) as bad_limit:
        runlog_store.list_run_events(setup.run_id, limit=0)
    assert bad_limit.value.field == "limit"


def test_run_events_for_unknown_run_store_nothing(
    runlog_store: RunLogStore, setup: Setup, now: datetime
) -> None:
    with pytest.raises(NotFoundError) as err:
        runlog_store.add_run_event(setup.run_id + 1000, kind="x", now=now)
    assert err.value.field == "run_id"
    with pytest.raises(NotFoundError):
        runlog_store.add_run_events(
            [(setup.run_id, "ok", "", {}, now), (setup.run_id + 1000, "bad", "", {}, now)]
        )
    assert runlog_store.list_run_events(setup.run_id) == []  # one transaction: all or nothing


def test_sessions(
    runlog_store: RunLogStore, database: Database, setup: Setup, now: datetime
) -> None:
    assert runlog_store.latest_resumable_session(setup.task_id, setup.agent_id) is None
    first = runlog_store.create_session(
        run_id=setup.run_id,
        agent_id=setup.agent_id,
        task_id=setup.task_id,
        executor="claude",
        cwd="/srv",
        resumed_from=None,
        now=now,
    )
    assert first.external_session_id is None
    assert first.cwd == "/srv"
    assert first.created_at == now
    assert runlog_store.latest_resumable_session(setup.task_id, setup.agent_id) is None
    runlog_store.set_external_session_id(first.id, "ext-1")
    found = runlog_store.latest_resumable_session(setup.task_id, setup.agent_id)
    assert found is not None
    assert found.id == first.id
    assert found.external_session_id == "ext-1"

    second_run = _insert_run(database, setup.workspace_id, setup.agent_id, now)
    second = runlog_store.create_session(
        run_id=second_run,
        agent_id=setup.agent_id,
        task_id=setup.task_id,
        executor="claude",
        cwd=None,
        resumed_from=first.id,
        now=now + timedelta(minutes=1),
    )
    assert second.resumed_from == first.id
    latest = runlog_store.latest_resumable_session(setup.task_id, setup.agent_id)
    assert latest is not None
    assert latest.id == first.id  # the newer one has no external id yet
    runlog_store.set_external_session_id(second.id, "ext-2")
    latest = runlog_store.latest_resumable_session(setup.task_id, setup.agent_id)
    assert latest is not None
    assert latest.id == second.id
    taskless = runlog_store.create_session(
        run_id=second_run,
        agent_id=setup.agent_id,
        task_id=None,
        executor="claude",
        cwd=None,
        resumed_from=None,
        now=now,
    )
    assert taskless.task_id is None

    with pytest.raises(NotFoundError) as no_session:
        runlog_store.set_external_session_id("missing", "x")
    assert no_session.value.field == "session_id"
    with pytest.raises(NotFoundError) as no_agent:
        runlog_store.create_session(
            run_id=setup.run_id,
            agent_id="missing",
            task_id=None,
            executor="claude",
            cwd=None,
            resumed_from=None,
            now=now,
        )
    assert no_agent.value.field == "agent_id"


def test_activity_newest_first_with_cursor(
    runlog_store: RunLogStore, setup: Setup, now: datetime
) -> None:
    added = [
        runlog_store.add_activity(
            workspace_id=setup.workspace_id,
            kind="wakeup_idle_skipped" if i % 2 else "task_created",
            message=f"m{i}",
            now=now + timedelta(seconds=i // 2),
            agent_id=setup.agent_id,
            task_id=setup.task_id,
            run_id=setup.run_id,
            data={"i": i},
        )
        for i in range(5)
    ]
    assert added[0].data == {"i": 0}
    assert added[0].run_id == setup.run_id
    assert added[0].at == now
    expected = sorted(added, key=lambda e: (e.at, e.id), reverse=True)
    seen: list[ActivityEntry] = []
    cursor: str | None = None
    while True:
        page = runlog_store.list_activity(setup.workspace_id, limit=2, cursor=cursor)
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == expected
    skipped = runlog_store.list_activity(setup.workspace_id, kind="wakeup_idle_skipped").items
    assert [e.message for e in skipped] == ["m3", "m1"]

    with pytest.raises(InvalidInputError) as bad_cursor:
        runlog_store.list_activity(setup.workspace_id, cursor="%%%")
    assert bad_cursor.value.field == "cursor"
    with pytest.raises(NotFoundError) as no_ws:
        runlog_store.add_activity(workspace_id="missing", kind="x", message="", now=now)
    assert no_ws.value.field == "workspace_id"


def test_inbox(runlog_store: RunLogStore, setup: Setup, now: datetime) -> None:
    first = runlog_store.add_inbox_item(
        workspace_id=setup.workspace_id,
        kind=InboxKind.AGENT_ERROR,
        title="dev failed 4 times",
        body="rate limited",
        data={"run_id": setup.run_id},
        now=now,
    )
    second = runlog_store.add_inbox_item(
        workspace_id=setup.workspace_id,
        kind=InboxKind.EXECUTOR_MISSING,
        title="no executor",
        now=now + timedelta(seconds=1),
    )
    assert first.status is InboxStatus.OPEN
    assert first.data == {"run_id": setup.run_id}
    assert second.body == ""
    assert runlog_store.list_inbox(setup.workspace_id) == [second, first]

    resolved = runlog_store.resolve_inbox_item(first.id, now=now + timedelta(minutes=1))
    assert resolved.status is InboxStatus.RESOLVED
    assert runlog_store.resolve_inbox_item(first.id, now=now) == resolved  # idempotent
    assert runlog_store.list_inbox(setup.workspace_id, status=InboxStatus.OPEN) == [second]
    assert runlog_store.list_inbox(setup.workspace_id, status=InboxStatus.RESOLVED) == [resolved]

    with pytest.raises(NotFoundError) as no_item:
        runlog_store.resolve_inbox_item(first.id + 1000, now=now)
    assert no_item.value.field == "item_id"
    with pytest.raises(InvalidInputError) as blank:
        runlog_store.add_inbox_item(
            workspace_id=setup.workspace_id, kind=InboxKind.AGENT_ERROR, title="", now=now
        )
    assert blank.value.field == "title"
    with pytest.raises(NotFoundError) as no_ws:
        runlog_store.add_inbox_item(
            workspace_id="missing", kind=InboxKind.AGENT_ERROR, title="x", now=now
        )
    assert no_ws.value.field == "workspace_id"
