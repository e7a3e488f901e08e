"""Intake on both databases: idempotency, claim-time merge, promotion, coalescing hold."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from helpers import Office, merged_wakes
from office_scheduler.domain.errors import BusyError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Run, WakeRequest, WorkspaceSettings
from office_scheduler.domain.status import (
    Classification,
    IntakeOutcome,
    RunStatus,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store import queue as queue_module
from office_scheduler.store.schema import agents, runs, wakeup_requests


def _periodic(office: Office, agent_id: str, key: str | None = None) -> WakeRequest:
    return WakeRequest(
        workspace_id=office.workspace.id,
        agent_id=agent_id,
        source=WakeSource.ROUTINE,
        classification=Classification.PERIODIC,
        payload={"routine_id": "r1"},
        idempotency_key=key,
    )


def _event(
    office: Office,
    agent_id: str,
    *,
    task_id: str | None = None,
    key: str | None = None,
    source: WakeSource = WakeSource.SELF,
) -> WakeRequest:
    return WakeRequest(
        workspace_id=office.workspace.id,
        agent_id=agent_id,
        source=source,
        payload={"reason": "check"},
        task_id=task_id,
        idempotency_key=key,
    )


def _count(office: Office, table: sa.Table) -> int:
    with office.store.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


async def test_duplicate_key_sequential_is_silently_rejected(office: Office) -> None:
    first = await office.service.intake.enqueue(_event(office, office.worker.id, key="k:1"))
    office.clock.advance(timedelta(days=30))
    second = await office.service.intake.enqueue(_event(office, office.worker.id, key="k:1"))
    assert first.outcome is IntakeOutcome.CREATED
    assert second.outcome is IntakeOutcome.DEDUPLICATED
    assert second.request.id == first.request.id
    assert second.run is not None
    assert first.run is not None
    assert second.run.id == first.run.id
    assert _count(office, wakeup_requests) == 1
    assert _count(office, runs) == 1


def test_duplicate_key_concurrent_gives_one_request_and_one_run(office: Office) -> None:
    store, now = office.store, office.clock.now()
    outcomes: list[IntakeOutcome] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def fire() -> None:
        try:
            barrier.wait()
            result = store.queue.enqueue(
                _event(office, office.worker.id, key="comment:c-1"),
                now=now,
                hold=timedelta(seconds=5),
                decide=decide_merge,
            )
            outcomes.append(result.outcome)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=fire) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(outcomes) == sorted([IntakeOutcome.CREATED] + [IntakeOutcome.DEDUPLICATED] * 5)
    assert _count(office, wakeup_requests) == 1
    assert _count(office, runs) == 1


async def test_no_in_flight_run_creates_one_with_the_coalescing_hold(office: Office) -> None:
    result = await office.service.intake.enqueue(_event(office, office.worker.id))
    assert result.outcome is IntakeOutcome.CREATED
    assert result.request.status is WakeupStatus.CLAIMED
    assert result.run is not None
    assert result.run.status is RunStatus.QUEUED
    assert result.run.coalesced_count == 1
    assert result.run.not_before == office.clock.now() + timedelta(seconds=5)


async def test_user_wake_has_no_hold(office: Office) -> None:
    result = await office.service.wake(office.worker.id, payload={"note": "now"})
    assert result.run is not None
    assert result.run.not_before == office.clock.now()


async def test_queued_run_absorbs_a_merge_and_keeps_every_payload(office: Office) -> None:
    intake = office.service.intake
    first = await intake.enqueue(_event(office, office.worker.id))
    second = await intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.worker.id,
            source=WakeSource.AGENT_ERROR,
            payload={"failed_agent_id": "x", "error": "boom"},
        )
    )
    assert second.outcome is IntakeOutcome.COALESCED
    assert second.request.status is WakeupStatus.COALESCED
    assert second.run is not None
    assert first.run is not None
    assert second.run.id == first.run.id
    assert second.run.coalesced_count == 2
    wakes = merged_wakes(office.store, second.run.id)
    assert [e.source for e in wakes] == [WakeSource.SELF, WakeSource.AGENT_ERROR]
    assert wakes[1].payload == {"failed_agent_id": "x", "error": "boom"}


async def test_queued_periodic_run_is_promoted_by_an_event_wake(office: Office) -> None:
    intake = office.service.intake
    first = await intake.enqueue(_periodic(office, office.coordinator.id))
    assert first.run is not None
    assert first.run.classification is Classification.PERIODIC
    merged = await intake.enqueue(_event(office, office.coordinator.id))
    assert merged.run is not None
    assert merged.run.id == first.run.id
    assert merged.run.classification is Classification.EVENT
    assert merged.run.source is WakeSource.SELF
    again = await intake.enqueue(_periodic(office, office.coordinator.id))
    assert again.run is not None
    assert again.run.classification is Classification.EVENT  # never back to periodic


async def test_claimed_periodic_run_is_not_promoted_a_fresh_run_is_made(office: Office) -> None:
    intake, queue = office.service.intake, office.store.queue
    first = await intake.enqueue(_periodic(office, office.coordinator.id))
    office.clock.advance(timedelta(seconds=5))
    claimed = queue.claim(now=office.clock.now(), node_id="n", lease=timedelta(60), limit=5)
    assert first.run is not None
    assert [r.id for r in claimed] == [first.run.id]
    result = await intake.enqueue(_event(office, office.coordinator.id))
    assert result.outcome is IntakeOutcome.CREATED
    assert result.run is not None
    assert first.run is not None
    assert result.run.id != first.run.id
    assert result.request.status is WakeupStatus.CLAIMED
    original = queue.get_run(first.run.id)
    assert original.classification is Classification.PERIODIC
    assert original.coalesced_count == 1


async def test_claimed_run_without_promotion_absorbs_and_bumps_the_version(office: Office) -> None:
    intake, queue = office.service.intake, office.store.queue
    first = await intake.enqueue(_event(office, office.worker.id))
    office.clock.advance(timedelta(seconds=5))
    queue.claim(now=office.clock.now(), node_id="n", lease=timedelta(60), limit=5)
    result = await intake.enqueue(_event(office, office.worker.id, source=WakeSource.USER))
    assert result.outcome is IntakeOutcome.COALESCED
    assert result.run is not None
    assert first.run is not None
    assert result.run.id == first.run.id
    assert result.run.status is RunStatus.CLAIMED
    assert result.run.context_version == 2
    assert result.run.coalesced_count == 2


async def test_running_run_is_never_merged_into(office: Office) -> None:
    intake, queue = office.service.intake, office.store.queue
    first = await intake.enqueue(_event(office, office.worker.id))
    assert first.run is not None
    office.clock.advance(timedelta(seconds=5))
    queue.claim(now=office.clock.now(), node_id="n", lease=timedelta(60), limit=5)
    assert queue.mark_running(
        first.run.id,
        expected_version=1,
        prompt="p",
        executor="fake",
        session_id=None,
        now=office.clock.now(),
    )
    result = await intake.enqueue(_event(office, office.worker.id))
    assert result.outcome is IntakeOutcome.CREATED
    assert result.run is not None
    assert result.run.id != first.run.id
    assert result.run.status is RunStatus.QUEUED


async def test_merging_is_scoped_by_task(office: Office) -> None:
    svc = office.service
    t1 = await svc.office.create_task(
        workspace_id=office.workspace.id, title="one", project_id=office.project.id
    )
    t2 = await svc.office.create_task(
        workspace_id=office.workspace.id, title="two", project_id=office.project.id
    )
    a = await svc.intake.enqueue(_event(office, office.worker.id, task_id=t1.id))
    b = await svc.intake.enqueue(_event(office, office.worker.id, task_id=t2.id))
    c = await svc.intake.enqueue(_event(office, office.worker.id))
    d = await svc.intake.enqueue(_event(office, office.worker.id, task_id=t1.id))
    assert a.run
    assert b.run
    assert c.run
    assert d.run
    assert len({a.run.id, b.run.id, c.run.id}) == 3
    assert d.run.id == a.run.id


async def test_burst_of_five_in_three_seconds_becomes_one_run(office: Office) -> None:
    svc = office.service
    parent = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="parent",
        project_id=office.project.id,
        assignee_agent_id=office.coordinator.id,
    )
    office.clock.advance(timedelta(seconds=5))
    await svc.run_until_idle()
    assert len(office.executor.launches) == 1
    office.clock.advance(timedelta(seconds=10))
    results = []
    for i in range(5):
        request = WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.coordinator.id,
            source=WakeSource.TASK_CHILDREN_COMPLETED,
            task_id=parent.id,
            payload={"task_id": parent.id, "child": i},
            idempotency_key=f"children:{parent.id}:{i}",
        )
        results.append(await svc.intake.enqueue(request))
        office.clock.advance(timedelta(seconds=0.75))
    run_ids = {r.run.id for r in results if r.run}
    assert len(run_ids) == 1
    run = svc.store.queue.get_run(run_ids.pop())
    assert run.coalesced_count == 5
    assert [e.payload["child"] for e in merged_wakes(svc.store, run.id)] == [0, 1, 2, 3, 4]
    await svc.run_until_idle()
    assert len(office.executor.launches) == 1  # still inside the coalescing hold
    office.clock.advance(timedelta(seconds=2))
    await svc.run_until_idle()
    assert len(office.executor.launches) == 2
    assert office.executor.launches[1].prompt.count("**task_children_completed**") == 5


async def test_intake_pokes_the_runs_loop(office: Office) -> None:
    loop = office.service.runs
    loop._poked.clear()
    await office.service.intake.enqueue(_event(office, office.worker.id))
    assert loop._poked.is_set()
    await asyncio.sleep(0)


async def test_a_run_that_moves_on_during_intake_gets_a_fresh_run_not_a_500(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a pipeline moving the in-flight run to running between intake's read and
    its merge raised "changed under the agent lock" (HTTP 500 with four PostgreSQL nodes)."""
    first = await office.service.wake(office.worker.id)
    assert first.run is not None
    [claimed] = office.store.queue.claim(
        now=office.clock.now(), node_id="n1", lease=timedelta(seconds=60), limit=1
    )
    assert claimed.id == first.run.id
    real_in_flight = queue_module._in_flight
    reads = 0

    def racing_in_flight(conn: Connection, request: WakeRequest) -> Run | None:
        nonlocal reads
        reads += 1
        found = real_in_flight(conn, request)
        if reads == 1:  # the pipeline launches the session right after this read
            conn.execute(sa.update(runs).where(runs.c.id == claimed.id).values(status="running"))
        return found

    monkeypatch.setattr(queue_module, "_in_flight", racing_in_flight)
    second = await office.service.wake(office.worker.id)

    assert second.outcome is IntakeOutcome.CREATED
    assert second.run is not None
    assert second.run.id != claimed.id
    assert reads == 2
    assert office.store.queue.get_run(claimed.id).coalesced_count == 1


def test_a_wake_naming_another_workspace_than_its_agents_is_refused(office: Office) -> None:
    other = office.store.office.create_workspace(
        name="elsewhere", settings=WorkspaceSettings(), now=office.clock.now()
    )
    with pytest.raises(NotFoundError) as refused:
        office.store.queue.enqueue(
            WakeRequest(
                workspace_id=other.id,
                agent_id=office.worker.id,
                source=WakeSource.USER,
                hold=False,
            ),
            now=office.clock.now(),
            hold=timedelta(0),
            decide=decide_merge,
        )
    assert refused.value.field == "agent_id"
    assert office.store.listing.list_wakeups(agent_id=office.worker.id, limit=10).items == []


def test_batches_naming_agents_in_opposite_orders_never_deadlock(office: Office) -> None:
    """Each batch locks its agents in id order, so two batches cannot wait on each other."""
    intake = office.service.intake
    agents = [office.worker.id, office.other_worker.id, office.coordinator.id]
    rounds = 12
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def send(order: list[str], tag: str) -> None:
        for round_ in range(rounds):
            batch = [_event(office, agent, key=f"{tag}:{round_}:{agent}") for agent in order]
            try:
                barrier.wait(timeout=30)
                intake.persist_many(batch)
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [
        threading.Thread(target=send, args=(agents, "a")),
        threading.Thread(target=send, args=(agents[::-1], "b")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _count(office, wakeup_requests) == 2 * rounds * len(agents)


async def test_a_batch_with_one_bad_wake_writes_nothing(office: Office) -> None:
    good = _event(office, office.worker.id, key="fine")
    bad = _event(office, "ghost")
    with pytest.raises(NotFoundError) as raised:
        await office.service.intake.enqueue_many([good, good, bad])
    assert raised.value.field == "wakes.2.agent_id"
    assert str(raised.value).startswith("wake 2: ")
    assert _count(office, wakeup_requests) == 0
    assert _count(office, runs) == 0


async def test_a_batch_rolled_back_to_break_a_deadlock_is_sent_again(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    intake = office.service.intake
    real = intake.persist_many
    calls: list[int] = []

    def deadlocked_once(requests: list[WakeRequest]) -> object:
        calls.append(len(requests))
        if len(calls) == 1:
            raise sa.exc.OperationalError("UPDATE", {}, psycopg.errors.DeadlockDetected("cycle"))
        return real(requests)

    monkeypatch.setattr(intake, "persist_many", deadlocked_once)
    batch = [_event(office, office.worker.id, key="a"), _event(office, office.worker.id, key="b")]
    results = await intake.enqueue_many(batch)
    assert calls == [2, 2]
    assert [r.outcome for r in results] == [IntakeOutcome.CREATED, IntakeOutcome.COALESCED]
    assert _count(office, wakeup_requests) == 2


def _persist_many_failing(
    office: Office, monkeypatch: pytest.MonkeyPatch, error: psycopg.Error
) -> list[int]:
    """Make every batch write fail with ``error``; returns the sizes of the batches tried."""
    calls: list[int] = []

    def failing(requests: list[WakeRequest]) -> object:
        calls.append(len(requests))
        raise sa.exc.OperationalError("UPDATE", {}, error)

    monkeypatch.setattr(office.service.intake, "persist_many", failing)
    return calls


async def test_a_batch_failing_for_another_reason_is_not_sent_again(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _persist_many_failing(office, monkeypatch, psycopg.errors.QueryCanceled("timeout"))
    with pytest.raises(sa.exc.OperationalError):
        await office.service.intake.enqueue_many([_event(office, office.worker.id)])
    assert calls == [1]


async def test_a_batch_deadlocked_three_times_is_refused_as_busy(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _persist_many_failing(office, monkeypatch, psycopg.errors.DeadlockDetected("cycle"))
    with pytest.raises(BusyError) as raised:
        await office.service.intake.enqueue_many([_event(office, office.worker.id)])
    assert calls == [1, 1, 1]
    assert raised.value.retry_after_s == 1


async def test_a_batch_holds_at_most_fifty_wakes_per_agent(office: Office) -> None:
    fifty = [_event(office, office.worker.id) for _ in range(50)]
    assert len(await office.service.intake.enqueue_many(fifty)) == 50
    with pytest.raises(InvalidInputError) as raised:
        await office.service.intake.enqueue_many([*fifty, _event(office, office.worker.id)])
    assert raised.value.field == "wakes"
    assert "51 for agent" in raised.value.message
    assert _count(office, wakeup_requests) == 50


async def test_a_batch_records_outcomes_heads_and_coalescing_once_for_all(office: Office) -> None:
    """A batch writes its outcomes, heads and activity entries once at its end; a
    duplicate of a wake earlier in the batch still gets that wake's run."""
    worker, other = office.worker.id, office.other_worker.id
    now = office.clock.now()
    results = await office.service.intake.enqueue_many(
        [
            _event(office, worker, key="w1"),
            _event(office, worker, key="w1"),
            _event(office, worker, key="w2"),
            _event(office, other, key="o1"),
        ]
    )
    assert [r.outcome for r in results] == [
        IntakeOutcome.CREATED,
        IntakeOutcome.DEDUPLICATED,
        IntakeOutcome.COALESCED,
        IntakeOutcome.CREATED,
    ]
    first, duplicate, joined, created = results
    assert first.run is not None
    assert duplicate.run is not None
    assert joined.run is not None
    assert duplicate.run.id == joined.run.id == first.run.id
    assert created.run is not None
    assert first.request.status is WakeupStatus.CLAIMED
    with office.store.db.read() as conn:
        stored = conn.execute(
            sa.select(wakeup_requests.c.id, wakeup_requests.c.status, wakeup_requests.c.run_id)
        ).all()
        heads = conn.execute(sa.select(agents.c.id, agents.c.next_queued_at)).all()
    # A batch is written in agent id order, so compare by request.
    assert {row.id: (row.status, row.run_id) for row in stored} == {
        first.request.id: ("claimed", first.run.id),
        joined.request.id: ("coalesced", first.run.id),
        created.request.id: ("claimed", created.run.id),
    }
    window = timedelta(seconds=5)
    assert {row.id: row.next_queued_at for row in heads if row.id in (worker, other)} == {
        worker: now + window,
        other: now + window,
    }
    page = office.store.runlog.list_activity(office.workspace.id, kind="wakeup_coalesced")
    assert [e.data["wakeup_id"] for e in page.items] == [joined.request.id]


async def test_a_wake_about_someone_elses_task_is_refused_naming_the_assignee(
    office: Office,
) -> None:
    """README walk: such a wake was taken, and its run cancelled as ``assignee_changed``."""
    task = office.store.office.create_task(
        workspace_id=office.workspace.id,
        title="theirs",
        now=office.clock.now(),
        assignee_agent_id=office.other_worker.id,
    )
    with pytest.raises(InvalidInputError) as refused:
        await office.service.wake(office.worker.id, task_id=task.id)
    assert refused.value.field == "task_id"
    assert str(refused.value) == (
        f"task {task.id} is assigned to bob, not to ann: a wake about a task runs only for "
        "its assignee (wake bob, or queue a run for any agent: runs queue)"
    )
    assert office.store.listing.list_wakeups(agent_id=office.worker.id, limit=10).items == []
    own = await office.service.wake(office.other_worker.id, task_id=task.id)
    assert own.outcome is IntakeOutcome.CREATED
