"""Claimed runs per second with 1, 2 and 4 claiming processes on PostgreSQL.

``python bench/bench_scaleout.py [--seconds 8] [--agents 2000] [--batch 8] [--profile]``

Each round seeds a fresh schema with ``--agents`` agents (``max_concurrent_sessions`` 1, no
cooldown) and ten queued runs each, then starts N processes that each loop for
``--seconds``: claim up to ``--batch`` runs (``QueueStore.claim``, the runs loop's call) and
finish every claimed run (``QueueStore.finish_run``, one transaction each), which frees the
agent for the next claim. The figure is claimed runs per second over all processes. It
prints a Markdown table and the 4-vs-1 ratio; ``--profile`` adds a cProfile of one
single-process round (top functions by cumulative time) to explain where the time goes.

The database comes from ``BENCH_DATABASE_URL``, else ``TEST_DATABASE_URL``, else
``postgresql+psycopg://postgres@127.0.0.1:5432/test``; the schema is dropped afterwards.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing as mp
import os
import pstats
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.status import AgentRole, RunReason, RunStatus
from office_scheduler.store import migrate
from office_scheduler.store.engine import normalise_url, open_database
from office_scheduler.store.facade import Store
from office_scheduler.store.queue_heads import reconcile_heads
from office_scheduler.store.schema import runs

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
RUNS_PER_AGENT = 10
LEASE = timedelta(minutes=5)


def _url() -> str:
    return normalise_url(
        os.environ.get("BENCH_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL") or DEFAULT_URL
    )


def _seed(url: str, schema: str, agent_count: int) -> None:
    db = open_database(url, schema=schema)
    try:
        migrate.upgrade(db)
        store = Store.from_database(db)
        now = datetime.now(UTC)
        workspace = store.office.create_workspace(
            name="bench", settings=WorkspaceSettings(), now=now
        )
        agent_ids = [
            store.office.create_agent(
                workspace_id=workspace.id,
                name=f"b{n}",
                role=AgentRole.WORKER,
                now=now,
                cooldown=timedelta(0),
            ).id
            for n in range(agent_count)
        ]
        rows = [
            {
                "workspace_id": workspace.id,
                "agent_id": agent_id,
                "source": "user",
                "classification": "event",
                "status": RunStatus.QUEUED.value,
                "requested_at": now - timedelta(seconds=k),
                "not_before": now - timedelta(seconds=k),
            }
            for k in range(RUNS_PER_AGENT)
            for agent_id in agent_ids
        ]
        with db.write() as conn:
            conn.execute(sa.insert(runs), rows)
            reconcile_heads(conn)  # loaded behind the store's back
        with db.write() as conn:
            conn.exec_driver_sql("ANALYZE")  # as autovacuum would: the planner needs stats
    finally:
        db.dispose()


def _worker(
    url: str, schema: str, node: str, seconds: float, batch: int, start_at: float
) -> tuple[int, float]:
    """Claim and finish for ``seconds``; returns (claimed runs, CPU seconds this process used)."""
    store = Store.from_database(open_database(url, schema=schema, pool_size=2))
    claimed = 0
    try:
        time.sleep(max(0.0, start_at - time.time()))
        cpu = time.process_time()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            now = datetime.now(UTC)
            got = store.queue.claim(now=now, node_id=node, lease=LEASE, limit=batch)
            claimed += len(got)
            for run in got:
                store.queue.finish_run(
                    run.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=now
                )
        cpu = time.process_time() - cpu
    finally:
        store.close()
    return claimed, cpu


def _busy_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU jiffies of the whole machine from ``/proc/stat`` (Linux only)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


@dataclass(frozen=True)
class Cell:
    """One timed round: claimed runs/s and where the CPU went (in cores, over the window).

    ``machine_cores``: busy cores of the whole machine (claimers, PostgreSQL, the rest);
    ``claimer_cores``: the claiming processes' own CPU. ``None`` where ``/proc`` is missing.
    """

    rate: float
    machine_cores: float | None
    claimer_cores: float


def _round(url: str, processes: int, args: argparse.Namespace) -> Cell:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        _seed(url, schema, args.agents)
        start_at = time.time() + 1.5  # every process connected before the clock starts
        jobs = [
            (url, schema, f"node-{n}", args.seconds, args.batch, start_at) for n in range(processes)
        ]
        with mp.get_context("spawn").Pool(processes) as pool:
            pending = pool.starmap_async(_worker, jobs)
            time.sleep(max(0.0, start_at - time.time()))
            before = _busy_jiffies()
            time.sleep(args.seconds)
            after = _busy_jiffies()
            results = pending.get()
        cores = None
        if before is not None and after is not None and after[1] > before[1]:
            share = (after[0] - before[0]) / (after[1] - before[1])
            cores = share * (os.cpu_count() or 1)
        claimed = sum(count for count, _ in results)
        cpu = sum(seconds for _, seconds in results)
        return Cell(
            rate=float(claimed) / float(args.seconds),
            machine_cores=cores,
            claimer_cores=cpu / float(args.seconds),
        )
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


def _rate(cell: Cell) -> float:
    return cell.rate


def _profile(url: str, args: argparse.Namespace) -> str:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        _seed(url, schema, args.agents)
        profiler = cProfile.Profile()
        profiler.enable()
        _worker(url, schema, "node-p", args.seconds, args.batch, time.time())
        profiler.disable()
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def main() -> None:
    """Run the rounds and print the table (and the profile with ``--profile``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="rounds per cell (median)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    url = _url()
    cells: dict[int, Cell] = {}
    for processes in (1, 2, 4):
        rounds = sorted((_round(url, processes, args) for _ in range(args.repeat)), key=_rate)
        cells[processes] = rounds[len(rounds) // 2]  # the median round
    print(f"claim + finish, batch {args.batch}, {args.agents} agents, {args.seconds:.0f} s\n")
    print("| processes | claimed runs/s | vs 1 | machine cores busy | claimers' cores |")
    print("|---:|---:|---:|---:|---:|")
    one = cells[1].rate
    for processes, cell in cells.items():
        busy = "-" if cell.machine_cores is None else f"{cell.machine_cores:.2f}"
        print(
            f"| {processes} | {cell.rate:,.0f} | {cell.rate / one:.2f}x | {busy} |"
            f" {cell.claimer_cores:.2f} |"
        )
    print(f"\nratio 4 vs 1: {cells[4].rate / one:.2f}x")
    if args.profile:
        print("\ncProfile of one single-process round (cumulative):\n")
        print(_profile(url, args))


if __name__ == "__main__":
    main()
