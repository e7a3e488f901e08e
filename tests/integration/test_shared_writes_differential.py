"""A group's shared writes leave exactly what wake-by-wake writes leave (seeded fuzz)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import Classification, WakeSource
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.schema import activity_log, agents, runs, wakeup_requests
from office_scheduler.store.shared_writes import SharedWrites


class _Rollback(Exception):
    pass


def _snapshot(conn: sa.Connection) -> dict[str, Any]:
    run_rows = conn.execute(sa.select(runs).order_by(runs.c.id)).mappings().all()
    wake_rows = (
        conn.execute(sa.select(wakeup_requests).order_by(wakeup_requests.c.id)).mappings().all()
    )
    act_rows = conn.execute(sa.select(activity_log).order_by(activity_log.c.id)).mappings().all()
    head_rows = conn.execute(
        sa.select(agents.c.id, agents.c.next_queued_at).order_by(agents.c.id)
    ).all()
    run_ix = {r["id"]: i for i, r in enumerate(run_rows)}
    wake_ix = {r["id"]: i for i, r in enumerate(wake_rows)}

    return {
        "runs": [
            (
                r["agent_id"],
                r["task_id"],
                r["status"],
                r["source"],
                r["classification"],
                r["not_before"],
                r["coalesced_count"],
                r["context_version"],
            )
            for r in run_rows
        ],
        "wakes": [(r["idempotency_key"], r["status"], run_ix.get(r["run_id"])) for r in wake_rows],
        "activity": [
            (
                a["kind"],
                a["agent_id"],
                a["task_id"],
                run_ix.get(a["run_id"]),
                {**a["data"], "wakeup_id": wake_ix.get(a["data"].get("wakeup_id"))},
                a["at"],
            )
            for a in act_rows
        ],
        "heads": [tuple(h) for h in head_rows],
    }


def _norm(results: list[IntakeResult], before: tuple[int, int], snap_ids: Any) -> list[Any]:
    return [
        (
            r.outcome.value,
            r.request.status.value,
            r.request.idempotency_key,
            None if r.run is None else snap_ids[r.run.id],
            r.due,
        )
        for r in results
    ]


@pytest.mark.parametrize("seed", range(12))
async def test_shared_writes_match_wake_by_wake(office: Office, seed: int) -> None:
    rng = random.Random(seed)
    store, queue, now = office.store, office.store.queue, office.clock.now()
    agent_ids = [office.worker.id, office.other_worker.id, office.coordinator.id]
    tasks = [
        store.office.create_task(workspace_id=office.workspace.id, title=f"t{n}", now=now).id
        for n in range(2)
    ]
    scopes = [None, *tasks]

    def request(key: str) -> WakeRequest:
        return WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=rng.choice(agent_ids),
            source=rng.choice([WakeSource.SELF, WakeSource.ROUTINE, WakeSource.USER]),
            classification=rng.choice([Classification.PERIODIC, Classification.EVENT]),
            payload={"k": key},
            task_id=rng.choice(scopes),
            idempotency_key=rng.choice([key, key, f"dup{rng.randrange(4)}", None]),
            hold=rng.random() < 0.6,
        )

    # Some runs before the group: queued (held or due), claimed; agents cooling down.
    for n in range(rng.randrange(7)):
        queue.enqueue(
            request(f"pre{n}"),
            now=now - timedelta(seconds=rng.randrange(8)),
            hold=timedelta(seconds=5),
            decide=decide_merge,
        )
    with store.db.write() as conn:
        ids = list(conn.execute(sa.select(runs.c.id)).scalars())
        for run_id in ids:
            status = rng.choice(
                ["queued", "claimed", "claimed", "running", "scheduled_retry", "finished"]
            )
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(status=status))
        for agent_id in agent_ids:
            if rng.random() < 0.3:
                conn.execute(
                    sa.update(agents)
                    .where(agents.c.id == agent_id)
                    .values(cooldown_until=now + timedelta(seconds=rng.randrange(1, 9)))
                )
    wakes = [request(f"w{n}") for n in range(rng.randrange(1, 16))]
    holds = [timedelta(seconds=rng.choice([0, 3, 5])) for _ in wakes]

    def run(shared_mode: bool) -> tuple[list[Any], dict[str, Any]]:
        got: list[Any] = []
        snap: dict[str, Any] = {}
        try:
            with store.db.transaction() as conn:
                shared = SharedWrites() if shared_mode else None
                results = [
                    queue.enqueue(
                        w,
                        now=now + timedelta(milliseconds=i),
                        hold=h,
                        decide=decide_merge,
                        shared=shared,
                    )
                    for i, (w, h) in enumerate(zip(wakes, holds, strict=True))
                ]
                if shared is not None:
                    queue.write_shared(shared)
                snap = _snapshot(conn)
                run_rows = list(conn.execute(sa.select(runs.c.id).order_by(runs.c.id)).scalars())
                run_ix = {rid: i for i, rid in enumerate(run_rows)}
                got = [
                    (
                        r.outcome.value,
                        r.request.status.value,
                        r.request.idempotency_key,
                        None if r.run is None else run_ix[r.run.id],
                        None if r.run is None else r.run.coalesced_count,
                        r.due,
                    )
                    for r in results
                ]
                raise _Rollback
        except _Rollback:
            pass
        return got, snap

    alone = run(False)
    together = run(True)
    assert alone[0]  # every wake has an outcome: the comparison is not of two empty sets
    assert alone[1]["wakes"]
    assert together[0] == alone[0]
    assert together[1] == alone[1]
