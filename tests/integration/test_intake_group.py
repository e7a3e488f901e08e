"""Group commit of concurrent wakes on both databases: one transaction, outcomes their own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
import sqlalchemy as sa

from helpers import Office, self_wake
from office_scheduler.domain.errors import BusyError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import IntakeOutcome, WakeSource
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.notify import WakeListener, wake_payload
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.schema import agents, runs, wakeup_requests
from office_scheduler.store.shared_writes import SharedWrites


def _wake(office: Office, agent_id: str, key: str | None, payload: object = None) -> WakeRequest:
    return WakeRequest(
        workspace_id=office.workspace.id,
        agent_id=agent_id,
        source=WakeSource.SELF,
        payload={"key": key} if payload is None else payload,  # type: ignore[arg-type]
        idempotency_key=key,
    )


def _count(office: Office, table: sa.Table) -> int:
    with office.store.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


@contextmanager
def _commits(office: Office) -> Iterator[list[int]]:
    """Counts the commits of the office's write engine inside the block."""
    seen: list[int] = []

    def on_commit(conn: sa.Connection) -> None:
        seen.append(1)

    sa.event.listen(office.store.db.writer, "commit", on_commit)
    try:
        yield seen
    finally:
        sa.event.remove(office.store.db.writer, "commit", on_commit)


async def test_concurrent_wakes_commit_once_each_with_its_own_outcome(office: Office) -> None:
    intake = office.service.intake
    worker, other = office.worker.id, office.other_worker.id
    with _commits(office) as commits:
        results = await asyncio.gather(
            intake.enqueue(_wake(office, other, "k:1")),
            intake.enqueue(_wake(office, worker, "k:2")),
            intake.enqueue(_wake(office, worker, "k:3")),
            intake.enqueue(_wake(office, office.coordinator.id, "k:1")),
            intake.enqueue(_wake(office, other, "k:5", payload=["not", "an", "object"])),
            return_exceptions=True,
        )
    assert len(commits) == 1
    first, created, coalesced, duplicate, invalid = results
    assert not isinstance(first, BaseException)
    assert not isinstance(created, BaseException)
    assert not isinstance(coalesced, BaseException)
    assert not isinstance(duplicate, BaseException)
    assert created.outcome is IntakeOutcome.CREATED
    assert coalesced.outcome is IntakeOutcome.COALESCED
    assert created.run is not None
    assert coalesced.run is not None
    assert coalesced.run.id == created.run.id
    # Wakes are written in arrival order: the first "k:1" wins.
    assert first.outcome is IntakeOutcome.CREATED
    assert duplicate.outcome is IntakeOutcome.DEDUPLICATED
    assert duplicate.request.id == first.request.id
    assert isinstance(invalid, InvalidInputError)
    assert invalid.field == "payload"
    assert _count(office, wakeup_requests) == 3
    assert _count(office, runs) == 2


async def test_an_unknown_agent_fails_alone_and_the_rest_commit_together(office: Office) -> None:
    intake = office.service.intake
    with _commits(office) as commits:
        kept, missing, also_kept = await asyncio.gather(
            intake.enqueue(_wake(office, office.worker.id, "a")),
            intake.enqueue(_wake(office, "no-such-agent", "b")),
            intake.enqueue(_wake(office, office.other_worker.id, "c")),
            return_exceptions=True,
        )
    assert isinstance(missing, NotFoundError)
    assert missing.field == "agent_id"
    assert not isinstance(kept, BaseException)
    assert not isinstance(also_kept, BaseException)
    assert (kept.outcome, also_kept.outcome) == (IntakeOutcome.CREATED, IntakeOutcome.CREATED)
    assert len(commits) == 1  # the group; the unknown agent's wake failed on its own
    assert _count(office, wakeup_requests) == 2


async def test_a_group_writes_its_wakes_in_arrival_order(office: Office) -> None:
    """Break-it: wakes were written in agent id order, so a later wake for a lower agent id
    got the lower wakeup and run ids and won a shared idempotency key."""
    intake = office.service.intake
    first, second = sorted([office.worker.id, office.other_worker.id], reverse=True)
    results = await asyncio.gather(
        intake.enqueue(_wake(office, first, "shared")),
        intake.enqueue(_wake(office, second, "shared")),
        intake.enqueue(_wake(office, second, "own")),
    )
    assert [r.outcome for r in results] == [
        IntakeOutcome.CREATED,
        IntakeOutcome.DEDUPLICATED,
        IntakeOutcome.CREATED,
    ]
    assert results[1].request.id == results[0].request.id
    assert results[0].request.id < results[2].request.id
    assert results[0].run is not None
    assert results[2].run is not None
    assert results[0].run.id < results[2].run.id


@contextmanager
def _agent_locked_elsewhere(office: Office, agent_id: str) -> Iterator[None]:
    """Another transaction holds ``agent_id``'s row (``FOR UPDATE``) inside the block."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with office.store.db.writer.begin() as conn:
            conn.execute(sa.select(agents.c.id).where(agents.c.id == agent_id).with_for_update())
            holding.set()
            release.wait(20)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        yield
    finally:
        release.set()
        holder.join(10)


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_wakes_for_an_agent_locked_elsewhere_hold_up_no_other_wake_nor_thread(
    office: Office,
) -> None:
    """Break-it: a group (or a lone wake) waited for the lock, so every later wake of the
    process did; then wakes parked on the lock used up the worker threads."""
    intake = office.service.intake
    worker = office.worker.id
    with _agent_locked_elsewhere(office, worker):
        first = asyncio.ensure_future(intake.enqueue(_wake(office, worker, "w0")))
        await asyncio.sleep(0.1)  # a lone wake, tried while the agent is locked
        blocked = [
            asyncio.ensure_future(intake.enqueue(_wake(office, worker, f"w{n}")))
            for n in range(1, 12)
        ]
        await asyncio.sleep(0.1)
        others = asyncio.gather(
            intake.enqueue(_wake(office, office.other_worker.id, "o")),
            intake.enqueue(_wake(office, office.coordinator.id, "c")),
            asyncio.to_thread(lambda: "a thread was free"),
        )
        answered = await asyncio.wait_for(others, 5)
        assert [r.outcome for r in answered[:2]] == [IntakeOutcome.CREATED] * 2
        assert answered[2] == "a thread was free"
        assert not first.done()
        assert not any(wake.done() for wake in blocked)
    results = await asyncio.wait_for(asyncio.gather(first, *blocked), 10)
    # The agent's wakes were written in arrival order once it was free.
    assert [r.outcome for r in results] == [IntakeOutcome.CREATED] + [IntakeOutcome.COALESCED] * 11
    ids = [r.request.id for r in results]
    assert ids == sorted(ids)
    assert _count(office, wakeup_requests) == 14


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_closing_the_service_fails_a_wake_still_waiting_for_its_agent(
    office: Office,
) -> None:
    """Break-it: intake writes were left in flight after ``Service.close``."""
    intake = office.service.intake
    with _agent_locked_elsewhere(office, office.worker.id):
        waiting = asyncio.ensure_future(intake.enqueue(_wake(office, office.worker.id, "w")))
        await asyncio.sleep(0.1)
        await asyncio.wait_for(intake.close(), 5)
        with pytest.raises(BusyError, match="stayed locked by other work"):
            await waiting
    assert _count(office, wakeup_requests) == 0
    with pytest.raises(BusyError, match="shutting down"):  # break-it: it was written
        await intake.enqueue(_wake(office, office.worker.id, "after"))
    assert _count(office, wakeup_requests) == 0


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_wake_naming_another_workspaces_locked_agent_is_not_found_at_once(
    office: Office,
) -> None:
    """Break-it: it waited as busy and ended with "send the wake again"."""
    stranger = WakeRequest(
        workspace_id="another-workspace",
        agent_id=office.worker.id,
        source=WakeSource.SELF,
        payload={},
    )
    with (
        _agent_locked_elsewhere(office, office.worker.id),
        pytest.raises(NotFoundError, match="not found in workspace another-workspace"),
    ):
        await asyncio.wait_for(office.service.intake.enqueue(stranger), 2)


async def test_a_wake_naming_another_workspaces_agent_fails_alone(office: Office) -> None:
    """Break-it: the mismatch rolled back the whole group."""
    intake = office.service.intake
    stranger = _wake(office, office.worker.id, "x")
    stranger = WakeRequest(
        workspace_id="another-workspace",
        agent_id=stranger.agent_id,
        source=stranger.source,
        payload=stranger.payload,
        idempotency_key="x",
    )
    with _commits(office) as commits:
        kept, refused = await asyncio.gather(
            intake.enqueue(_wake(office, office.other_worker.id, "k")),
            intake.enqueue(stranger),
            return_exceptions=True,
        )
    assert isinstance(refused, NotFoundError)
    assert refused.field == "agent_id"
    assert not isinstance(kept, BaseException)
    assert kept.outcome is IntakeOutcome.CREATED
    assert len(commits) == 1


def _fail_enqueues_of(
    office: Office, monkeypatch: pytest.MonkeyPatch, agent_id: str, *, times: int | None
) -> list[str]:
    """Make the store's enqueue fail with a disk error for ``agent_id`` (``times`` times, or
    always); returns the list of failures so far."""
    queue = office.store.queue
    real_enqueue = queue.enqueue
    failed: list[str] = []

    def enqueue_failing(request: WakeRequest, **kwargs: object) -> object:
        if request.agent_id == agent_id and (times is None or len(failed) < times):
            failed.append(request.agent_id)
            raise sa.exc.OperationalError("INSERT", {}, Exception("disk I/O error"))
        return real_enqueue(request, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(queue, "enqueue", enqueue_failing)
    return failed


async def test_a_group_whose_transaction_fails_is_written_again_wake_by_wake(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = _fail_enqueues_of(office, monkeypatch, office.other_worker.id, times=1)
    intake = office.service.intake
    with _commits(office) as commits:
        results = await asyncio.gather(
            intake.enqueue(_wake(office, office.worker.id, "a")),
            intake.enqueue(_wake(office, office.other_worker.id, "b")),
        )
    assert failed == [office.other_worker.id]
    assert [r.outcome for r in results] == [IntakeOutcome.CREATED, IntakeOutcome.CREATED]
    assert len(commits) == 2  # the group rolled back, then one transaction per wake
    assert _count(office, wakeup_requests) == 2
    assert _count(office, runs) == 2


async def test_a_wake_failing_alone_after_the_group_failed_gets_its_own_error(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_enqueues_of(office, monkeypatch, office.other_worker.id, times=None)
    intake = office.service.intake
    kept, lost = await asyncio.gather(
        intake.enqueue(_wake(office, office.worker.id, "a")),
        intake.enqueue(_wake(office, office.other_worker.id, "b")),
        return_exceptions=True,
    )
    assert not isinstance(kept, BaseException)
    assert kept.outcome is IntakeOutcome.CREATED
    assert isinstance(lost, sa.exc.OperationalError)
    assert _count(office, wakeup_requests) == 1


async def test_a_payload_nested_too_deeply_fails_alone(office: Office) -> None:
    """Break-it: ``RecursionError`` from validating one wake failed its whole group."""
    nested: dict[str, object] = {}
    for _ in range(5000):
        nested = {"n": nested}
    intake = office.service.intake
    kept, deep, also_kept = await asyncio.gather(
        intake.enqueue(_wake(office, office.worker.id, "a")),
        intake.enqueue(_wake(office, office.other_worker.id, "b", payload=nested)),
        intake.enqueue(_wake(office, office.coordinator.id, "c")),
        return_exceptions=True,
    )
    assert isinstance(deep, InvalidInputError)
    assert (deep.field, deep.message) == ("payload", "payload is nested too deeply")
    assert not isinstance(kept, BaseException)
    assert not isinstance(also_kept, BaseException)
    assert _count(office, wakeup_requests) == 2


async def test_a_caller_key_longer_than_500_characters_is_refused_naming_500(
    office: Office,
) -> None:
    """Break-it: in-process callers were told "at most 600", the stored key's limit."""
    with pytest.raises(InvalidInputError, match="at most 500 characters") as refused:
        await office.service.wake(office.worker.id, idempotency_key="k" * 501)
    assert refused.value.field == "idempotency_key"
    assert (await office.service.wake(office.worker.id, idempotency_key="k" * 500)).run


async def test_a_duplicate_of_a_wake_earlier_in_the_group_gets_that_wakes_run(
    office: Office,
) -> None:
    """A group records its wakes' outcomes in one batch at its end; a duplicate read back
    before then must still see the original's run (not a request without one)."""
    intake = office.service.intake
    first, again = await asyncio.gather(
        intake.enqueue(_wake(office, office.worker.id, "twice")),
        intake.enqueue(_wake(office, office.worker.id, "twice")),
    )
    assert first.outcome is IntakeOutcome.CREATED
    assert again.outcome is IntakeOutcome.DEDUPLICATED
    assert first.run is not None
    assert again.run is not None
    assert again.run.id == first.run.id
    assert again.request.run_id == first.run.id


async def test_a_group_records_every_outcome_head_and_coalescing_entry(office: Office) -> None:
    intake = office.service.intake
    now = office.clock.now()
    worker, other = office.worker.id, office.other_worker.id
    results = await asyncio.gather(
        intake.enqueue(self_wake(office, worker, "w1")),
        intake.enqueue(self_wake(office, other, "o1")),
        intake.enqueue(self_wake(office, worker, "w2")),
        intake.enqueue(self_wake(office, worker, "w3", hold=False)),  # makes the run due now
        intake.enqueue(self_wake(office, other, "o2")),
    )
    assert [r.outcome for r in results] == [
        IntakeOutcome.CREATED,
        IntakeOutcome.CREATED,
        IntakeOutcome.COALESCED,
        IntakeOutcome.COALESCED,
        IntakeOutcome.COALESCED,
    ]
    with office.store.db.read() as conn:
        stored = conn.execute(
            sa.select(
                wakeup_requests.c.idempotency_key,
                wakeup_requests.c.status,
                wakeup_requests.c.run_id,
            ).order_by(wakeup_requests.c.id)
        ).all()
        head_rows = conn.execute(sa.select(agents.c.id, agents.c.next_queued_at)).all()
    heads = {row.id: row.next_queued_at for row in head_rows}
    by_key = {r.request.idempotency_key: r for r in results}
    assert [(key, status) for key, status, _ in stored] == [
        ("w1", "claimed"),
        ("o1", "claimed"),
        ("w2", "coalesced"),
        ("w3", "coalesced"),
        ("o2", "coalesced"),
    ]
    assert all(run_id == by_key[key].run.id for key, _, run_id in stored)  # type: ignore[union-attr]
    # The worker's run was made due by "w3"; the other's waits out the 5 s hold.
    assert heads[worker] == now
    assert heads[other] == now + timedelta(seconds=5)
    page = office.store.runlog.list_activity(office.workspace.id, kind="wakeup_coalesced")
    assert sorted(e.data["wakeup_id"] for e in page.items) == [
        by_key[key].request.id for key in ("w2", "w3", "o2")
    ]


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_group_notifies_once_with_its_earliest_due(office: Office) -> None:
    listener = WakeListener(office.store.db)
    await listener.connect()
    try:
        intake = office.service.intake
        now = office.clock.now()
        await asyncio.gather(
            intake.enqueue(self_wake(office, office.worker.id, "w1")),
            intake.enqueue(self_wake(office, office.other_worker.id, "o1")),
        )
        assert await listener.wait(5) == [wake_payload(now + timedelta(seconds=5))]
        await asyncio.gather(
            intake.enqueue(self_wake(office, office.worker.id, "w2")),  # joins: no news
            intake.enqueue(self_wake(office, office.coordinator.id, "c1", hold=False)),
        )
        assert await listener.wait(5) == [""]
        assert await listener.wait(0.2) == []
    finally:
        await listener.close()


async def test_a_run_the_group_kept_that_moved_on_is_read_again(office: Office) -> None:
    """The run an earlier wake of the group wrote is reused only while the merge's
    compare-and-set still holds; a run started meanwhile is left alone."""
    queue = office.store.queue
    now = office.clock.now()
    shared = SharedWrites()

    def enqueue(key: str) -> IntakeResult:
        with office.store.db.transaction():
            return queue.enqueue(
                _wake(office, office.worker.id, key),
                now=now,
                hold=timedelta(0),
                decide=decide_merge,
                shared=shared,
            )

    first = enqueue("a")
    assert first.run is not None
    kept = dict(shared.in_flight)
    with office.store.db.transaction():
        queue.write_shared(shared)  # the queue head, so the claim finds the run
    shared.in_flight.update(kept)  # as if the group went on
    (claimed,) = queue.claim(now=now, node_id="n1", lease=timedelta(minutes=1), limit=1)
    assert claimed.id == first.run.id
    started = queue.mark_running(
        claimed.id, expected_version=1, prompt="p", executor="fake", session_id=None, now=now
    )
    assert started is not None
    # ``shared`` still holds the run as queued; the merge into it must not apply.
    second = enqueue("b")
    assert second.outcome is IntakeOutcome.CREATED
    assert second.run is not None
    assert second.run.id != first.run.id
    with office.store.db.transaction():
        queue.write_shared(shared)
    with office.store.db.read() as conn:
        contexts = conn.execute(
            sa.select(runs.c.id, runs.c.coalesced_count).order_by(runs.c.id)
        ).all()
    assert [tuple(row) for row in contexts] == [(first.run.id, 1), (second.run.id, 1)]
