"""A node that wakes up checks before it acts: lost attempts are abandoned, not ended.

A FakeClock stands in for the freeze: the node's clock jumps past its run's lease. Both
databases.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from helpers import Office
from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.status import OutcomeStatus, RunStatus, WorkflowKind
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.pipeline.context import RunContext
from office_scheduler.pipeline.steps import DEFAULT_STEPS
from office_scheduler.service import Service

LEASE = timedelta(seconds=60)


class GatedExecutor:
    """A session that runs until ``finish`` is set (then succeeds) or it is cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finish = asyncio.Event()
        self.cancelled = False

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        self.started.set()
        try:
            await self.finish.wait()
        except asyncio.CancelledError:
            self.cancelled = True  # a real executor stops the process group here
            raise
        return Outcome(status=OutcomeStatus.SUCCEEDED, result={"from": "the lost attempt"})


def _node(office: Office, tmp_path: Path, executor: GatedExecutor) -> Service:
    """A second scheduler node on the same database and clock (its loops not started)."""
    settings = Settings(home=tmp_path / "node", node_id="frozen-node", lease=LEASE)
    executors = {"command": executor}
    node = Service(settings, clock=office.clock, executors=executors, store=office.store)
    node.runs.shared = True  # a second node: it may lose its runs to the other one
    return node


async def _idle(service: Service) -> None:
    deadline = time.monotonic() + 30
    while service.runs.inflight:
        assert time.monotonic() < deadline, "the abandoned pipeline never ended"
        await asyncio.sleep(0.01)


async def test_a_renewal_that_finds_its_lease_expired_abandons_the_attempt(
    office: Office, tmp_path: Path
) -> None:
    executor = GatedExecutor()
    node = _node(office, tmp_path, executor)
    woken = await office.service.wake(office.worker.id)
    assert woken.run is not None
    run_id = woken.run.id
    assert await node.runs.claim_once() == 1
    await asyncio.wait_for(executor.started.wait(), 30)
    assert await node.runs.renew_leases() == [], "a current lease is renewed"

    office.clock.advance(LEASE + timedelta(seconds=1))  # frozen past its lease
    assert await node.runs.renew_leases() == [run_id]
    await _idle(node)
    assert executor.cancelled, "the agent session was stopped"
    run = office.store.queue.get_run(run_id)
    assert run.status is RunStatus.RUNNING, "the lost attempt wrote no end"
    events = office.store.runlog.list_run_events(run_id)
    [abandoned] = [e for e in events if e.kind == "attempt_abandoned"]
    assert abandoned.data["reason"] == "lease_expired"
    assert abandoned.data["node_id"] == "frozen-node"

    # The leader requeues it and it runs (once) elsewhere.
    assert office.store.queue.recover_expired_leases(now=office.clock.now()) == [run_id]
    await office.service.run_until_idle()
    run = office.store.queue.get_run(run_id)
    assert run.status is RunStatus.FINISHED
    kinds = [e.kind for e in office.store.runlog.list_run_events(run_id)]
    assert kinds.count("run_finished") == 1


async def test_a_lone_sqlite_process_that_slept_past_its_leases_keeps_its_sessions(
    office: Office, tmp_path: Path
) -> None:
    """Only a shared database lets another process requeue a run: alone, renew and go on."""
    executor = GatedExecutor()
    node = _node(office, tmp_path, executor)
    node.runs.shared = False  # as a lone SQLite scheduler is
    woken = await office.service.wake(office.worker.id)
    assert woken.run is not None
    run_id = woken.run.id
    assert await node.runs.claim_once() == 1
    await asyncio.wait_for(executor.started.wait(), 30)

    office.clock.advance(LEASE + timedelta(seconds=1))  # the laptop slept
    assert await node.runs.renew_leases() == []
    assert not executor.cancelled
    run = office.store.queue.get_run(run_id)
    assert run.lease_expires_at == office.clock.now() + LEASE
    executor.finish.set()
    await _idle(node)
    run = office.store.queue.get_run(run_id)
    assert run.status is RunStatus.FINISHED
    kinds = [e.kind for e in office.store.runlog.list_run_events(run_id)]
    assert "attempt_abandoned" not in kinds
    settings = Settings(home=tmp_path / "lone", node_id="lone-node", lease=LEASE)
    lone = Service(settings, clock=office.clock, executors={}, store=office.store)
    assert lone.runs.shared is (office.store.db.dialect == "postgresql")


async def test_an_attempt_whose_run_was_requeued_and_finished_elsewhere_writes_no_result(
    office: Office, tmp_path: Path
) -> None:
    executor = GatedExecutor()
    node = _node(office, tmp_path, executor)
    woken = await office.service.wake(office.worker.id)
    assert woken.run is not None
    run_id = woken.run.id
    assert await node.runs.claim_once() == 1
    await asyncio.wait_for(executor.started.wait(), 30)

    # While this node is frozen: its lease expires, the leader requeues the run, and
    # another node runs it to the end.
    office.clock.advance(LEASE + timedelta(seconds=1))
    assert office.store.queue.recover_expired_leases(now=office.clock.now()) == [run_id]
    await office.service.run_until_idle()
    finished = office.store.queue.get_run(run_id)
    assert finished.status is RunStatus.FINISHED

    executor.finish.set()  # the node wakes: its session reports success
    await _idle(node)
    run = office.store.queue.get_run(run_id)
    assert (run.status, run.result, run.finished_at) == (
        RunStatus.FINISHED,
        finished.result,
        finished.finished_at,
    ), "the late result changed nothing"
    events = office.store.runlog.list_run_events(run_id)
    assert [e.kind for e in events].count("run_finished") == 1
    [abandoned] = [e for e in events if e.kind == "attempt_abandoned"]
    assert abandoned.data["reason"] == "claim_lost"
    assert abandoned.data["status_now"] == "finished"


async def test_a_claim_taken_over_is_found_by_the_renewal(office: Office, tmp_path: Path) -> None:
    """The renewal finds the run no longer held by this claim: the session is stopped."""
    executor = GatedExecutor()
    node = _node(office, tmp_path, executor)
    woken = await office.service.wake(office.worker.id)
    assert woken.run is not None
    run_id = woken.run.id
    assert await node.runs.claim_once() == 1
    await asyncio.wait_for(executor.started.wait(), 30)
    later = office.clock.now() + LEASE + timedelta(seconds=1)
    assert office.store.queue.recover_expired_leases(now=later) == [run_id]
    assert await node.runs.renew_leases() == [run_id]
    await _idle(node)
    assert executor.cancelled
    [abandoned] = [
        e for e in office.store.runlog.list_run_events(run_id) if e.kind == "attempt_abandoned"
    ]
    assert abandoned.data["reason"] == "claim_lost"
    assert office.store.queue.get_run(run_id).status is RunStatus.QUEUED


@pytest.mark.parametrize("with_task", [True, False], ids=["task", "no-task"])
async def test_an_attempt_whose_run_was_claimed_again_never_launches_or_checks_out(
    office: Office, tmp_path: Path, with_task: bool
) -> None:
    """Frozen between its claim and its launch: the run was requeued and claimed by another
    node meanwhile. The stale attempt neither takes the task's checkout nor starts a session
    (its start is fenced by its claim), and records ``attempt_abandoned``."""
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def frozen_here(ctx: RunContext, call_next: Callable[[], Awaitable[None]]) -> None:
        entered.set()
        await gate.wait()
        await call_next()

    executor = GatedExecutor()
    settings = Settings(home=tmp_path / "node", node_id="frozen-node", lease=LEASE)
    node = Service(
        settings,
        clock=office.clock,
        executors={"command": executor},
        store=office.store,
        steps=(frozen_here, *DEFAULT_STEPS),
    )
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id, title="t", workflow=WorkflowKind.KANBAN
    )
    if with_task:  # the stale attempt would take the checkout before it launches
        woken = await office.service.queue_run(task.id, agent_id=office.worker.id)
    else:
        woken = await office.service.wake(office.worker.id)
    assert woken.run is not None
    run_id = woken.run.id
    assert await node.runs.claim_once() == 1
    await asyncio.wait_for(entered.wait(), 30)
    later = office.clock.now() + LEASE + timedelta(seconds=1)
    assert office.store.queue.recover_expired_leases(now=later) == [run_id]
    [again] = office.store.queue.claim(now=later, node_id="other-node", lease=LEASE, limit=1)
    assert again.id == run_id

    gate.set()
    await _idle(node)
    assert not executor.started.is_set(), "no session was launched"
    run = office.store.queue.get_run(run_id)
    assert (run.status, run.claimed_by) == (RunStatus.CLAIMED, "other-node")
    assert office.store.office.get_task(task.id).checkout_agent_id is None
    [abandoned] = [
        e for e in office.store.runlog.list_run_events(run_id) if e.kind == "attempt_abandoned"
    ]
    assert abandoned.data["reason"] == "claim_lost"
    assert abandoned.data["claimed_by_now"] == "other-node"
