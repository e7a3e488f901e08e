"""``Database.transaction`` and ``snapshot`` on both databases, and the run start that uses them."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.status import RunReason, RunStatus
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
