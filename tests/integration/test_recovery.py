"""Maintenance on both databases: recovery sweep, stale leases, late results, leaked checkouts."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers import Office
from office_scheduler.config import Settings
from office_scheduler.domain.events import TaskCreated
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import (
    ActivityEntry,
    Run,
    Task,
    WakeupRequest,
    WorkspaceSettings,
)
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    ErrorFamily,
    OutcomeStatus,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
    WorkflowKind,
)
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor

HOLD = timedelta(seconds=5)
LEASE = timedelta(seconds=60)


@pytest.fixture(autouse=True)
def _no_heartbeat(request: pytest.FixtureRequest) -> None:
    """Remove the coordinator's heartbeat routine: only the tested wakes create runs."""
    if "office" not in request.fixturenames:
        return
    office: Office = request.getfixturevalue("office")
    for routine in office.store.routines.list_routines(office.workspace.id):
        office.store.routines.delete_routine(routine.id)


def _lost_task(
    office: Office,
    title: str = "lost",
    *,
    assignee: str | None = None,
    workflow: WorkflowKind = WorkflowKind.OFFICE,
    project: bool = True,
    state: TaskState = TaskState.TODO,
) -> Task:
    """An assigned task created behind the service's back: its ``task_assigned`` wake is lost."""
    return office.store.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        now=office.clock.now(),
        project_id=office.project.id if project else None,
        workflow=workflow,
        assignee_agent_id=assignee or office.worker.id,
        state=state,
    )


def _activity(office: Office, kind: str, workspace_id: str | None = None) -> list[ActivityEntry]:
    page = office.store.runlog.list_activity(workspace_id or office.workspace.id, kind=kind)
    return page.items


def _assigned_wakes(office: Office, task: Task) -> list[WakeupRequest]:
    page = office.store.listing.list_wakeups(limit=500)
    found = [w for w in page.items if w.task_id == task.id and w.source is WakeSource.TASK_ASSIGNED]
    return sorted(found, key=lambda w: w.id)


def _task_runs(office: Office, task: Task) -> list[Run]:
    runs = office.store.listing.list_runs(task_id=task.id).items
    return sorted(runs, key=lambda r: r.id)


async def _sweep(office: Office) -> int:
    return await office.service.maintenance.recovery_sweep()


async def test_sweep_redelivers_a_lost_task_assigned_wake(office: Office) -> None:
    task = _lost_task(office)
    await office.service.maintenance.tick()
    [wake] = _assigned_wakes(office, task)
    assert wake.idempotency_key == f"task_assigned:{task.id}:{office.worker.id}"
    assert (wake.agent_id, wake.payload) == (
        office.worker.id,
        {"task_id": task.id, "recovery": True},
    )
    [run] = _task_runs(office, task)
    assert (run.status, run.agent_id) == (RunStatus.QUEUED, office.worker.id)
    [dispatch] = _activity(office, "recovery_dispatch")
    assert (dispatch.task_id, dispatch.agent_id, dispatch.run_id) == (
        task.id,
        office.worker.id,
        run.id,
    )
    [done] = _activity(office, "recovery_sweep_complete")
    assert done.data == {"dispatched_count": 1, "candidates": 1}
    # The queued run blocks a second dispatch; a finished one blocks it for good.
    assert await _sweep(office) == 0
    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    assert _task_runs(office, task)[0].status is RunStatus.FINISHED
    office.clock.advance(timedelta(hours=1))
    assert await _sweep(office) == 0
    assert len(_activity(office, "recovery_dispatch")) == 1
    assert len(_activity(office, "recovery_sweep_complete")) == 1


async def test_a_late_original_wake_dedupes_against_the_recovery(office: Office) -> None:
    task = _lost_task(office)
    assert await _sweep(office) == 1
    # The original event finally arrives: same key, so nothing new is queued.
    await office.service.bus.publish(TaskCreated(task=task))
    assert len(_assigned_wakes(office, task)) == 1
    assert len(_task_runs(office, task)) == 1


async def test_lookback_window_edges_per_workspace(office: Office) -> None:
    store = office.store
    settings = replace(office.workspace.settings, recovery_lookback_hours=2)
    store.office.update_workspace(office.workspace.id, now=office.clock.now(), settings=settings)
    other = store.office.create_workspace(
        name="beta", settings=WorkspaceSettings(), now=office.clock.now()
    )
    beta = store.office.create_agent(
        workspace_id=other.id, name="bea", role=AgentRole.WORKER, now=office.clock.now()
    )
    beta_task = store.office.create_task(
        workspace_id=other.id, title="beta", now=office.clock.now(), assignee_agent_id=beta.id
    )
    too_old = _lost_task(office, "too old")
    office.clock.advance(timedelta(seconds=1))
    edge = _lost_task(office, "edge")
    # Now `edge` is exactly 2 h old and `too_old` 2 h 1 s; beta's window is 24 h.
    office.clock.advance(timedelta(hours=2))
    assert await _sweep(office) == 2
    assert _assigned_wakes(office, too_old) == []
    assert len(_assigned_wakes(office, edge)) == 1
    assert len(_assigned_wakes(office, beta_task)) == 1
    [done] = _activity(office, "recovery_sweep_complete")
    assert done.data["dispatched_count"] == 1
    [beta_done] = _activity(office, "recovery_sweep_complete", other.id)
    assert beta_done.data["dispatched_count"] == 1
    # 24 h (beta's lookback) is inclusive too, 24 h 1 s is not; only creation time counts.
    beta_old = store.office.create_task(
        workspace_id=other.id, title="old", now=office.clock.now(), assignee_agent_id=beta.id
    )
    office.clock.advance(timedelta(seconds=1))
    beta_edge = store.office.create_task(
        workspace_id=other.id, title="edge", now=office.clock.now(), assignee_agent_id=beta.id
    )
    office.clock.advance(timedelta(hours=24))
    store.office.update_task(beta_old.id, now=office.clock.now(), changes={"title": "touched"})
    assert await _sweep(office) == 1
    assert _assigned_wakes(office, beta_old) == []
    assert len(_assigned_wakes(office, beta_edge)) == 1


async def test_paused_and_stopped_agents_are_skipped(office: Office) -> None:
    now = office.clock.now()
    office.store.office.update_agent(office.worker.id, now=now, status=AgentStatus.PAUSED)
    office.store.office.update_agent(office.other_worker.id, now=now, status=AgentStatus.STOPPED)
    paused = _lost_task(office, "paused")
    _lost_task(office, "stopped", assignee=office.other_worker.id)
    assert await _sweep(office) == 0
    assert _activity(office, "recovery_sweep_complete") == []
    office.store.office.update_agent(office.worker.id, now=now, status=AgentStatus.IDLE)
    assert await _sweep(office) == 1
    assert len(_assigned_wakes(office, paused)) == 1


async def test_tasks_with_a_queued_wake_are_skipped(office: Office) -> None:
    # Delivered normally: its run waits in the coalescing hold.
    delivered = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="delivered",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    # Lost, but someone else already has a queued run for it.
    lost = _lost_task(office)
    await office.service.queue_run(lost.id, agent_id=office.other_worker.id)
    assert await _sweep(office) == 0
    assert len(_assigned_wakes(office, delivered)) == 1
    assert _assigned_wakes(office, lost) == []


async def test_only_todo_office_tasks_are_recovered(office: Office) -> None:
    kanban = _lost_task(office, "kanban", workflow=WorkflowKind.KANBAN, project=False)
    started = _lost_task(office, "started", state=TaskState.IN_PROGRESS)
    archived = _lost_task(office, "archived")
    office.store.office.archive_task(archived.id, now=office.clock.now())
    office_board = _lost_task(office, "office board", project=False)
    assert await _sweep(office) == 1
    assert len(_assigned_wakes(office, office_board)) == 1
    for task in (kanban, started, archived):
        assert _assigned_wakes(office, task) == []


async def test_failed_runs_do_not_block_recovery_but_redispatches_are_capped(
    office: Office,
) -> None:
    office.executor._default = lambda _launch: Outcome(
        status=OutcomeStatus.FAILED, error_family=ErrorFamily.CONFIG, message="no such model"
    )
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="doomed",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    for _ in range(4):
        office.clock.advance(timedelta(seconds=15))
        await office.service.run_until_idle()
        assert _task_runs(office, task)[-1].reason is RunReason.CONFIG_ERROR
        await _sweep(office)
    base = f"task_assigned:{task.id}:{office.worker.id}"
    assert [w.idempotency_key for w in _assigned_wakes(office, task)] == [
        base,
        f"{base}:recovery:1",
        f"{base}:recovery:2",
        f"{base}:recovery:3",
    ]
    assert [r.status for r in _task_runs(office, task)] == [RunStatus.FAILED] * 4
    assert await _sweep(office) == 0


async def test_no_scan_until_some_workspace_has_an_agent(
    database: Database, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.from_database(database)
    service = Service(
        Settings(home=tmp_path / "plain"),
        clock=clock,
        executors={"command": ScriptedExecutor()},
        store=store,
    )
    space = store.office.create_workspace(
        name="plain", settings=WorkspaceSettings(), now=clock.now()
    )
    store.office.create_task(workspace_id=space.id, title="a", now=clock.now())
    scans: list[dict[str, Any]] = []
    real = store.queue.recovery_candidates

    def spy(**kwargs: Any) -> Any:
        scans.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(store.queue, "recovery_candidates", spy)
    await service.maintenance.tick()
    assert scans == []
    assert store.runlog.list_activity(space.id).items == []
    store.office.create_agent(
        workspace_id=space.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    await service.maintenance.tick()
    assert len(scans) == 1
    await service.stop()


async def test_expired_lease_requeues_and_a_late_result_is_rejected(office: Office) -> None:
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="t",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    office.clock.advance(HOLD)
    queue = office.store.queue
    [run] = queue.claim(now=office.clock.now(), node_id="node-a", lease=LEASE, limit=5)
    assert queue.checkout_task(
        task.id, agent_id=office.worker.id, run_id=run.id, now=office.clock.now()
    )
    office.clock.advance(LEASE)
    assert await office.service.maintenance.tick() == []  # expires strictly after the lease
    office.clock.advance(timedelta(seconds=1))
    assert await office.service.maintenance.tick() == [run.id]
    requeued = queue.get_run(run.id)
    assert (requeued.status, requeued.reason, requeued.claimed_by, requeued.retry_count) == (
        RunStatus.QUEUED,
        RunReason.INTERRUPTED,
        None,
        0,
    )
    assert office.store.office.get_task(task.id).checkout_agent_id is None
    # The crashed worker's late result (as success or as failure) changes nothing.
    assert _finish(office, run) is None
    assert _retry(office, run) is None
    # Claimed again, even by the same node: the first attempt's result is still stale.
    office.clock.advance(timedelta(seconds=1))
    [again] = queue.claim(now=office.clock.now(), node_id="node-a", lease=LEASE, limit=5)
    assert again.id == run.id
    assert _finish(office, run) is None
    assert _retry(office, run) is None
    assert queue.get_run(run.id).status is RunStatus.CLAIMED
    ended = _finish(office, again)
    assert ended is not None
    assert ended.status is RunStatus.FINISHED


def _finish(office: Office, attempt: Run) -> Run | None:
    """End ``attempt`` as its node would, fenced by that attempt's claim."""
    return office.store.queue.finish_run(
        attempt.id,
        status=RunStatus.FINISHED,
        reason=RunReason.COMPLETED,
        now=office.clock.now(),
        node_id="node-a",
        claimed_at=attempt.claimed_at,
    )


def _retry(office: Office, attempt: Run) -> Run | None:
    """Park ``attempt`` for a retry as its node would, fenced by that attempt's claim."""
    return office.store.queue.schedule_retry(
        attempt.id,
        retry_at=office.clock.now() + timedelta(minutes=2),
        reason=RunReason.AGENT_FAILED,
        error="late",
        now=office.clock.now(),
        node_id="node-a",
        claimed_at=attempt.claimed_at,
    )


class HangingExecutor:
    """A session that lives until released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        await sink.started(4242)
        self.started.set()
        await self.release.wait()
        return Outcome(status=OutcomeStatus.SUCCEEDED)


async def test_lease_is_renewed_while_the_session_lives(office: Office, tmp_path: Path) -> None:
    executor = HangingExecutor()
    settings = Settings(
        home=tmp_path / "live",
        lease=timedelta(milliseconds=300),
        safety_tick=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=50),
        shutdown_grace=timedelta(milliseconds=100),
    )
    service = Service(
        settings, clock=office.clock, executors={"command": executor}, store=office.store
    )
    await service.start()
    try:
        result = await service.wake(office.worker.id)
        assert result.run is not None
        await asyncio.wait_for(executor.started.wait(), 10)
        for _ in range(5):
            office.clock.advance(timedelta(milliseconds=250))
            await asyncio.sleep(0.3)
            run = office.store.queue.get_run(result.run.id)
            assert run.status is RunStatus.RUNNING
            assert run.lease_expires_at is not None
            assert run.lease_expires_at > office.clock.now()
        executor.release.set()
        for _ in range(200):
            if office.store.queue.get_run(result.run.id).status is RunStatus.FINISHED:
                break
            await asyncio.sleep(0.02)
        assert office.store.queue.get_run(result.run.id).status is RunStatus.FINISHED
    finally:
        executor.release.set()
        await service.stop()


async def test_leaked_checkouts_are_reaped(office: Office) -> None:
    queue = office.store.queue
    now = office.clock.now()
    ended_holder = _lost_task(office, "held by an ended run", assignee=office.other_worker.id)
    missing_holder = _lost_task(office, "held by a missing run")
    live_holder = _lost_task(office, "held by a live run")
    await office.service.wake(office.other_worker.id, task_id=ended_holder.id)
    await office.service.wake(office.worker.id, task_id=live_holder.id)
    claimed = {r.agent_id: r for r in queue.claim(now=now, node_id="n", lease=LEASE, limit=5)}
    finished = claimed[office.other_worker.id]
    queue.finish_run(finished.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=now)
    # A crash between the end of a run and the release of its checkout:
    assert queue.checkout_task(
        ended_holder.id, agent_id=office.other_worker.id, run_id=finished.id, now=now
    )
    assert queue.checkout_task(
        missing_holder.id, agent_id=office.worker.id, run_id=999_999, now=now
    )
    live = claimed[office.worker.id]
    assert queue.checkout_task(live_holder.id, agent_id=office.worker.id, run_id=live.id, now=now)
    assert await office.service.maintenance.reap_leaked_checkouts() == sorted(
        [ended_holder.id, missing_holder.id]
    )
    tasks = {
        t.id: t
        for t in (
            office.store.office.get_task(x.id) for x in (ended_holder, missing_holder, live_holder)
        )
    }
    assert tasks[ended_holder.id].checkout_agent_id is None
    assert tasks[missing_holder.id].checkout_run_id is None
    assert (tasks[live_holder.id].checkout_agent_id, tasks[live_holder.id].checkout_run_id) == (
        office.worker.id,
        live.id,
    )
    await office.service.maintenance.tick()
    assert office.store.office.get_task(live_holder.id).checkout_run_id == live.id
