"""``Database.transaction`` and ``snapshot`` on both databases, and the run start that uses them."""

from __future__ import annotations

import asyncio
import collections
import sqlite3
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.routines import RoutineRunStatus
from office_scheduler.domain.status import RunReason, RunStatus, WakeSource
from office_scheduler.pipeline.context import RunContext
from office_scheduler.store import engine, migrate
from office_scheduler.store.engine import Database
from office_scheduler.store.office import OfficeStore
from office_scheduler.store.schema import sessions


def _names(store: OfficeStore) -> set[str]:
    return {w.name for w in store.list_workspaces()}


def _create(store: OfficeStore, name: str, now: datetime) -> None:
    store.create_workspace(name=name, settings=WorkspaceSettings(), now=now)


def test_store_calls_in_a_transaction_commit_together(
    database: Database, office_store: OfficeStore, now: datetime
) -> None:
    with database.transaction():
        _create(office_store, "one", now)
        with database.transaction():  # nested: joins the outer one
            _create(office_store, "two", now)
        assert _names(office_store) == {"one", "two"}  # reads see the block's writes
    assert _names(office_store) == {"one", "two"}


def test_an_exception_rolls_back_every_call_of_the_transaction(
    database: Database, office_store: OfficeStore, now: datetime
) -> None:
    def change_mind() -> None:
        with database.transaction():
            _create(office_store, "one", now)
            _create(office_store, "two", now)
            raise RuntimeError("second thoughts")

    with pytest.raises(RuntimeError, match="second thoughts"):
        change_mind()
    assert _names(office_store) == set()
    _create(office_store, "three", now)  # the pin is gone: calls commit on their own again
    assert _names(office_store) == {"three"}


def test_a_transaction_is_pinned_to_its_own_thread(
    database: Database, office_store: OfficeStore, now: datetime
) -> None:
    """Another thread's calls inside the block use their own connections."""
    seen: list[set[str]] = []

    def elsewhere() -> None:
        seen.append(_names(office_store))
        if database.dialect == "postgresql":  # SQLite's one writer would wait for us
            _create(office_store, "theirs", now)

    def roll_back_mine() -> None:
        with database.transaction():
            _create(office_store, "mine", now)
            other = threading.Thread(target=elsewhere)
            other.start()
            other.join(timeout=30)
            raise RuntimeError("roll mine back")

    with pytest.raises(RuntimeError, match="roll mine back"):
        roll_back_mine()
    assert seen == [set()]  # our uncommitted row was not visible to the other thread
    expected = {"theirs"} if database.dialect == "postgresql" else set()
    assert _names(office_store) == expected  # theirs committed alone, mine rolled back


def test_a_snapshot_reads_through_one_connection(
    database: Database, office_store: OfficeStore, now: datetime
) -> None:
    _create(office_store, "one", now)
    checkouts: list[object] = []

    def count(*_args: object) -> None:
        checkouts.append(_args[0])

    sa.event.listen(database.reader.pool, "checkout", count)
    try:
        with database.snapshot():
            for _ in range(3):
                assert _names(office_store) == {"one"}
            assert len(checkouts) == 1
            _create(office_store, "two", now)  # a write inside is its own transaction
        with database.snapshot():
            assert "two" in _names(office_store)
    finally:
        sa.event.remove(database.reader.pool, "checkout", count)
    assert _names(office_store) == {"one", "two"}


async def test_a_start_that_fails_halfway_leaves_no_session_and_no_running_state(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session row, ``running`` and the run token are written in one transaction."""

    def broken_mint(**_kwargs: object) -> str:
        raise RuntimeError("token store unavailable")

    result = await office.service.wake(office.worker.id)
    assert result.run is not None
    monkeypatch.setattr(office.service.tokens, "mint_run", broken_mint)
    await office.service.run_until_idle()

    run = office.store.queue.get_run(result.run.id)
    assert (run.status, run.reason) == (RunStatus.FAILED, RunReason.INTERNAL_ERROR)
    assert run.started_at is None
    assert run.session_id is None
    with office.store.db.read() as conn:
        rows = conn.execute(sa.select(sessions.c.id).where(sessions.c.run_id == run.id)).all()
    assert rows == []
    assert office.executor.launches == []


def _kinds(office: Office, run_id: int) -> dict[str, int]:
    return dict(collections.Counter(e.kind for e in office.store.runlog.list_run_events(run_id)))


@pytest.mark.timeout(60)
async def test_a_cancel_during_the_start_transaction_writes_each_decision_once(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancelled pipeline's thread still commits the start; its end must not write the
    decisions that commit already carried (they are handed over on the event loop)."""
    entered, release = threading.Event(), threading.Event()
    real_mint = office.service.tokens.mint_run

    def slow_mint(**kwargs: object) -> str:  # inside the start transaction, after the CAS
        entered.set()
        release.wait(20)
        return real_mint(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(office.service.tokens, "mint_run", slow_mint)
    result = await office.service.wake(office.worker.id)
    assert result.run is not None
    await office.service.runs.claim_once()
    assert await asyncio.to_thread(entered.wait, 20)
    cancel = asyncio.create_task(office.service.runs.cancel(result.run.id))
    await asyncio.sleep(0.3)  # the cancel reaches the pipeline while the thread is held
    release.set()
    await cancel
    assert office.store.queue.get_run(result.run.id).status is RunStatus.CANCELLED
    assert office.executor.launches == []
    kinds = _kinds(office, result.run.id)
    assert kinds["executor_resolved"] == kinds["launched"] == kinds["run_cancelled"] == 1, kinds


def _lose_the_next_commit_acknowledgement(office: Office, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next commit reaches the database, then the client sees a lost connection."""
    db = office.store.db
    dialect = db.writer.dialect
    real_commit = dialect.do_commit
    armed = [True]

    def do_commit(dbapi_connection: Any) -> None:
        real_commit(dbapi_connection)
        if armed.pop() if armed else False:
            if db.dialect == "sqlite":
                raise sqlite3.OperationalError("disk I/O error")
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dialect, "do_commit", do_commit)


async def _claimed_context(office: Office) -> RunContext:
    result = await office.service.wake(office.worker.id)
    assert result.run is not None
    settings = office.service._deps.settings
    [run] = office.store.queue.claim(
        now=office.clock.now(), node_id=settings.node_id, lease=settings.lease, limit=1
    )
    ctx = RunContext(run=run, deps=office.service._deps)
    await ctx.event("decided", "a guard decision")
    return ctx


async def test_an_end_retried_after_a_lost_commit_acknowledgement_is_not_repeated(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry finds the run ended by its own first attempt: nothing is written twice,
    and the end still counts as this pipeline's (logged and published)."""
    ctx = await _claimed_context(office)
    _lose_the_next_commit_acknowledgement(office, monkeypatch)
    await ctx.end(RunStatus.CANCELLED, RunReason.CANCELLED_BY_USER, error="stop")
    assert office.store.queue.get_run(ctx.run.id).status is RunStatus.CANCELLED
    assert ctx.ended is not None
    assert ctx.ended.status is RunStatus.CANCELLED
    assert ctx.pending_events == []
    kinds = _kinds(office, ctx.run.id)
    assert kinds["decided"] == kinds["run_cancelled"] == 1, kinds


async def test_a_park_retried_after_a_lost_commit_acknowledgement_is_not_repeated(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = await _claimed_context(office)
    _lose_the_next_commit_acknowledgement(office, monkeypatch)
    retry_at = office.clock.now() + timedelta(minutes=5)
    parked = await ctx.schedule_retry(retry_at, RunReason.AGENT_FAILED, error="boom")
    assert parked is not None
    assert parked.status is RunStatus.SCHEDULED_RETRY
    assert office.store.queue.get_run(ctx.run.id).status is RunStatus.SCHEDULED_RETRY
    assert ctx.pending_events == []
    assert _kinds(office, ctx.run.id)["decided"] == 1


async def test_decisions_of_an_end_that_did_not_apply_stay_buffered(office: Office) -> None:
    """Another writer ended the run first: the decisions wait for the pipeline's last flush."""
    ctx = await _claimed_context(office)
    await asyncio.to_thread(
        office.store.queue.finish_run,
        ctx.run.id,
        status=RunStatus.CANCELLED,
        reason=RunReason.CANCELLED_BY_USER,
        now=office.clock.now(),
    )
    await ctx.end(RunStatus.FINISHED, RunReason.COMPLETED)
    assert ctx.ended is None
    assert [kind for _, kind, *_ in ctx.pending_events] == ["decided"]
    await ctx.flush_events()
    assert _kinds(office, ctx.run.id).get("decided") == 1


async def test_a_routine_dispatch_retried_after_a_lost_commit_acknowledgement_still_wakes(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (break-it): the retry of a heavy routine's dispatch found its own first
    attempt's task already created and announced nothing, so the task's assignee was never
    woken. The retry now announces the task it finds; the wake is keyed, so it comes once."""
    routine = await office.service.routines.create_routine(
        office.workspace.id,
        {
            "name": "Report",
            "assignee_agent_id": office.worker.id,
            "task_template": {"title": "Write the report"},
        },
    )
    received = office.received_manual_run(routine)
    _lose_the_next_commit_acknowledgement(office, monkeypatch)
    dispatched = await office.service.routines.dispatch(received)
    assert dispatched.status is RoutineRunStatus.TASK_CREATED
    tasks = office.store.office.list_tasks(office.workspace.id, limit=10).items
    assert [task.id for task in tasks] == [dispatched.linked_task_id]
    wakeups = office.store.listing.list_wakeups(limit=50).items
    assert [(w.agent_id, w.source, w.task_id) for w in wakeups] == [
        (office.worker.id, WakeSource.TASK_ASSIGNED, dispatched.linked_task_id)
    ]


def _no_busy_timeout(db: Database) -> None:
    """Give ``db``'s writer connections no busy timeout: a locked database fails at once."""

    def zero(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout=0")

    sa.event.listen(db.writer, "connect", zero)


def test_sqlite_writers_of_one_process_queue_on_a_lock_not_on_the_busy_handler(
    tmp_path: Path, now: datetime
) -> None:
    """Threads of one process take turns at SQLite's single write lock in Python.

    With no busy timeout at all, a thread that met another's open write transaction at
    ``BEGIN IMMEDIATE`` would fail at once ("database is locked"); SQLite's busy handler
    otherwise sleeps in steps of up to 100 ms. Every one of these writes must go through.
    """
    db = engine.open_database(f"sqlite:///{tmp_path}/office.db")
    migrate.upgrade(db)
    db.dispose()
    _no_busy_timeout(db)
    store = OfficeStore(db)
    errors: list[Exception] = []
    start = threading.Barrier(4)

    def write(n: int) -> None:
        start.wait()
        for i in range(25):
            try:
                _create(store, f"w{n}-{i}", now)
            except Exception as exc:  # collected for the assertion
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    written = _names(store)
    db.dispose()
    assert errors == []
    assert len(written) == 100


def test_a_writer_waits_for_the_lock_no_longer_than_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, now: datetime
) -> None:
    """A thread stuck behind another's write transaction gets SQLite's own error in time."""
    monkeypatch.setattr(engine, "SQLITE_BUSY_TIMEOUT_MS", 200)
    db = engine.open_database(f"sqlite:///{tmp_path}/office.db")
    migrate.upgrade(db)
    store = OfficeStore(db)
    inside = threading.Event()
    failures: list[BaseException] = []

    def write_meanwhile() -> None:
        inside.wait(timeout=30)
        try:
            _create(store, "theirs", now)
        except sa.exc.OperationalError as exc:
            failures.append(exc)

    other = threading.Thread(target=write_meanwhile)
    other.start()
    with db.transaction():
        _create(store, "mine", now)
        inside.set()
        other.join(timeout=30)
    written = _names(store)
    db.dispose()
    assert [str(exc.orig) for exc in failures] == ["database is locked"]  # type: ignore[attr-defined]
    assert engine.is_connection_lost(failures[0])
    assert written == {"mine"}


def test_the_sqlite_writer_lock_is_held_for_the_whole_transaction(tmp_path: Path) -> None:
    db = engine.open_database(f"sqlite:///{tmp_path}/office.db")
    migrate.upgrade(db)
    held: list[bool] = []
    lock = db.writer_lock
    assert lock is not None

    def try_lock() -> None:
        acquired = lock.acquire(blocking=False)
        held.append(not acquired)
        if acquired:
            lock.release()

    with db.transaction():
        other = threading.Thread(target=try_lock)
        other.start()
        other.join(timeout=30)
    try_lock()
    db.dispose()
    assert held == [True, False]
