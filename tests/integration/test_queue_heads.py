"""Agents' queue heads (``agents.next_queued_at``) follow every queue transition."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import RunReason, RunStatus, WakeSource
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import agents, runs

LEASE = timedelta(minutes=5)


def _head(store: Store, agent_id: str) -> datetime | None:
    with store.db.read() as conn:
        value = conn.execute(
            sa.select(agents.c.next_queued_at).where(agents.c.id == agent_id)
        ).scalar_one()
    return value  # type: ignore[no-any-return]


def _queue(office: Office, *, hold: timedelta, task: bool = True) -> int:
    store = office.store
    task_id = None
    if task:
        task_id = store.office.create_task(
            workspace_id=office.workspace.id, title="t", now=office.clock.now()
        ).id
    result = store.queue.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.worker.id,
            source=WakeSource.QUEUE_RUN if task else WakeSource.USER,
            task_id=task_id,
            payload={"task_id": task_id} if task_id else {},
            hold=hold > timedelta(0),
        ),
        now=office.clock.now(),
        hold=hold,
        decide=decide_merge,
    )
    assert result.run is not None
    return result.run.id


def test_heads_follow_intake_claim_requeue_and_finish(office: Office) -> None:
    store, now = office.store, office.clock.now()
    assert _head(store, office.worker.id) is None
    later = _queue(office, hold=timedelta(seconds=30))
    assert _head(store, office.worker.id) == now + timedelta(seconds=30)
    sooner = _queue(office, hold=timedelta(0))
    assert _head(store, office.worker.id) == now  # the earliest queued run
    assert store.queue.claim(now=now, node_id="n", lease=LEASE, limit=5)[0].id == sooner
    assert _head(store, office.worker.id) == now + timedelta(seconds=30)
    assert store.queue.requeue([sooner], reason=RunReason.INTERRUPTED, now=now) == 1
    assert _head(store, office.worker.id) == now
    [claimed] = store.queue.claim(now=now, node_id="n", lease=LEASE, limit=5)
    assert claimed.id == sooner
    store.queue.finish_run(sooner, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=now)
    future = now + timedelta(seconds=31)
    [last] = store.queue.claim(now=future, node_id="n", lease=LEASE, limit=5)
    assert last.id == later
    assert _head(store, office.worker.id) is None
    assert store.queue.reconcile_heads() == 0


def test_a_retry_promoted_to_the_queue_moves_the_head(office: Office) -> None:
    store, now = office.store, office.clock.now()
    run_id = _queue(office, hold=timedelta(0))
    [run] = store.queue.claim(now=now, node_id="n", lease=LEASE, limit=1)
    retry_at = now + timedelta(minutes=2)
    parked = store.queue.schedule_retry(
        run.id, retry_at=retry_at, reason=RunReason.AGENT_FAILED, error="429", now=now
    )
    assert parked is not None
    assert _head(store, office.worker.id) is None
    assert store.queue.promote_retry(run_id, now=retry_at) is not None
    assert _head(store, office.worker.id) == retry_at
    assert [r.id for r in store.queue.claim(now=retry_at, node_id="n", lease=LEASE, limit=1)] == [
        run_id
    ]


def test_runs_written_behind_the_stores_back_are_found_after_reconciling(office: Office) -> None:
    store, now = office.store, office.clock.now()
    with store.db.write() as conn:  # a bulk load, not through intake
        conn.execute(
            sa.insert(runs).values(
                workspace_id=office.workspace.id,
                agent_id=office.worker.id,
                source=WakeSource.USER.value,
                classification="event",
                status=RunStatus.QUEUED.value,
                context_version=1,
                coalesced_count=1,
                requested_at=now,
                not_before=now,
            )
        )
    assert store.queue.claim(now=now, node_id="n", lease=LEASE, limit=1) == []  # head missing
    assert store.queue.reconcile_heads() == 1
    assert store.queue.reconcile_heads() == 0
    assert len(store.queue.claim(now=now, node_id="n", lease=LEASE, limit=1)) == 1


def test_an_early_head_left_by_a_cancellation_is_corrected_by_the_next_claim(
    office: Office,
) -> None:
    store, now = office.store, office.clock.now()
    _queue(office, hold=timedelta(0))
    with store.db.write() as conn:  # a path that empties the queue without the store's help
        conn.execute(
            sa.update(runs)
            .where(runs.c.agent_id == office.worker.id)
            .values(status=RunStatus.CANCELLED.value, reason=RunReason.CANCELLED_BY_USER.value)
        )
    assert _head(store, office.worker.id) == now
    assert store.queue.claim(now=now, node_id="n", lease=LEASE, limit=1) == []
    assert _head(store, office.worker.id) is None
