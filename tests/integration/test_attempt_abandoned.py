"""A node that wakes up checks before it acts: lost attempts are abandoned, not ended.

A FakeClock stands in for the freeze: the node's clock jumps past its run's lease. Both
databases.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

from helpers import Office
from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.status import OutcomeStatus, RunStatus
from office_scheduler.executors.base import ExecutionSink
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
    return Service(settings, clock=office.clock, executors=executors, store=office.store)


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
