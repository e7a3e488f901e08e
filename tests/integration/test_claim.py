"""The claim on both databases: concurrency limit, cooldown, agent status, order, leases."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.models import Run, WakeRequest
from office_scheduler.domain.status import (
    AgentStatus,
    RunReason,
    RunStatus,
    WakeSource,
    WorkflowKind,
)
from office_scheduler.store import queue_heads, run_transitions
from office_scheduler.store.schema import runs

LEASE = timedelta(seconds=60)


async def _queue(office: Office, agent_id: str, *, title: str) -> Run:
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id, title=title, workflow=WorkflowKind.KANBAN
    )
    result = await office.service.intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=agent_id,
            source=WakeSource.QUEUE_RUN,
            task_id=task.id,
            payload={"task_id": task.id},
            hold=False,
        )
    )
    assert result.run is not None
    return result.run


def _claim(office: Office, limit: int = 10) -> list[Run]:
    return office.store.queue.claim(
        now=office.clock.now(), node_id="node-a", lease=LEASE, limit=limit
    )


async def test_claim_honours_max_concurrent_sessions(office: Office) -> None:
    first = await _queue(office, office.worker.id, title="a")
    second = await _queue(office, office.worker.id, title="b")
    claimed = _claim(office)
    assert [r.id for r in claimed] == [first.id]
    assert _claim(office) == []  # limit 1 reached while the first is live
    office.store.queue.finish_run(
        first.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=office.clock.now()
    )
    assert [r.id for r in _claim(office)] == [second.id]


async def test_claim_allows_parallel_sessions_up_to_the_limit(office: Office) -> None:
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), max_concurrent_sessions=2
    )
    runs = [await _queue(office, office.worker.id, title=f"t{i}") for i in range(3)]
    assert [r.id for r in _claim(office)] == [runs[0].id]  # one per agent per pass
    assert [r.id for r in _claim(office)] == [runs[1].id]
    assert _claim(office) == []


async def test_claim_waits_for_the_cooldown_after_a_session(office: Office) -> None:
    queue = office.store.queue
    first = await _queue(office, office.worker.id, title="a")
    second = await _queue(office, office.worker.id, title="b")
    _claim(office)
    assert queue.mark_running(
        first.id,
        expected_version=1,
        prompt="p",
        executor="fake",
        session_id=None,
        now=office.clock.now(),
    )
    queue.finish_run(
        first.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=office.clock.now()
    )
    office.clock.advance(timedelta(seconds=9))
    assert _claim(office) == []  # default cooldown is 10 s
    office.clock.advance(timedelta(seconds=1))
    assert [r.id for r in _claim(office)] == [second.id]


async def test_skipped_run_without_session_does_not_start_a_cooldown(office: Office) -> None:
    first = await _queue(office, office.worker.id, title="a")
    second = await _queue(office, office.worker.id, title="b")
    _claim(office)
    office.store.queue.finish_run(
        first.id, status=RunStatus.CANCELLED, reason=RunReason.TASK_TERMINAL, now=office.clock.now()
    )
    assert [r.id for r in _claim(office)] == [second.id]


async def test_paused_agents_runs_wait_in_the_queue(office: Office) -> None:
    run = await _queue(office, office.worker.id, title="a")
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), status=AgentStatus.PAUSED
    )
    assert _claim(office) == []
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), status=AgentStatus.IDLE
    )
    assert [r.id for r in _claim(office)] == [run.id]


async def test_claim_is_in_request_order_across_agents(office: Office) -> None:
    a = await _queue(office, office.other_worker.id, title="a")
    office.clock.advance(timedelta(seconds=1))
    b = await _queue(office, office.worker.id, title="b")
    office.clock.advance(timedelta(seconds=1))
    c = await _queue(office, office.coordinator.id, title="c")
    claimed = _claim(office, limit=2)
    assert [r.id for r in claimed] == [a.id, b.id]
    assert all(r.status is RunStatus.CLAIMED and r.claimed_by == "node-a" for r in claimed)
    assert [r.id for r in _claim(office)] == [c.id]


async def test_busy_agents_at_the_head_do_not_hide_eligible_runs(office: Office) -> None:
    busy = [await _queue(office, office.worker.id, title=f"w{i}") for i in range(30)]
    _claim(office, limit=1)
    ready = await _queue(office, office.other_worker.id, title="ready")
    assert [r.id for r in _claim(office)] == [ready.id]
    assert office.store.queue.get_run(busy[1].id).status is RunStatus.QUEUED


async def test_expired_lease_goes_back_to_the_queue_and_releases_the_checkout(
    office: Office,
) -> None:
    run = await _queue(office, office.worker.id, title="a")
    _claim(office)
    assert run.task_id is not None
    assert office.store.queue.checkout_task(
        run.task_id, agent_id=office.worker.id, run_id=run.id, now=office.clock.now()
    )
    office.clock.advance(LEASE + timedelta(seconds=1))
    assert office.store.queue.recover_expired_leases(now=office.clock.now()) == [run.id]
    again = office.store.queue.get_run(run.id)
    assert again.status is RunStatus.QUEUED
    assert again.reason is RunReason.INTERRUPTED
    assert office.store.office.get_task(run.task_id).checkout_agent_id is None


async def test_renewed_lease_is_not_recovered(office: Office) -> None:
    run = await _queue(office, office.worker.id, title="a")
    _claim(office)
    office.clock.advance(timedelta(seconds=50))
    office.store.queue.renew_leases([run.id], node_id="node-a", now=office.clock.now(), lease=LEASE)
    office.clock.advance(timedelta(seconds=50))
    assert office.store.queue.recover_expired_leases(now=office.clock.now()) == []


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_renewal_never_holds_one_run_while_waiting_for_another(office: Office) -> None:
    """The free run is renewed (and committed) while the held one is still waited for, so
    the renewal cannot close a lock cycle; the held one is renewed once released."""
    held = await _queue(office, office.worker.id, title="a")
    free = await _queue(office, office.other_worker.id, title="b")
    assert {run.id for run in _claim(office)} == {held.id, free.id}
    office.clock.advance(timedelta(seconds=50))
    renewed_until = office.clock.now() + LEASE
    with office.store.db.writer.connect() as other:
        other.execute(sa.select(runs.c.id).where(runs.c.id == held.id).with_for_update())
        renewal = threading.Thread(
            target=office.store.queue.renew_leases,
            args=([held.id, free.id],),
            kwargs={"node_id": "node-a", "now": office.clock.now(), "lease": LEASE},
        )
        renewal.start()
        deadline = time.monotonic() + 10
        while office.store.queue.get_run(free.id).lease_expires_at != renewed_until:
            assert time.monotonic() < deadline, "the free run was not renewed"
            time.sleep(0.02)
        assert renewal.is_alive(), "the renewal should still wait for the held run"
        assert office.store.queue.get_run(held.id).lease_expires_at != renewed_until
        other.rollback()  # the row lock is held until here
        renewal.join(timeout=10)
    assert not renewal.is_alive()
    assert office.store.queue.get_run(held.id).lease_expires_at == renewed_until
    office.clock.advance(timedelta(seconds=50))
    assert office.store.queue.recover_expired_leases(now=office.clock.now()) == []


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_lease_renewed_while_recovery_looks_keeps_its_run_and_agent(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery reads expired runs again under the lock: a renewal committed between its
    first look and its lock must keep the run (and its agent process) alive."""
    run = await _queue(office, office.worker.id, title="a")
    _claim(office)
    office.clock.advance(LEASE + timedelta(seconds=1))
    now = office.clock.now()
    real_lock = queue_heads.lock_agents_of_runs
    killed: list[list[int]] = []

    def renew_then_lock(conn: sa.Connection, run_ids: list[int]) -> list[str]:
        renewal = threading.Thread(
            target=office.store.queue.renew_leases,
            args=([run.id],),
            kwargs={"node_id": "node-a", "now": now, "lease": LEASE},
        )
        renewal.start()  # the node renews just after recovery's first look
        renewal.join(timeout=10)
        return real_lock(conn, run_ids)

    def kill(runs_: list[Run]) -> list[int]:
        killed.append([r.id for r in runs_])
        return []

    monkeypatch.setattr(run_transitions, "lock_agents_of_runs", renew_then_lock)
    recovered = office.store.queue.recover_expired_leases(now=now, before_requeue=kill)
    assert (recovered, killed) == ([], [])
    assert office.store.queue.get_run(run.id).status is RunStatus.CLAIMED
