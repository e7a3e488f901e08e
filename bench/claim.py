"""Benchmark 2 (and its PostgreSQL half in 3): claim latency against the queue's size.

1,000 agents; the queue grows through the sizes (10k → 100k → 1M by default) and at each
size one claim (``QueueStore.claim(limit=1)``, the runs loop's call, commit included) is
timed ``samples`` times in two shapes:

* ``uniform``: every agent idle, its runs spread evenly;
* ``blocked``: 90 % of the queued runs — and all of the oldest — belong to 900 agents that
  cannot start: 450 at their concurrency limit (a ``running`` run each) and 450 in cooldown.
  A claim that walks the queue in order would read 90 % of it before finding a free agent.

After each timed claim the claimed run is put back (status ``queued``, its ``claimed`` event
deleted), untimed, so every sample sees the same queue. The query plans of the claim's
statements at the largest size are stored in the results (``plans``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from bench.common import (
    Results,
    capture_sql,
    median,
    migrated,
    pct,
    pg_schema,
    plans_of,
    progress,
    scratch_dir,
)
from bench.seed import RUN_COLUMNS, analyze, copy_rows, run_row, seed_office
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.store.queue_heads import refresh_heads
from office_scheduler.store.schema import agents, run_events, runs

AGENTS = 1000
BLOCKED = 900  # agents 0..899: 0..449 at their limit, 450..899 in cooldown
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
FREE_FROM = NOW - timedelta(days=20)
LEASE = timedelta(minutes=5)


class Queue:
    """The seeded queue of one database, grown size by size."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.workspace, self.agents, _ = seed_office(db, AGENTS, NOW - timedelta(days=400))
        self.blocked_rows = 0
        self.free_rows = 0

    def grow_to(self, size: int) -> None:
        """Add queued runs until there are ``size``: 90 % blocked-agent rows, oldest first."""
        want_blocked = size * BLOCKED // AGENTS
        want_free = size - want_blocked
        add_blocked = range(self.blocked_rows, want_blocked)
        add_free = range(self.free_rows, want_free)

        def rows() -> Iterator[tuple[object, ...]]:
            # Newer blocked rows are older in time, so blocked rows always head the queue.
            for j in add_blocked:
                at = FREE_FROM - timedelta(milliseconds=j + 1)
                yield run_row(self.workspace, self.agents[j % BLOCKED], "queued", at)
            for j in add_free:
                at = FREE_FROM + timedelta(milliseconds=j)
                agent = self.agents[BLOCKED + j % (AGENTS - BLOCKED)]
                yield run_row(self.workspace, agent, "queued", at)

        copy_rows(self.db, "runs", RUN_COLUMNS, rows())
        self.blocked_rows, self.free_rows = want_blocked, want_free
        analyze(self.db)

    def shape(self, name: str) -> None:
        """Switch between ``uniform`` and ``blocked`` (agents' cooldowns and live runs)."""
        at_limit = self.agents[: BLOCKED // 2]
        cooling = self.agents[BLOCKED // 2 : BLOCKED]
        with self.db.write() as conn:
            conn.execute(
                sa.delete(runs).where(runs.c.status == "running", runs.c.agent_id.in_(at_limit))
            )
            conn.execute(sa.update(agents).values(cooldown_until=None))
            if name == "blocked":
                conn.execute(
                    sa.insert(runs),
                    [
                        {
                            "workspace_id": self.workspace,
                            "agent_id": agent,
                            "source": "user",
                            "classification": "event",
                            "status": "running",
                            "requested_at": NOW - timedelta(minutes=1),
                            "not_before": NOW - timedelta(minutes=1),
                            "claimed_at": NOW - timedelta(minutes=1),
                            "started_at": NOW - timedelta(minutes=1),
                            "lease_expires_at": NOW + timedelta(hours=1),
                        }
                        for agent in at_limit
                    ],
                )
                conn.execute(
                    sa.update(agents)
                    .where(agents.c.id.in_(cooling))
                    .values(cooldown_until=NOW + timedelta(hours=1))
                )


def _put_back(db: Database, run_id: int) -> None:
    with db.write() as conn:
        conn.execute(sa.delete(run_events).where(run_events.c.run_id == run_id))
        conn.execute(
            sa.update(runs)
            .where(runs.c.id == run_id)
            .values(status="queued", claimed_at=None, claimed_by=None, lease_expires_at=None)
        )
        owner = sa.select(runs.c.agent_id).where(runs.c.id == run_id).scalar_subquery()
        refresh_heads(conn, [conn.execute(sa.select(owner)).scalar_one()])


def measure(store: Store, samples: int, blocked: set[str]) -> tuple[list[float], int]:
    """Milliseconds per claim over ``samples`` claims (after 10 warm-up ones)."""
    taken: list[float] = []
    blocked_claims = 0
    for n in range(samples + 10):
        began = time.perf_counter()
        got = store.queue.claim(now=NOW, node_id="bench", lease=LEASE, limit=1)
        elapsed = (time.perf_counter() - began) * 1000.0
        if not got:
            raise RuntimeError("the claim found nothing: the seeded queue is wrong")
        if got[0].agent_id in blocked:
            blocked_claims += 1
        if n >= 10:
            taken.append(elapsed)
        _put_back(store.db, got[0].id)
    return taken, blocked_claims


def _run_one(results: Results, db: Database, label: str, sizes: list[int], samples: int) -> None:
    queue = Queue(db)
    store = Store.from_database(db)
    cells: dict[str, dict[int, float]] = {"uniform": {}, "blocked": {}}
    for size in sizes:
        began = time.perf_counter()
        queue.grow_to(size)
        progress(
            f"claim/{label}: seeded {size:,} queued runs in {time.perf_counter() - began:.1f} s"
        )
        for shape in ("uniform", "blocked"):
            queue.shape(shape)
            blocked = set(queue.agents[:BLOCKED]) if shape == "blocked" else set()
            taken, wrong = measure(store, samples, blocked)
            if wrong:
                raise RuntimeError(f"{wrong} claims went to blocked agents ({label}, {shape})")
            med, p99 = median(taken), pct(taken, 0.99)
            cells[shape][size] = med
            progress(f"claim/{label}: {shape:7} {size:>9,}: median {med:.2f} ms, p99 {p99:.2f} ms")
            results.details.setdefault(f"claim_{label}", {})[f"{shape}_{size}"] = {
                "median_ms": round(med, 3),
                "p99_ms": round(p99, 3),
                "samples": len(taken),
            }
            ok: bool | None = None
            goal = ""
            if size >= 100_000:
                base = cells[shape][sizes[0]]
                ok = med < 5.0 and (size < 1_000_000 or med <= 2 * base)
                goal = "med < 5 ms" + (", <= 2x 10k" if size >= 1_000_000 else "")
            results.add(
                f"2 claim {label}" if label == "sqlite" else f"3 claim {label}",
                f"claim latency {shape}, {size:,} queued",
                med,
                "ms median",
                goal=goal,
                ok=ok,
                note=f"p99 {p99:.2f} ms",
            )
            if size == sizes[-1]:
                with capture_sql(db) as seen:
                    got = store.queue.claim(now=NOW, node_id="bench", lease=LEASE, limit=1)
                _put_back(db, got[0].id)
                results.plans[f"claim {label} {shape} {size}"] = plans_of(db, seen)


def run(results: Results, *, sizes: list[int], samples: int, postgres: bool) -> None:
    """Claim latency on SQLite, and on PostgreSQL when it is reachable."""
    with scratch_dir() as home, migrated(f"sqlite:///{home}/claim.db") as db:
        _run_one(results, db, "sqlite", sizes, samples)
    if postgres:
        with ExitStack() as stack:
            url, schema = stack.enter_context(pg_schema())
            db = stack.enter_context(migrated(url, schema))
            _run_one(results, db, "postgres", sizes, samples)
