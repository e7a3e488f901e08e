"""Claims and intake under concurrency, on both databases (issue 10, items 1-2).

Several threads stand in for several processes: each has its own pooled connections and
its own node id, exactly what separate ``office serve`` processes have.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from helpers import Office, merged_wakes
from office_scheduler.domain.models import Agent, Run, WakeRequest
from office_scheduler.domain.status import (
    AgentRole,
    RunReason,
    RunStatus,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.facade import Store

LEASE = timedelta(seconds=60)


def _agents(office: Office, count: int) -> list[Agent]:
    now = office.clock.now()
    return [
        office.store.office.create_agent(
            workspace_id=office.workspace.id, name=f"w{n}", role=AgentRole.WORKER, now=now
        )
        for n in range(count)
    ]


def _queue(store: Store, office: Office, agent: Agent, tasks: int) -> list[int]:
    """Queue ``tasks`` runs for ``agent``, one per new task (so none of them merge)."""
    run_ids = []
    for n in range(tasks):
        task = store.office.create_task(
            workspace_id=office.workspace.id, title=f"{agent.name}-{n}", now=office.clock.now()
        )
        result = store.queue.enqueue(
            WakeRequest(
                workspace_id=office.workspace.id,
                agent_id=agent.id,
                source=WakeSource.QUEUE_RUN,
                task_id=task.id,
                payload={"task_id": task.id},
                hold=False,
            ),
            now=office.clock.now(),
            hold=timedelta(0),
            decide=decide_merge,
        )
        assert result.run is not None
        run_ids.append(result.run.id)
    return run_ids


def _claimed_events(store: Store, run_id: int) -> list[dict[str, object]]:
    return [
        dict(event.data)
        for event in store.runlog.list_run_events(run_id)
        if event.kind == "claimed"
    ]


async def test_a_batch_limit_of_n_claims_exactly_n_runs(office: Office) -> None:
    store = office.store
    agents = _agents(office, 6)
    for agent in agents:
        _queue(store, office, agent, 2)
    first = store.queue.claim(now=office.clock.now(), node_id="node-a", lease=LEASE, limit=4)
    assert len(first) == 4
    assert len({run.agent_id for run in first}) == 4  # one per agent per call
    second = store.queue.claim(now=office.clock.now(), node_id="node-b", lease=LEASE, limit=4)
    assert len(second) == 2  # only two agents have a free slot left
    assert {r.agent_id for r in second}.isdisjoint({r.agent_id for r in first})
    for run in first:
        assert _claimed_events(store, run.id) == [
            {
                "node_id": "node-a",
                "claimed_at": office.clock.now().isoformat(),
                "source": "queue_run",
                "attempt": 1,
                "retry_count": 0,
            }
        ]


async def test_claims_take_the_oldest_heads_first(office: Office) -> None:
    store = office.store
    agents = _agents(office, 3)
    order = []
    for agent in reversed(agents):
        order += _queue(store, office, agent, 1)
        office.clock.advance(timedelta(seconds=1))
    claimed = store.queue.claim(now=office.clock.now(), node_id="n", lease=LEASE, limit=2)
    assert [run.id for run in claimed] == order[:2]


async def test_four_racing_claimers_never_exceed_an_agents_limit(office: Office) -> None:
    store = office.store
    agents = _agents(office, 12)
    queued = 0
    for agent in agents:
        queued += len(_queue(store, office, agent, 4))
    now = office.clock.now()
    live: dict[str, set[int]] = defaultdict(set)
    guard = threading.Lock()
    violations: list[str] = []
    done: list[int] = []

    def claimer(node: str) -> None:
        rng = random.Random(node)
        held: list[Run] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with guard:
                if len(done) == queued:
                    return
            claimed = store.queue.claim(now=now, node_id=node, lease=LEASE, limit=1)
            with guard:
                for run in claimed:
                    live[run.agent_id].add(run.id)
                    if len(live[run.agent_id]) > 1:
                        violations.append(f"{run.agent_id}: {sorted(live[run.agent_id])}")
            held += claimed
            if held and (rng.random() < 0.6 or not claimed):
                run = held.pop(rng.randrange(len(held)))
                with guard:  # forget first: the database still counts it until it ends
                    live[run.agent_id].discard(run.id)
                    done.append(run.id)
                store.queue.finish_run(
                    run.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=now
                )

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(claimer, [f"node-{n}" for n in range(4)]))

    assert violations == []
    assert sorted(done) == sorted(set(done))
    assert len(done) == queued  # every run claimed and finished exactly once
    claims = Counter(
        str(event["node_id"]) for run_id in done for event in _claimed_events(store, run_id)
    )
    assert sum(claims.values()) == queued
    if store.db.dialect == "postgresql":  # SQLite serialises writers: one may take all
        assert len(claims) > 1  # the claimers really interleaved


async def test_concurrent_intakes_for_one_agent_merge_into_one_run(office: Office) -> None:
    store = office.store
    task = store.office.create_task(
        workspace_id=office.workspace.id, title="shared", now=office.clock.now()
    )
    wakes = 24

    def wake(n: int) -> None:
        store.queue.enqueue(
            WakeRequest(
                workspace_id=office.workspace.id,
                agent_id=office.worker.id,
                source=WakeSource.COMMENT,
                task_id=task.id,
                payload={"n": n},
                idempotency_key=f"race-{n % 20}",  # four keys are sent twice
            ),
            now=office.clock.now(),
            hold=timedelta(seconds=5),
            decide=decide_merge,
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(wake, range(wakes)))

    runs = store.listing.list_runs(agent_id=office.worker.id).items
    assert [(run.status, run.coalesced_count) for run in runs] == [(RunStatus.QUEUED, 20)]
    requests = store.listing.list_wakeups(agent_id=office.worker.id, limit=100).items
    assert len(requests) == 20
    assert Counter(r.status for r in requests) == {
        WakeupStatus.CLAIMED: 1,
        WakeupStatus.COALESCED: 19,
    }
    assert {r.run_id for r in requests} == {runs[0].id}
    assert len(merged_wakes(store, runs[0].id)) == 20
