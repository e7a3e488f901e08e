"""Behaviours the specification asks for that nothing else protects, on both databases.

Recovery and cancelled runs, the maintenance loop's pace while retries are due, the runs
loop never sweeping, the defensive unique ``runs.idempotency_key``, ``Service.start()``
twice, and the coordinator heartbeat's exact wording.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.routines import HEARTBEAT_NAME
from office_scheduler.domain.status import (
    OutcomeStatus,
    RunStatus,
    WakeSource,
    WorkflowKind,
)
from office_scheduler.service import Service
from office_scheduler.store.schema import runs

HOLD = timedelta(seconds=5)


@pytest.fixture(autouse=True)
def _no_heartbeat(request: pytest.FixtureRequest) -> None:
    """Remove the coordinator's heartbeat routine: only the tested wakes create runs."""
    if "office" not in request.fixturenames or "heartbeat" in request.node.name:
        return
    office: Office = request.getfixturevalue("office")
    for routine in office.store.routines.list_routines(office.workspace.id):
        office.store.routines.delete_routine(routine.id)


async def test_a_cancelled_run_never_blocks_recovery(office: Office) -> None:
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="cancelled before it ran",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    [run] = office.store.listing.list_runs(task_id=task.id).items
    cancelled = await office.service.cancel_run(run.id)
    assert cancelled.status is RunStatus.CANCELLED
    assert await office.service.maintenance.recovery_sweep() == 1
    wakes = [
        w
        for w in office.store.listing.list_wakeups(agent_id=office.worker.id).items
        if w.source is WakeSource.TASK_ASSIGNED
    ]
    base = f"task_assigned:{task.id}:{office.worker.id}"
    assert sorted(w.idempotency_key or "" for w in wakes) == [base, f"{base}:recovery:1"]


async def test_the_runs_loop_never_runs_the_recovery_sweep(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweeps: list[int] = []

    async def sweep() -> int:
        sweeps.append(1)
        return 0

    monkeypatch.setattr(office.service.maintenance, "recovery_sweep", sweep)
    lost = office.store.office.create_task(
        workspace_id=office.workspace.id,
        title="its wake was lost",
        now=office.clock.now(),
        project_id=office.project.id,
        workflow=WorkflowKind.OFFICE,
        assignee_agent_id=office.worker.id,
    )
    office.clock.advance(timedelta(hours=1))
    await office.service.run_until_idle()
    await office.service.runs.claim_once()
    await office.service.runs.drain()
    assert sweeps == []
    assert office.store.listing.list_runs(task_id=lost.id).items == []
    await office.service.maintenance.tick()
    assert sweeps == [1]


async def test_recovery_runs_once_per_interval_while_retries_fall_due(
    office: Office, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(
        office.service.settings, home=tmp_path / "paced", maintenance_interval=timedelta(hours=1)
    )
    service = Service(
        settings, clock=office.clock, executors={"command": office.executor}, store=office.store
    )
    sweeps: list[int] = []

    async def sweep() -> int:
        sweeps.append(1)
        return 0

    monkeypatch.setattr(service.maintenance, "recovery_sweep", sweep)

    async def leading_pass() -> float:
        # On PostgreSQL maintenance runs under the leader lease, which the (not started)
        # leader loop would take: take it here.
        assert service.leadership.ensure()
        return await service.maintenance.run_pass()

    office.executor._default = lambda _launch: Outcome(status=OutcomeStatus.FAILED, message="x")
    try:
        task = await service.office.create_task(
            workspace_id=office.workspace.id,
            title="fails",
            project_id=office.project.id,
            assignee_agent_id=office.worker.id,
        )
        office.clock.advance(HOLD)
        await service.run_until_idle()
        [run] = office.store.listing.list_runs(task_id=task.id).items
        assert run.status is RunStatus.SCHEDULED_RETRY
        started = office.clock.now()
        pause = await leading_pass()
        assert sweeps == [1]
        assert pause == pytest.approx((run.not_before - started).total_seconds())
        # The retry falls due long before the next interval: it is promoted, no sweep.
        office.clock.advance(run.not_before - office.clock.now())
        await leading_pass()
        assert office.store.queue.get_run(run.id).status is RunStatus.QUEUED
        for _ in range(3):  # passes poked early change nothing either
            office.clock.advance(timedelta(seconds=2))
            assert await leading_pass() >= 1.0
        assert sweeps == [1]
        office.clock.advance(started + timedelta(hours=1) - office.clock.now())
        await leading_pass()
        assert sweeps == [1, 1]
    finally:
        await service.stop()


async def test_the_unique_run_key_refuses_a_second_run_for_a_key(office: Office) -> None:
    first = await office.service.wake(office.worker.id, idempotency_key="once")
    assert first.run is not None
    key = first.run.idempotency_key
    assert key == f"user:{office.worker.id}:once"
    values = {
        "workspace_id": office.workspace.id,
        "agent_id": office.worker.id,
        "source": WakeSource.USER.value,
        "classification": "event",
        "status": RunStatus.QUEUED.value,
        "idempotency_key": key,
        "requested_at": office.clock.now(),
        "not_before": office.clock.now(),
    }
    with pytest.raises(sa.exc.IntegrityError), office.store.db.write() as conn:
        conn.execute(sa.insert(runs).values(values))
    assert len(office.store.listing.list_runs(agent_id=office.worker.id).items) == 1


async def test_starting_the_service_twice_is_one_start(office: Office) -> None:
    service = office.service
    recovered: list[int] = []
    original = service.recover_previous_process

    async def counting() -> list[int]:
        recovered.append(1)
        return await original()

    service.recover_previous_process = counting  # type: ignore[method-assign]
    try:
        await service.start()
        loops = {task for task in asyncio.all_tasks() if task.get_name().endswith("-loop")}
        await service.start()
        again = {task for task in asyncio.all_tasks() if task.get_name().endswith("-loop")}
        assert again == loops
        assert {task.get_name() for task in loops} >= {"maintenance-loop"}
        assert len(recovered) <= 1
    finally:
        await service.stop()


async def test_the_heartbeat_has_the_specifications_description(office: Office) -> None:
    [heartbeat] = office.store.routines.list_routines(
        office.workspace.id, assignee_agent_id=office.coordinator.id
    )
    assert heartbeat.name == HEARTBEAT_NAME == "Coordinator heartbeat"
    assert heartbeat.description == (
        "Wakes the coordinator every 5 minutes to check workspace activity, react to errors "
        "and budget signals, and decide what to do next."
    )
