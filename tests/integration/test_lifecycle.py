"""Process lifecycle: orphaned agents of a dead scheduler, and no database use after close."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import Agent, ExecutorConfig, WakeRequest, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunReason, RunStatus, WakeSource
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.intake.rules import decide_merge
from office_scheduler.scheduler.orphans import agent_pids
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _spawn(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A sleeping process with ``env``, returned once ``/proc`` shows that environment."""
    proc = subprocess.Popen(SLEEPER, env={**os.environ, **env}, start_new_session=True)
    marker = "\0".join(f"{k}={v}" for k, v in env.items()).encode()
    for _ in range(500):
        if marker in Path(f"/proc/{proc.pid}/environ").read_bytes():
            return proc
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("the spawned process never showed its environment")


def _dead(proc: subprocess.Popen[bytes]) -> bool:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return True


def _running_run(store: Store, clock: FakeClock, pid: int | None, session_id: str) -> int:
    now = clock.now()
    space = store.office.create_workspace(name="w", settings=WorkspaceSettings(), now=now)
    agent = store.office.create_agent(
        workspace_id=space.id, name="a", role=AgentRole.WORKER, now=now
    )
    result = store.queue.enqueue(
        WakeRequest(workspace_id=space.id, agent_id=agent.id, source=WakeSource.USER, hold=False),
        now=now,
        hold=timedelta(0),
        decide=decide_merge,
    )
    assert result.run is not None
    [run] = store.queue.claim(now=now, node_id="dead-node", lease=timedelta(hours=1), limit=1)
    assert store.queue.mark_running(
        run.id,
        expected_version=run.context_version,
        prompt="p",
        executor="x",
        session_id=session_id,
        now=now,
    )
    if pid is not None:
        store.queue.set_pid(run.id, pid, now=now)
    return run.id


def _agent_with_executor(store: Store, now: datetime, role: AgentRole) -> Agent:
    """An agent in a new workspace whose default executor is ``fake`` (the ``command`` kind)."""
    space = store.office.create_workspace(
        name="w",
        settings=WorkspaceSettings(
            default_executor="fake", executors={"fake": ExecutorConfig(name="fake", argv=("a",))}
        ),
        now=now,
    )
    return store.office.create_agent(workspace_id=space.id, name="a", role=role, now=now)


def test_agents_are_found_by_their_session_id() -> None:
    ours = _spawn({"OFFICE_SESSION_ID": "s41"})
    other = _spawn({"OFFICE_SESSION_ID": "s4"})
    try:
        assert agent_pids(["s41"]) == {"s41": [ours.pid]}
        assert agent_pids(["s411", ""]) == {}
        assert ours.poll() is None
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()


async def test_start_kills_orphaned_agents_before_requeueing_their_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/office.db"
    store = Store.open(url)
    migrate.upgrade(store.db)
    clock = FakeClock()
    bystander = _spawn({"OFFICE_SESSION_ID": "another-session"})
    # The recorded pid is the bystander's (a reused pid): it must not be what decides.
    run_id = _running_run(store, clock, pid=bystander.pid, session_id="orphan-session")
    orphan = _spawn({"OFFICE_SESSION_ID": "orphan-session"})
    service = Service(
        Settings(home=tmp_path), clock=clock, executors={"command": ScriptedExecutor()}, store=store
    )
    try:
        requeued = await service.recover_previous_process()
        assert requeued == [run_id]
        assert _dead(orphan)
        assert bystander.poll() is None  # a process of another session is never signalled
        run = store.queue.get_run(run_id)
        assert (run.status, run.reason, run.pid) == (RunStatus.QUEUED, RunReason.INTERRUPTED, None)
        kinds = [event.kind for event in store.runlog.list_run_events(run_id)]
        assert kinds[-2:] == ["orphan_killed", "requeued"], kinds
        assert await service.recover_previous_process() == []
    finally:
        for proc in (orphan, bystander):
            proc.kill()
            proc.wait()
        await service.close()


async def test_start_kills_orphans_before_the_loops_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/office.db"
    store = Store.open(url)
    migrate.upgrade(store.db)
    clock = FakeClock()
    # Killed right after spawning the agent: its pid was never recorded (regression).
    run_id = _running_run(store, clock, pid=None, session_id="unrecorded-pid")
    orphan = _spawn({"OFFICE_SESSION_ID": "unrecorded-pid"})
    service = Service(
        Settings(home=tmp_path), clock=clock, executors={"command": ScriptedExecutor()}, store=store
    )
    try:
        await service.start()
        assert _dead(orphan)
        assert store.queue.get_run(run_id).pid != orphan.pid
    finally:
        orphan.kill()
        orphan.wait()
        await service.close()


class HangingExecutor:
    """Starts a session that only ends when cancelled (shutdown)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        await sink.started(4242)
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "session-running"])
async def test_no_database_access_after_close(tmp_path: Path, busy: bool) -> None:
    url = f"sqlite:///{tmp_path}/office.db"
    store = Store.open(url)
    migrate.upgrade(store.db)
    executor: ScriptedExecutor | HangingExecutor = HangingExecutor() if busy else ScriptedExecutor()
    settings = Settings(
        home=tmp_path,
        safety_tick=timedelta(milliseconds=20),
        maintenance_interval=timedelta(milliseconds=20),
        shutdown_grace=timedelta(milliseconds=100),
    )
    service = Service(settings, executors={"command": executor}, store=store)
    now = service.clock.now()
    agent = _agent_with_executor(store, now, AgentRole.COORDINATOR)
    disposed = False
    statements_seen = 0
    after_dispose: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        nonlocal statements_seen
        statements_seen += 1
        if disposed:
            after_dispose.append(statement)

    for engine in {store.db.writer, store.db.reader}:
        sa.event.listen(engine, "before_cursor_execute", record)
    await service.start()
    await service.wake(agent.id)
    if isinstance(executor, HangingExecutor):
        await asyncio.wait_for(executor.started.wait(), 10)
    await asyncio.sleep(0.2)  # the loops tick many times
    assert statements_seen > 0  # the listener does see the loops' queries
    await service.close()  # disposes the database as its last step
    disposed = True
    await asyncio.sleep(0.2)  # anything left running would query now
    assert after_dispose == []


async def test_stop_gives_sessions_the_grace_then_requeues_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/office.db"
    store = Store.open(url)
    migrate.upgrade(store.db)
    executor = HangingExecutor()
    settings = Settings(home=tmp_path, shutdown_grace=timedelta(milliseconds=300))
    service = Service(settings, executors={"command": executor}, store=store)
    now = service.clock.now()
    agent = _agent_with_executor(store, now, AgentRole.WORKER)
    await service.start()
    result = await service.wake(agent.id)
    assert result.run is not None
    await asyncio.wait_for(executor.started.wait(), 10)
    assert store.queue.get_run(result.run.id).status is RunStatus.RUNNING
    loop = asyncio.get_running_loop()
    began = loop.time()
    await service.stop()
    waited = loop.time() - began
    run = store.queue.get_run(result.run.id)
    await service.close()
    assert waited >= 0.3  # the session had its grace period
    assert (run.status, run.reason, run.retry_count) == (
        RunStatus.QUEUED,
        RunReason.INTERRUPTED,
        0,
    )


async def test_a_lease_recovery_kills_the_dead_nodes_agents_before_requeueing(
    database: Database, tmp_path: Path
) -> None:
    """A node killed with SIGKILL leaves its sessions running; on both databases the node
    that recovers its expired leases kills them first, so the run never runs twice at once
    (found by the scale-out test once its agents' sessions lasted a few seconds)."""
    store = Store.from_database(database)
    clock = FakeClock()
    run_id = _running_run(store, clock, pid=None, session_id="dead-node-session")
    orphan = _spawn({"OFFICE_SESSION_ID": "dead-node-session"})
    bystander = _spawn({"OFFICE_SESSION_ID": "live-session"})
    service = Service(
        Settings(home=tmp_path), clock=clock, executors={"command": ScriptedExecutor()}, store=store
    )
    try:
        assert await service.maintenance.recover_stale_claims() == []  # lease still valid
        assert orphan.poll() is None
        clock.advance(timedelta(hours=2))
        assert await service.maintenance.recover_stale_claims() == [run_id]
        assert _dead(orphan)
        assert bystander.poll() is None
        assert store.queue.get_run(run_id).status is RunStatus.QUEUED
    finally:
        for proc in (orphan, bystander):
            proc.kill()
            proc.wait()
        await service.stop()
