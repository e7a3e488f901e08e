"""Intake groups' shared writes under failure, concurrency and the cron path; checkout release."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from helpers import Office, self_wake
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import IntakeOutcome, RunReason, RunStatus
from office_scheduler.intake import service as intake_service
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.notify import WakeListener, wake_payload
from office_scheduler.store.schema import activity_log, agents, runs, wakeup_requests
from office_scheduler.store.shared_writes import SharedWrites


def _rows(office: Office, table: sa.Table, *cols: sa.Column[Any]) -> list[tuple[Any, ...]]:
    with office.store.db.read() as conn:
        return [tuple(r) for r in conn.execute(sa.select(*cols).order_by(table.c.id))]


async def test_a_group_failing_in_its_shared_flush_is_written_again_wake_by_wake(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = SharedWrites.flush
    failures: list[int] = []

    def flush_failing(self: SharedWrites, conn: sa.Connection, schema: str | None) -> None:
        real(self, conn, schema)  # everything written, then the end fails
        if not failures:
            failures.append(1)
            raise sa.exc.OperationalError("UPDATE", {}, Exception("disk I/O error"))

    monkeypatch.setattr(SharedWrites, "flush", flush_failing)
    intake = office.service.intake
    worker, other = office.worker.id, office.other_worker.id
    now = office.clock.now()
    results = await asyncio.gather(
        intake.enqueue(self_wake(office, worker, "a")),
        intake.enqueue(self_wake(office, worker, "a")),
        intake.enqueue(self_wake(office, worker, "b")),
        intake.enqueue(self_wake(office, worker, "c", hold=False)),
        intake.enqueue(self_wake(office, other, "d")),
    )
    assert failures == [1]
    assert [r.outcome for r in results] == [
        IntakeOutcome.CREATED,
        IntakeOutcome.DEDUPLICATED,
        IntakeOutcome.COALESCED,
        IntakeOutcome.COALESCED,
        IntakeOutcome.CREATED,
    ]
    first, again, _, _, last = results
    assert first.run is not None
    assert again.run is not None
    assert last.run is not None
    assert again.run.id == first.run.id
    stored = _rows(
        office,
        wakeup_requests,
        wakeup_requests.c.idempotency_key,
        wakeup_requests.c.status,
        wakeup_requests.c.run_id,
    )
    run_a, run_d = first.run.id, last.run.id
    assert stored == [
        ("a", "claimed", run_a),
        ("b", "coalesced", run_a),
        ("c", "coalesced", run_a),
        ("d", "claimed", run_d),
    ]
    assert len(_rows(office, runs, runs.c.id)) == 2
    assert len(_rows(office, activity_log, activity_log.c.id)) == 2
    heads = dict(_rows(office, agents, agents.c.id, agents.c.next_queued_at))
    assert heads[worker] == now
    assert heads[other] == now + timedelta(seconds=5)


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_batch_with_duplicates_notifies_once_and_records_its_originals(
    office: Office,
) -> None:
    listener = WakeListener(office.store.db)
    await listener.connect()
    try:
        now = office.clock.now()
        worker, other = office.worker.id, office.other_worker.id
        results = await office.service.intake.enqueue_many(
            [
                self_wake(office, other, "x"),
                self_wake(office, worker, "x"),  # written first (agent order): the original
                self_wake(office, worker, "y"),
                self_wake(office, other, "y"),
            ]
        )
        assert await listener.wait(5) == [wake_payload(now + timedelta(seconds=5))]
        assert await listener.wait(0.2) == []
    finally:
        await listener.close()
    outcomes = {(r.request.idempotency_key, r.outcome) for r in results}
    assert len(_rows(office, wakeup_requests, wakeup_requests.c.id)) == 2
    for r in results:
        assert r.run is not None
        assert r.request.run_id == r.run.id
    assert len(outcomes) == 4


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_run_started_between_two_wakes_of_a_group(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline's mark_running (no agent lock) lands between two wakes of the group."""
    queue, now = office.store.queue, office.clock.now()
    first = await office.service.intake.enqueue(
        self_wake(office, office.worker.id, "p", hold=False)
    )
    (claimed,) = queue.claim(now=now, node_id="n1", lease=timedelta(minutes=1), limit=1)
    assert first.run is not None
    assert claimed.id == first.run.id
    real = decide_merge
    calls: list[int] = []
    started: list[Any] = []
    threads: list[threading.Thread] = []

    def decide(request: WakeRequest, in_flight: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:

            def start() -> None:
                started.append(
                    queue.mark_running(
                        claimed.id,
                        expected_version=1,
                        prompt="p",
                        executor="fake",
                        session_id=None,
                        now=now,
                    )
                )

            thread = threading.Thread(target=start)
            thread.start()
            threads.append(thread)
            thread.join(0.5)  # blocked on the run's row lock held by the group
            assert thread.is_alive()
        return real(request, in_flight)

    monkeypatch.setattr(intake_service, "decide_merge", decide)  # the name intake calls
    a, b = office.service.intake.persist_group(
        [self_wake(office, office.worker.id, "q"), self_wake(office, office.worker.id, "r")]
    )
    threads[0].join(5)
    assert [a.outcome, b.outcome] == [IntakeOutcome.COALESCED] * 2  # type: ignore[union-attr]
    assert started == [None]  # built from version 1, the group made it 3: rebuild
    run = queue.get_run(claimed.id)
    assert (run.status, run.context_version) == (RunStatus.CLAIMED, 3)


async def test_a_run_ending_without_its_checkout_leaves_the_holders(office: Office) -> None:
    queue, now = office.store.queue, office.clock.now()
    task = office.store.office.create_task(workspace_id=office.workspace.id, title="t", now=now)
    other_task = office.store.office.create_task(
        workspace_id=office.workspace.id, title="u", now=now
    )
    mine = await office.service.intake.enqueue(
        self_wake(office, office.worker.id, "m", hold=False, task_id=task.id)
    )
    theirs = await office.service.intake.enqueue(
        self_wake(office, office.other_worker.id, "t", hold=False, task_id=task.id)
    )
    assert mine.run is not None
    assert theirs.run is not None
    claimed = queue.claim(now=now, node_id="n", lease=timedelta(minutes=1), limit=5)
    assert len(claimed) == 2
    assert queue.checkout_task(
        task.id, agent_id=office.other_worker.id, run_id=theirs.run.id, now=now
    )
    # Same run id holds another task's checkout (not by the pipeline, but a legacy row).
    assert queue.checkout_task(
        other_task.id, agent_id=office.worker.id, run_id=mine.run.id, now=now
    )
    ended = queue.finish_run(
        mine.run.id, status=RunStatus.FINISHED, reason=RunReason.CHECKOUT_CONFLICT, now=now
    )
    assert ended is not None
    held = office.store.office.get_task(task.id)
    assert held.checkout_run_id == theirs.run.id
    retried = queue.schedule_retry(
        theirs.run.id,
        retry_at=now + timedelta(minutes=1),
        reason=RunReason.TIMEOUT,
        error="x",
        now=now,
    )
    assert retried is not None
    assert office.store.office.get_task(task.id).checkout_run_id is None
    # Documented narrowing: a checkout of another task by this run is no longer released.
    assert office.store.office.get_task(other_task.id).checkout_run_id == mine.run.id


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_persist_alone_refreshes_the_head_and_notifies_per_wake(office: Office) -> None:
    """The cron path (``Intake.persist`` inside a larger transaction) shares nothing."""
    listener = WakeListener(office.store.db)
    await listener.connect()
    try:
        intake, now = office.service.intake, office.clock.now()
        with office.store.db.transaction() as conn:
            intake.persist(self_wake(office, office.worker.id, "c1"))
            head = conn.execute(
                sa.select(agents.c.next_queued_at).where(agents.c.id == office.worker.id)
            ).scalar_one()
            assert head == now + timedelta(seconds=5)
            count = conn.execute(
                sa.select(sa.func.count())
                .select_from(wakeup_requests)
                .where(wakeup_requests.c.status == "claimed")
            ).scalar_one()
            assert count == 1
            intake.persist(self_wake(office, office.other_worker.id, "c2", hold=False))
        got = await listener.wait(5)
        got += await listener.wait(0.3)
        assert sorted(got) == sorted(["", wake_payload(now + timedelta(seconds=5))])
    finally:
        await listener.close()
