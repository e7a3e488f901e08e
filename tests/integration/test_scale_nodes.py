"""Several scheduler processes on one PostgreSQL schema (issue 10, items 3-6).

Two :class:`Service` instances with their own engines stand in for two ``office serve``
processes: maintenance leadership by lease with take-over, ``LISTEN/NOTIFY`` pokes
between them, and loops that survive their database connections being terminated. The
PostgreSQL tests need ``TEST_DATABASE_URL``; each uses its own schema, and only ever
terminates backends whose ``application_name`` names that schema (other test workers share
the server).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from office_scheduler.clock import SystemClock
from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import (
    Agent,
    ExecutorConfig,
    Run,
    WakeRequest,
    WorkspaceSettings,
)
from office_scheduler.domain.status import (
    AgentRole,
    RunReason,
    RunStatus,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.intake.rules import decide_merge
from office_scheduler.scheduler.listener import WakeListenerLoop
from office_scheduler.scheduler.loop import OwnedLoop, backoff_s
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.engine import open_database
from office_scheduler.store.facade import Store
from office_scheduler.store.leadership import Leadership
from office_scheduler.store.queue import IntakeResult
from office_scheduler.testing import FakeClock, ScriptedExecutor

TERMINAL = {RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED}


class _Flaky(OwnedLoop):
    def __init__(self, failures: int) -> None:
        super().__init__(name="flaky")
        self.failures = failures
        self.passes = 0

    async def run_pass(self) -> float:
        self.passes += 1
        if self.passes <= self.failures:
            raise ConnectionError(f"database gone (pass {self.passes})")
        return 60.0


async def test_a_failing_pass_is_retried_with_backoff_and_the_loop_survives() -> None:
    loop = _Flaky(failures=3)
    task = loop.start()
    deadline = time.monotonic() + 5
    while loop.passes < 4:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    snapshot = loop.health.snapshot()
    assert snapshot["state"] == "running"
    assert snapshot["failures"] == 0
    assert "database gone (pass 3)" in str(snapshot["last_error"])
    await loop.stop()
    assert task.done()
    assert loop.health.state == "stopped"
    assert [backoff_s(n) for n in (1, 2, 3, 10)] == [0.1, 0.2, 0.4, 5.0]


@pytest.fixture
def pg_schema(pg_admin_engine: sa.Engine) -> Iterator[tuple[str, str]]:
    """``(url, schema)`` of a fresh, migrated schema on the test server."""
    schema = f"t_{uuid.uuid4().hex}"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = pg_admin_engine.url.render_as_string(hide_password=False)
    db = open_database(url, schema=schema)
    migrate.upgrade(db)
    db.dispose()
    try:
        yield url, schema
    finally:
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


def _terminate(admin: sa.Engine, *, schema: str, pid: int | None = None) -> int:
    """Terminate this schema's backends (or one of them); returns how many were ended."""
    query = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name LIKE %(pattern)s AND pid <> pg_backend_pid()"
    )
    params: dict[str, object] = {"pattern": f"office-scheduler%{schema}"}
    if pid is not None:
        query += " AND pid = %(pid)s"
        params["pid"] = pid
    with admin.connect() as conn:
        return int(conn.exec_driver_sql(query, params).scalar_one())


@pytest.mark.postgres
def test_one_maintenance_leader_per_schema_and_take_over_when_its_lease_expires(
    pg_schema: tuple[str, str], pg_admin_engine: sa.Engine
) -> None:
    """Two processes' engines on one schema share one lease; another schema has its own.
    A holder whose connections are all terminated keeps its lease until it expires (it may
    only be frozen), and the other node takes it then, with the next epoch."""
    url, schema = pg_schema
    other_schema = f"{schema}_other"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{other_schema}"')
    dbs = [open_database(url, schema=schema) for _ in range(2)]
    other = open_database(url, schema=other_schema)
    clock = FakeClock()
    ttl = timedelta(seconds=6)
    first, second, elsewhere = (
        Leadership(db, node_id=name, clock=clock, ttl=ttl)
        for db, name in ((dbs[0], "first"), (dbs[1], "second"), (other, "elsewhere"))
    )
    try:
        migrate.upgrade(other)
        assert first.uses_lease
        assert first.ensure()
        assert not second.ensure()
        assert first.ensure()
        assert elsewhere.ensure(), "another schema has its own lease"

        assert _terminate(pg_admin_engine, schema=schema) >= 1
        clock.advance(ttl / 3)
        assert first.ensure(), "the pool reconnects: the lease is renewed"
        clock.advance(ttl)  # no renewal for a whole TTL: frozen, or its database gone
        assert first.term() is None
        assert second.ensure(), "the other node takes over"
        assert second.status()["epoch"] == 2
        assert not first.ensure()

        second.release()
        assert first.ensure()
        assert not second.ensure()
    finally:
        for leadership in (first, second, elsewhere):
            leadership.release()
        for db in (*dbs, other):
            db.dispose()
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{other_schema}" CASCADE')


class _SlowExecutor(ScriptedExecutor):
    """Succeeds after ``delay`` seconds of (fake) work."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        await asyncio.sleep(self.delay)
        return await super().run(launch, sink)


@dataclass
class _Nodes:
    api: Service  # loops not started: takes wakes in, like `office serve --no-scheduler`
    worker: Service  # runs the loops
    agents: list[Agent]
    schema: str


def _service(url: str, schema: str, tmp: Path, name: str, **tuning: object) -> Service:
    settings = Settings(
        home=tmp / name,
        database_url=url,
        node_id=name,
        safety_tick=timedelta(seconds=30),
        shutdown_grace=timedelta(seconds=1),
        **tuning,  # type: ignore[arg-type]
    )
    store = Store.from_database(open_database(url, schema=schema))
    return Service(
        settings, clock=SystemClock(), store=store, executors={"command": _SlowExecutor(0.05)}
    )


@pytest.fixture
async def nodes(pg_schema: tuple[str, str], tmp_path: Path) -> AsyncIterator[_Nodes]:
    url, schema = pg_schema
    tuning = {"lease": timedelta(seconds=2), "maintenance_interval": timedelta(seconds=0.2)}
    api = _service(url, schema, tmp_path, "api-node", **tuning)
    worker = _service(url, schema, tmp_path, "worker-node", **tuning)
    now = api.clock.now()
    workspace = api.store.office.create_workspace(
        name="scale",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(0),
            default_executor="fake",
            executors={"fake": ExecutorConfig(name="fake", argv=("agent",))},
        ),
        now=now,
    )
    agents = [
        api.store.office.create_agent(
            workspace_id=workspace.id,
            name=f"a{n}",
            role=AgentRole.WORKER,
            now=now,
            cooldown=timedelta(0),
        )
        for n in range(10)
    ]
    await worker.start()
    try:
        yield _Nodes(api=api, worker=worker, agents=agents, schema=schema)
    finally:
        await worker.close()
        await api.close()


async def _settled(store: Store, run_ids: list[int], timeout: float) -> list[RunStatus]:
    deadline = time.monotonic() + timeout
    while True:
        statuses = [await asyncio.to_thread(store.queue.get_run, rid) for rid in run_ids]
        if all(run.status in TERMINAL for run in statuses):
            return [run.status for run in statuses]
        assert time.monotonic() < deadline, [(r.id, r.status) for r in statuses]
        await asyncio.sleep(0.05)


@pytest.mark.postgres
async def test_a_wake_taken_in_by_one_process_is_claimed_by_an_idle_one_at_once(
    nodes: _Nodes,
) -> None:
    await asyncio.sleep(0.3)  # the worker is idle, resting on a 30 s safety tick
    latencies = []
    run_ids = []
    for agent in nodes.agents[:6]:
        result = await nodes.api.wake(agent.id)
        assert result.run is not None
        run_ids.append(result.run.id)
        [_] = await _settled(nodes.api.store, [result.run.id], timeout=10)
        run = await asyncio.to_thread(nodes.api.store.queue.get_run, result.run.id)
        assert run.claimed_by == "worker-node"
        assert run.claimed_at is not None
        latencies.append((run.claimed_at - run.requested_at).total_seconds())
        await asyncio.sleep(0.2)  # idle again before the next wake
    print(f"\nwake → claim across processes: {[round(x * 1000, 1) for x in latencies]} ms")
    # About 10 ms on a quiet machine; a loaded CI box (other workers on two cores) stretches
    # some of them, so only the best one must meet the 100 ms goal ...
    assert min(latencies) < 0.1, statistics.median(latencies)
    # ... and every one must be far below the 30 s safety tick: the notification did it.
    assert max(latencies) < 2.0
    assert nodes.worker.listener is not None
    assert nodes.worker.listener.received >= 6


async def _listener_connected(nodes: _Nodes) -> WakeListenerLoop:
    """Wait for the worker's wake listener (its first connect pokes the runs loop once)."""
    listener = nodes.worker.listener
    assert listener is not None
    deadline = time.monotonic() + 10
    while not listener.connected:
        assert time.monotonic() < deadline, "the wake listener never connected"
        await asyncio.sleep(0.05)
    return listener


async def _held_wake(nodes: _Nodes, agent: Agent, hold: timedelta) -> IntakeResult:
    """A comment wake for ``agent`` taken in through the API node, held for ``hold``."""
    request = WakeRequest(
        workspace_id=agent.workspace_id, agent_id=agent.id, source=WakeSource.COMMENT
    )
    result = await asyncio.to_thread(
        nodes.api.store.queue.enqueue,
        request,
        now=nodes.api.clock.now(),
        hold=hold,
        decide=decide_merge,
    )
    assert result.run is not None
    return result


@pytest.mark.postgres
async def test_a_held_wake_costs_an_idle_process_no_claim_until_it_is_due(
    nodes: _Nodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notification carries the run's first claimable instant: the idle process moves
    its next look to it instead of claiming at once (and again when the hold ends)."""
    listener = await _listener_connected(nodes)
    await asyncio.sleep(0.3)  # the worker is idle, resting on a 30 s safety tick
    queue = nodes.worker.store.queue
    claims: list[float] = []
    real_claim = queue.claim

    def counting_claim(**kwargs: Any) -> list[Run]:
        claims.append(time.monotonic())
        return real_claim(**kwargs)

    monkeypatch.setattr(queue, "claim", counting_claim)
    sent = time.monotonic()
    result = await _held_wake(nodes, nodes.agents[0], timedelta(seconds=1))
    assert result.run is not None
    assert result.due == result.run.not_before
    await _settled(nodes.api.store, [result.run.id], timeout=10)
    run = await asyncio.to_thread(nodes.api.store.queue.get_run, result.run.id)
    assert run.claimed_by == "worker-node"
    assert run.claimed_at is not None
    waited = (run.claimed_at - run.requested_at).total_seconds()
    # Claimed when the hold ended (a loaded machine may add a little), not at the 30 s tick.
    assert 1.0 <= waited < 5.0, waited
    assert claims[0] - sent >= 0.9, "the notification itself cost a claim attempt"
    assert listener.received >= 1


@pytest.mark.postgres
async def test_a_run_due_during_a_claim_pass_is_claimed_at_once_not_at_the_safety_tick(
    nodes: _Nodes,
) -> None:
    """A pass that looks a few ms before a held run is due claims nothing; the run must
    then count as due for the loop's next look (it was neither due nor "future" when the
    look after the pass asked for the next wake from a later instant)."""
    await _listener_connected(nodes)
    await asyncio.sleep(0.3)
    for agent, early_ms in zip(nodes.agents, (3, 5, 8), strict=False):
        held = await _held_wake(nodes, agent, timedelta(seconds=0.4))
        assert held.run is not None
        poke_at = held.run.not_before - timedelta(milliseconds=early_ms)
        await asyncio.sleep(max(0.0, (poke_at - nodes.api.clock.now()).total_seconds() - 0.02))
        while nodes.api.clock.now() < poke_at:
            pass  # spin the last few ms: the pass must start just before the hold ends
        nodes.worker.runs.poke()  # what a session ending in this process does
        deadline = time.monotonic() + 2.5
        while (await asyncio.to_thread(nodes.api.store.queue.get_run, held.run.id)).status is (
            RunStatus.QUEUED
        ):
            assert time.monotonic() < deadline, f"poked {early_ms} ms early: left for the tick"
            await asyncio.sleep(0.02)


@pytest.mark.postgres
async def test_an_agent_resumed_through_another_process_is_claimed_at_once(
    nodes: _Nodes,
) -> None:
    """Resuming makes the agent's waiting run claimable: the notification tells the idle
    scheduler process, which would otherwise wait for its 30 s safety tick."""
    await _listener_connected(nodes)
    agent = nodes.agents[0]
    await nodes.api.agents.pause(agent.id)
    waiting = await nodes.api.wake(agent.id)
    assert waiting.run is not None
    await asyncio.sleep(0.5)  # the worker looked, found the agent paused, and rests
    assert (await asyncio.to_thread(nodes.api.store.queue.get_run, waiting.run.id)).status is (
        RunStatus.QUEUED
    )
    resumed = time.monotonic()
    await nodes.api.agents.resume(agent.id)  # the API process runs no scheduler here
    await _settled(nodes.api.store, [waiting.run.id], timeout=5)
    run = await asyncio.to_thread(nodes.api.store.queue.get_run, waiting.run.id)
    assert run.claimed_by == "worker-node"
    assert time.monotonic() - resumed < 5


@pytest.mark.postgres
async def test_runs_requeued_by_another_process_are_claimed_at_once(nodes: _Nodes) -> None:
    """A stopping process puts its runs back in the queue: the others hear of it."""
    await _listener_connected(nodes)
    queue = nodes.api.store.queue
    now = nodes.api.clock.now()
    held = await _held_wake(nodes, nodes.agents[1], timedelta(minutes=1))
    assert held.run is not None
    [taken] = await asyncio.to_thread(  # a process that is about to stop claims it early
        queue.claim,
        now=now + timedelta(minutes=2),
        node_id="gone",
        lease=timedelta(minutes=5),
        limit=1,
    )
    assert taken.id == held.run.id
    requeued = time.monotonic()
    assert (
        await asyncio.to_thread(
            queue.requeue, [taken.id], reason=RunReason.INTERRUPTED, now=nodes.api.clock.now()
        )
        == 1
    )
    await _settled(nodes.api.store, [taken.id], timeout=5)
    run = await asyncio.to_thread(queue.get_run, taken.id)
    assert run.claimed_by == "worker-node"
    assert time.monotonic() - requeued < 5


@pytest.mark.postgres
async def test_loops_survive_terminated_connections_and_lose_no_wake(
    nodes: _Nodes, pg_admin_engine: sa.Engine
) -> None:
    api, worker = nodes.api, nodes.worker
    before = [(await api.wake(agent.id)).run for agent in nodes.agents]
    await asyncio.sleep(0.08)  # some sessions are running now
    killed = _terminate(pg_admin_engine, schema=nodes.schema)
    assert killed >= 1  # at least the listener
    after = [(await api.wake(agent.id)).run for agent in nodes.agents]
    run_ids = sorted({run.id for run in (*before, *after) if run is not None})
    await _settled(api.store, run_ids, timeout=40)
    # The listener reconnected: a fresh wake is still claimed without the safety tick.
    await asyncio.sleep(1.5)
    late = await api.wake(nodes.agents[0].id)
    assert late.run is not None
    await _settled(api.store, [late.run.id], timeout=10)
    run = await asyncio.to_thread(api.store.queue.get_run, late.run.id)
    assert run.claimed_at is not None
    assert (run.claimed_at - run.requested_at).total_seconds() < 2.0

    for agent in nodes.agents:
        wakeups = api.store.listing.list_wakeups(agent_id=agent.id, limit=100).items
        assert {w.status for w in wakeups} <= {WakeupStatus.CLAIMED, WakeupStatus.COALESCED}
        runs = api.store.listing.list_runs(agent_id=agent.id, limit=100).items
        assert any(r.status is RunStatus.FINISHED for r in runs), agent.name
    status = worker.node_status()
    assert worker.failed is not None
    assert not worker.failed.done(), "no loop ended"
    assert {name: loop["state"] for name, loop in status["loops"].items()} == {
        "runs": "running",
        "cron": "running",
        "maintenance": "running",
        "leader": "running",
        "notifications": "running",
        "wake_listener": "running",
    }
    assert status["maintenance_leader"] is True
    assert worker.listener is not None
    assert worker.listener.health.last_error is not None


@pytest.mark.postgres
async def test_a_stopping_leader_hands_over_at_once(nodes: _Nodes, tmp_path: Path) -> None:
    """The leader releases its lease when it stops: a waiting node leads on its next look,
    long before the lease would have expired."""
    url = nodes.api.settings.resolved_database_url
    worker = nodes.worker
    leading_by = time.monotonic() + 30
    while not worker.node_status()["maintenance_leader"]:
        assert time.monotonic() < leading_by, "the worker never led"
        await asyncio.sleep(0.05)
    tuning = {"maintenance_interval": timedelta(seconds=0.2), "leader_ttl": timedelta(minutes=10)}
    successor = _service(url, nodes.schema, tmp_path, "successor", **tuning)
    await successor.start()
    try:
        await worker.stop()
        deadline = time.monotonic() + 30
        while not successor.node_status()["maintenance_leader"]:
            assert time.monotonic() < deadline, "the released lease was not taken"
            await asyncio.sleep(0.05)
        assert successor.node_status()["leader"]["node_id"] == "successor"
    finally:
        await successor.close()
