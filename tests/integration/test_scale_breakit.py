"""Hostile checks of the scale-out queue (issue 10): heads, races, lost connections, time.

Every path that puts a run in the queue (or makes one due sooner) must leave its agent's
queue head right, so the next claim at the run's due time finds it without the
maintenance loop's :meth:`reconcile_heads` safety net (which must find nothing to do).
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import psycopg.errors
import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.clock import SystemClock
from office_scheduler.domain.events import Event
from office_scheduler.domain.models import Agent, Run, WakeRequest, WorkspaceSettings
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    RunReason,
    RunStatus,
    WakeSource,
)
from office_scheduler.intake.rules import decide_merge
from office_scheduler.intake.service import Intake
from office_scheduler.store import migrate
from office_scheduler.store.engine import is_connection_lost, open_database
from office_scheduler.store.facade import Store
from office_scheduler.store.reconnect import retry_once_if_connection_lost
from office_scheduler.store.schema import agents

LEASE = timedelta(seconds=60)


def _head(store: Store, agent_id: str) -> datetime | None:
    with store.db.read() as conn:
        value = conn.execute(
            sa.select(agents.c.next_queued_at).where(agents.c.id == agent_id)
        ).scalar_one()
    return value  # type: ignore[no-any-return]


def _wake(
    store: Store,
    office: Office,
    agent_id: str,
    *,
    now: datetime,
    task_id: str | None = None,
    hold: timedelta = timedelta(0),
    source: WakeSource = WakeSource.COMMENT,
    key: str | None = None,
) -> Run:
    result = store.queue.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=agent_id,
            source=source,
            task_id=task_id,
            payload={"task_id": task_id} if task_id else {},
            idempotency_key=key,
            hold=hold > timedelta(0),
        ),
        now=now,
        hold=hold,
        decide=decide_merge,
    )
    assert result.run is not None
    return result.run


def _claim(store: Store, now: datetime, limit: int = 10) -> list[int]:
    return [r.id for r in store.queue.claim(now=now, node_id="n", lease=LEASE, limit=limit)]


def test_a_hand_over_after_an_end_before_launch_is_claimed_at_once(office: Office) -> None:
    store, now = office.store, office.clock.now()
    task = store.office.create_task(workspace_id=office.workspace.id, title="t", now=now)
    first = _wake(store, office, office.worker.id, now=now, task_id=task.id)
    assert _claim(store, now) == [first.id]
    # A wake merges into the claimed run after the pipeline read its context (version 1).
    merged = _wake(store, office, office.worker.id, now=now, task_id=task.id)
    assert merged.id == first.id
    assert merged.context_version == 2
    ended = store.queue.finish_run(
        first.id,
        status=RunStatus.FINISHED,
        reason=RunReason.COMPLETED,
        now=now,
        seen_version=1,
    )
    assert ended is not None
    assert _head(store, office.worker.id) == now
    [handed] = _claim(store, now)
    assert handed != first.id
    assert store.queue.get_run(handed).coalesced_count == 1
    assert store.queue.reconcile_heads() == 0


def test_runs_requeued_on_shutdown_and_lease_expiry_are_claimed_at_once(office: Office) -> None:
    store, now = office.store, office.clock.now()
    a = _wake(store, office, office.worker.id, now=now)
    b = _wake(store, office, office.other_worker.id, now=now)
    assert sorted(_claim(store, now)) == sorted([a.id, b.id])
    later = now + timedelta(seconds=5)
    assert store.queue.requeue([a.id], reason=RunReason.INTERRUPTED, now=later) == 1
    expired = now + LEASE + timedelta(seconds=1)
    assert store.queue.recover_expired_leases(now=expired) == [b.id]
    assert sorted(_claim(store, expired)) == sorted([a.id, b.id])
    assert store.queue.reconcile_heads() == 0


def test_a_merge_that_makes_a_held_run_due_moves_the_head(office: Office) -> None:
    store, now = office.store, office.clock.now()
    held = _wake(store, office, office.worker.id, now=now, hold=timedelta(seconds=30))
    assert _head(store, office.worker.id) == now + timedelta(seconds=30)
    assert _claim(store, now) == []
    soon = now + timedelta(seconds=1)
    user = _wake(store, office, office.worker.id, now=soon, source=WakeSource.USER)
    assert user.id == held.id
    assert user.not_before == soon
    assert _claim(store, soon) == [held.id]
    assert store.queue.reconcile_heads() == 0


def test_a_paused_agent_resumed_gets_its_waiting_run_claimed(office: Office) -> None:
    store, now = office.store, office.clock.now()
    store.office.change_agent_status(office.worker.id, AgentStatus.PAUSED, now=now)
    run = _wake(store, office, office.worker.id, now=now)
    assert _claim(store, now) == []  # paused agents are not claimed
    store.office.change_agent_status(office.worker.id, AgentStatus.IDLE, now=now)
    assert _claim(store, now) == [run.id]
    assert store.queue.reconcile_heads() == 0


def test_a_promoted_retry_due_in_the_past_is_claimed_at_once(office: Office) -> None:
    store, now = office.store, office.clock.now()
    run = _wake(store, office, office.worker.id, now=now)
    assert _claim(store, now) == [run.id]
    retry_at = now + timedelta(seconds=10)
    parked = store.queue.schedule_retry(
        run.id, retry_at=retry_at, reason=RunReason.AGENT_FAILED, error="x", now=now
    )
    assert parked is not None
    late = retry_at + timedelta(minutes=3)  # maintenance got to it late
    assert store.queue.promote_retry(run.id, now=late) is not None
    # Another wake of the agent queued meanwhile, due later than the retry's not_before.
    _wake(store, office, office.worker.id, now=late, hold=timedelta(seconds=30))
    assert _claim(store, late) == [run.id]
    assert store.queue.reconcile_heads() == 0


def test_heads_order_by_microseconds(office: Office) -> None:
    """SQLite keeps naive UTC text: heads a microsecond apart must still order right."""
    store, now = office.store, office.clock.now()
    base = now + timedelta(seconds=1)
    late = _wake(store, office, office.worker.id, now=base, hold=timedelta(microseconds=10))
    early = _wake(store, office, office.other_worker.id, now=base, hold=timedelta(microseconds=9))
    assert _head(store, office.worker.id) == base + timedelta(microseconds=10)
    assert _claim(store, base + timedelta(microseconds=8)) == []
    assert _claim(store, base + timedelta(microseconds=9)) == [early.id]
    assert _claim(store, base + timedelta(microseconds=10)) == [late.id]
    assert store.queue.reconcile_heads() == 0


def _agents(office: Office, count: int, *, limit: int) -> list[Agent]:
    now = office.clock.now()
    made = []
    for n in range(count):
        agent = office.store.office.create_agent(
            workspace_id=office.workspace.id,
            name=f"s{n}",
            role=AgentRole.WORKER,
            now=now,
            cooldown=timedelta(0),
        )
        made.append(
            office.store.office.update_agent(agent.id, now=now, max_concurrent_sessions=limit)
        )
    return made


def test_claimers_intakes_and_ends_racing_keep_limits_and_heads(office: Office) -> None:
    """4 claimers and 2 intake threads; hand-overs, retries and requeues mixed in."""
    store, now = office.store, office.clock.now()
    pool = _agents(office, 8, limit=2)
    tasks = [
        store.office.create_task(workspace_id=office.workspace.id, title=f"t{n}", now=now).id
        for n in range(6)
    ]
    guard = threading.Lock()
    live: Counter[str] = Counter()
    violations: list[str] = []
    claimed_ids: list[int] = []
    holding: set[int] = set()
    errors: list[BaseException] = []
    stop = threading.Event()
    limit_of = {agent.id: 2 for agent in pool}

    def intake(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for n in range(150):
                agent = rng.choice(pool)
                _wake(
                    store,
                    office,
                    agent.id,
                    now=now,
                    task_id=rng.choice([None, *tasks]),
                    source=rng.choice([WakeSource.COMMENT, WakeSource.USER]),
                    key=f"k{seed}-{n}" if rng.random() < 0.5 else None,
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    def claimer(seed: int) -> None:
        rng = random.Random(seed)
        held: list[Run] = []
        try:
            while not stop.is_set() or held:
                got = store.queue.claim(now=now, node_id=f"n{seed}", lease=LEASE, limit=2)
                with guard:
                    for run in got:
                        live[run.agent_id] += 1
                        claimed_ids.append(run.id)
                        if run.id in holding:
                            violations.append(f"run {run.id} claimed while held")
                        holding.add(run.id)
                        if live[run.agent_id] > limit_of[run.agent_id]:
                            violations.append(f"{run.agent_id}: {live[run.agent_id]}")
                held += got
                if not held:
                    if stop.is_set():
                        return
                    time.sleep(0.002)
                    continue
                run = held.pop(rng.randrange(len(held)))
                with guard:
                    live[run.agent_id] -= 1
                    holding.discard(run.id)
                # Once stopping, only finish: a requeue then would leave a run behind.
                roll = 1.0 if stop.is_set() else rng.random()
                if roll < 0.15:
                    store.queue.requeue([run.id], reason=RunReason.INTERRUPTED, now=now)
                elif roll < 0.25:
                    parked = store.queue.schedule_retry(
                        run.id, retry_at=now, reason=RunReason.AGENT_FAILED, error="x", now=now
                    )
                    assert parked is not None
                    store.queue.promote_retry(run.id, now=now)
                else:
                    store.queue.finish_run(
                        run.id,
                        status=RunStatus.FINISHED,
                        reason=RunReason.COMPLETED,
                        now=now,
                        seen_version=run.context_version,  # merged-after wakes hand over
                    )
        except BaseException as exc:  # reported below
            errors.append(exc)

    with ThreadPoolExecutor(max_workers=6) as threads:
        claimers = [threads.submit(claimer, n) for n in range(4)]
        intakes = [threads.submit(intake, 100 + n) for n in range(2)]
        for future in intakes:
            future.result()
        # Let the claimers drain what is left, then stop them.
        deadline = time.monotonic() + 60
        while store.queue.next_due_at() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for future in claimers:
            future.result()
    # A requeue decided just before the stop may land after the drain check: claim the rest.
    while leftover := store.queue.claim(now=now, node_id="drain", lease=LEASE, limit=50):
        claimed_ids.extend(run.id for run in leftover)
        for run in leftover:
            store.queue.finish_run(
                run.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=now
            )

    assert errors == []
    assert violations == []
    assert store.queue.next_due_at() is None, "every queued run was claimed"
    assert store.queue.reconcile_heads() == 0
    with store.db.read() as conn:  # every claim is recorded once in run_events
        events = conn.exec_driver_sql(
            "SELECT count(*) FROM run_events WHERE kind = 'claimed'"
        ).scalar_one()
    assert events == len(claimed_ids)


@pytest.fixture
def pg_store(pg_admin_engine: sa.Engine) -> Iterator[tuple[Store, str]]:
    schema = f"t_{uuid.uuid4().hex}"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    db = open_database(pg_admin_engine.url.render_as_string(hide_password=False), schema=schema)
    migrate.upgrade(db)
    try:
        yield Store.from_database(db), schema
    finally:
        db.dispose()
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_statement_timeout_or_deadlock_is_not_a_lost_connection() -> None:
    """A deadlock victim or a cancelled statement is not a dead connection (regression)."""
    for cause in (
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.SerializationFailure("could not serialize access"),
    ):
        error = sa.exc.OperationalError("UPDATE runs", {}, cause)
        assert not is_connection_lost(error), type(cause).__name__
    for lost in (
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.OperationalError("connection failed: Connection refused"),
    ):
        assert is_connection_lost(sa.exc.OperationalError("SELECT 1", {}, lost)), lost
    locked = sqlite3.OperationalError("database is locked")
    assert is_connection_lost(sa.exc.OperationalError("BEGIN", {}, locked))
    wrong = sqlite3.OperationalError("no such table: runz")
    assert not is_connection_lost(sa.exc.OperationalError("SELECT", {}, wrong))


@pytest.mark.postgres
@pytest.mark.timeout(180)  # a stress test: on a loaded two-core machine it can pass 60 s
async def test_keyed_wakes_survive_terminated_backends_exactly_once(
    pg_store: tuple[Store, str], pg_admin_engine: sa.Engine
) -> None:
    store, schema = pg_store
    clock = SystemClock()
    now = clock.now()
    workspace = store.office.create_workspace(
        name="w", settings=WorkspaceSettings(coalesce_window=timedelta(0)), now=now
    )
    team = [
        store.office.create_agent(
            workspace_id=workspace.id, name=f"a{n}", role=AgentRole.WORKER, now=now
        )
        for n in range(4)
    ]

    async def publish(_event: Event) -> None:
        return None

    intake = Intake(store, clock, poke=lambda at=None: None, publish=publish)
    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        while not stop.is_set():
            killed.append(_terminate(pg_admin_engine, schema))
            time.sleep(0.05)

    keys = [f"key-{n}" for n in range(200)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(killer)
        try:
            await _send_all(intake, workspace.id, team, keys)
        finally:
            stop.set()
        future.result()
    assert sum(killed) > 0

    def stored_keys() -> tuple[Counter[str], int]:
        with store.db.read() as conn:
            stored = Counter(
                conn.exec_driver_sql(
                    "SELECT idempotency_key FROM wakeup_requests WHERE idempotency_key IS NOT NULL"
                ).scalars()
            )
            unattached = conn.exec_driver_sql(
                "SELECT count(*) FROM wakeup_requests WHERE run_id IS NULL"
            ).scalar_one()
        return stored, int(unattached)

    # The killer's last round may have ended a pooled connection that is still fresh.
    stored, unattached = retry_once_if_connection_lost(lambda _retry: stored_keys())
    assert stored == Counter(keys)
    assert unattached == 0
    assert retry_once_if_connection_lost(lambda _retry: store.queue.reconcile_heads()) == 0


async def _send_all(intake: Intake, workspace_id: str, team: list[Agent], keys: list[str]) -> None:
    """Send one keyed wake per key; a client retries a failed call with the same key."""
    for n, key in enumerate(keys):
        request = WakeRequest(
            workspace_id=workspace_id,
            agent_id=team[n % len(team)].id,
            source=WakeSource.COMMENT,
            payload={"n": n},
            idempotency_key=key,
            hold=False,
        )
        for _attempt in range(50):
            try:
                await intake.enqueue(request)
                break
            except sa.exc.DBAPIError as exc:
                if not is_connection_lost(exc):
                    raise
        else:
            pytest.fail(f"{key} never got in")


def _terminate(admin: sa.Engine, schema: str) -> int:
    query = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name LIKE %(pattern)s AND pid <> pg_backend_pid()"
    )
    with admin.connect() as conn:
        return int(
            conn.exec_driver_sql(query, {"pattern": f"office-scheduler%{schema}"}).scalar_one()
        )
