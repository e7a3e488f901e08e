"""The maintenance leader's lease with a FakeClock, on both databases.

Renewal, expiry, take-over with the next epoch, the holder stopping before its lease ends,
and the epoch fence refusing a stale leader's maintenance writes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from helpers import Office
from office_scheduler.config import Settings
from office_scheduler.domain.status import RunStatus
from office_scheduler.scheduler.maintenance import MaintenanceLoop
from office_scheduler.store.engine import Database
from office_scheduler.store.leader_lease import LeaderFenced, LeaseStore, check_term
from office_scheduler.store.leadership import Leadership
from office_scheduler.testing import FakeClock

TTL = timedelta(seconds=30)


def _node(db: Database, clock: FakeClock, name: str) -> Leadership:
    return Leadership(db, node_id=name, clock=clock, ttl=TTL, use_lease=True)


def test_the_first_node_takes_the_lease_and_renews_it(database: Database) -> None:
    clock = FakeClock()
    first, second = _node(database, clock, "a"), _node(database, clock, "b")
    assert first.ensure()
    assert not second.ensure(), "a held lease is not taken"
    lease = LeaseStore(database).current()
    assert lease is not None
    assert (lease.holder, lease.epoch, lease.expires_at) == ("a", 1, clock.now() + TTL)
    clock.advance(TTL / 3)
    assert first.ensure()
    renewed = LeaseStore(database).current()
    assert renewed is not None
    assert (renewed.holder, renewed.epoch) == ("a", 1), "a renewal keeps the epoch"
    assert renewed.expires_at == clock.now() + TTL
    assert second.status() == {
        "node_id": "a",
        "epoch": 1,
        "expires_at": (clock.now() - TTL / 3 + TTL).isoformat().replace("+00:00", "Z"),
        "this_node": False,
    }
    assert first.status()["this_node"] is True


def test_an_expired_lease_is_taken_over_with_the_next_epoch(database: Database) -> None:
    clock = FakeClock()
    first, second = _node(database, clock, "a"), _node(database, clock, "b")
    assert first.ensure()
    clock.advance(TTL - timedelta(seconds=1))
    assert not second.ensure(), "not expired yet"
    clock.advance(timedelta(seconds=1))
    with capture_logs() as logs:
        assert second.ensure()
        term = second.term()
        assert term is not None
        assert (term.holder, term.epoch) == ("b", 2)
        assert not first.held
        assert not first.ensure(), "the old holder cannot renew a lease it lost"
    assert first.status()["node_id"] == "b"
    [lost] = [e for e in logs if e["event"] == "maintenance_leadership_lost"]
    assert lost["reason"]


def test_a_holder_stops_acting_before_its_lease_ends(database: Database) -> None:
    """A holder that missed its renewals (frozen) stops at 90 % of the TTL, by itself."""
    clock = FakeClock()
    leader = _node(database, clock, "a")
    assert leader.ensure()
    deadline = leader.deadline()
    assert deadline is not None
    assert deadline < clock.now() + TTL
    clock.advance(deadline - clock.now() - timedelta(milliseconds=1))
    assert leader.term() is not None
    clock.advance(timedelta(milliseconds=1))
    with capture_logs() as logs:
        assert leader.term() is None
    assert not leader.held
    assert "the lease was not renewed in time" in repr(logs)
    lease = LeaseStore(database).current()
    assert lease is not None
    assert lease.expires_at > clock.now(), "it stopped while its lease still ran"
    # Nobody took it meanwhile, so nobody acted: a late renewal keeps the epoch.
    assert leader.ensure()
    term = leader.term()
    assert term is not None
    assert term.epoch == 1


def test_a_released_lease_is_taken_at_once_and_a_retake_grows_the_epoch(
    database: Database,
) -> None:
    clock = FakeClock()
    first, second = _node(database, clock, "a"), _node(database, clock, "b")
    for turn in range(4):
        giver, taker = (first, second) if turn % 2 == 0 else (second, first)
        assert giver.ensure()
        giver.release()
        assert not giver.held
        assert taker.ensure(), f"turn {turn}: the lease was still held after release"
        taker.release()
    lease = LeaseStore(database).current()
    assert lease is not None
    assert lease.epoch == 8, "every take, by a new holder or the same one, is a new epoch"


def test_sqlite_leadership_without_a_lease_is_always_held(tmp_path: Path) -> None:
    from office_scheduler.store import migrate
    from office_scheduler.store.engine import open_database

    db = open_database(f"sqlite:///{tmp_path}/office.db")
    migrate.upgrade(db)
    try:
        leadership = Leadership(db, node_id="solo", clock=FakeClock(), ttl=TTL)
        assert not leadership.uses_lease
        assert leadership.ensure()
        assert leadership.held
        assert leadership.status() == {
            "node_id": "solo",
            "epoch": None,
            "expires_at": None,
            "this_node": True,
        }
        assert LeaseStore(db).current() is None, "no lease row is written"
    finally:
        db.dispose()


def test_a_write_under_a_stale_epoch_is_refused(database: Database) -> None:
    clock = FakeClock()
    leases = LeaseStore(database)
    old, _ = leases.acquire("a", now=clock.now(), ttl=TTL)
    leases.check_term(old.term)  # the current term passes
    clock.advance(TTL)
    new, taken = leases.acquire("b", now=clock.now(), ttl=TTL)
    assert taken
    assert new.epoch == old.epoch + 1
    with pytest.raises(LeaderFenced, match="under epoch 1 refused: the lease is held by b"):
        leases.check_term(old.term)
    with database.transaction() as conn:
        check_term(conn, new.term)


async def test_a_stale_leader_wakes_and_its_maintenance_writes_are_fenced(
    office: Office, tmp_path: Path
) -> None:
    """A leader whose clock says it still leads (it was frozen mid-pass) after another
    node took the lease: its requeue of an expired run is refused, it stops leading, and
    the new leader does the requeue."""
    store = office.store
    await office.service.wake(office.worker.id)
    [run] = store.queue.claim(
        now=office.clock.now(), node_id="gone", lease=timedelta(seconds=10), limit=1
    )
    stale_clock = FakeClock(office.clock.now())  # the frozen node's view of time
    stale = _node(store.db, stale_clock, "stale")
    assert stale.ensure()
    office.clock.advance(TTL + timedelta(seconds=1))
    fresh = _node(store.db, office.clock, "fresh")
    assert fresh.ensure()

    def loop(leadership: Leadership, clock: FakeClock) -> MaintenanceLoop:
        settings = Settings(home=tmp_path, node_id=leadership.node_id)
        return MaintenanceLoop(store=store, clock=clock, settings=settings, leadership=leadership)

    stale_clock.advance(timedelta(seconds=11))  # the run's lease expired for it too
    assert stale.term() is not None, "its own deadline has not passed by its clock"
    with capture_logs() as logs:
        await loop(stale, stale_clock).run_pass()
    assert store.queue.get_run(run.id).status is RunStatus.CLAIMED, "the stale write was refused"
    assert not stale.held
    assert any(entry["event"] == "maintenance_pass_fenced" for entry in logs)
    await loop(fresh, office.clock).run_pass()
    assert store.queue.get_run(run.id).status is RunStatus.QUEUED
