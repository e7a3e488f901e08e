"""Benchmark 3 on PostgreSQL: throughput vs raw psycopg, scale-out, and procrastinate as peer.

* throughput: :mod:`bench.throughput` on PostgreSQL (product service, product store
  calls, raw ``psycopg`` loop), each in a private schema;
* scale-out: :mod:`bench.bench_scaleout` — claimed runs/s with 1, 2 and 4 processes
  calling ``QueueStore.claim`` + ``finish_run`` (goal: 4 processes ≥ 2x one);
* procrastinate (same server, its own private database): ``defer_async`` N no-op jobs one
  transaction each, then drain them with a worker (``wait=False``, concurrency 1, then 4);
  the defer → drain rate is N / (defer + drain seconds). Goal: the product's full
  wake → run → finish rate ≥ procrastinate's defer → drain rate.

(The claim-latency half of 3 runs inside :mod:`bench.claim`.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import sqlalchemy as sa

from bench import bench_scaleout, throughput
from bench.common import Results, pg_database, pg_url, progress


def _cores(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def scaleout(
    results: Results, *, seconds: float, agents: int, counts: tuple[int, ...] = (1, 2, 4)
) -> dict[int, float]:
    url = pg_url()
    args = argparse.Namespace(seconds=seconds, agents=agents, batch=8)
    rates: dict[int, float] = {}
    cells: dict[int, bench_scaleout.Cell] = {}
    for processes in counts:
        cell = cells[processes] = bench_scaleout._round(url, processes, args)
        rates[processes] = cell.rate
        progress(
            f"scale-out: {processes} process(es): {cell.rate:,.0f} claimed runs/s, "
            f"{_cores(cell.machine_cores)} cores busy ({cell.claimer_cores:.2f} in the claimers)"
        )
    results.details["scaleout_postgres"] = {
        "seconds": seconds,
        "agents": agents,
        "batch": 8,
        "claimed_runs_per_s": {str(k): round(v, 1) for k, v in rates.items()},
        "machine_cores_busy": {str(k): c.machine_cores for k, c in cells.items()},
        "claimer_cores": {str(k): round(c.claimer_cores, 2) for k, c in cells.items()},
    }
    for processes, rate in rates.items():
        ratio = rate / rates[1]
        cell = cells[processes]
        results.add(
            "3 scale-out postgres",
            f"claim+finish, {processes} scheduler process(es)",
            rate,
            "runs/s",
            goal=">= 2x 1 process" if processes == 4 else "",
            ok=ratio >= 2.0 if processes == 4 else None,
            note=(
                f"{ratio:.2f}x 1 process; {_cores(cell.machine_cores)} of "
                f"{os.cpu_count()} cores busy, {cell.claimer_cores:.2f} in the claimers"
            ),
        )
    return rates


async def _procrastinate(conninfo: str, jobs: int) -> dict[str, float]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo))
    done = 0

    @app.task(name="noop")
    async def noop() -> None:
        nonlocal done
        done += 1

    figures: dict[str, float] = {}
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for concurrency in (1, 4):
            done = 0
            began = time.perf_counter()
            for _ in range(jobs):
                await noop.defer_async()
            deferred = time.perf_counter() - began
            began = time.perf_counter()
            await app.run_worker_async(
                wait=False, concurrency=concurrency, install_signal_handlers=False
            )
            drained = time.perf_counter() - began
            if done != jobs:
                raise RuntimeError(f"procrastinate ran {done} of {jobs} jobs")
            figures[f"defer_per_s_c{concurrency}"] = jobs / deferred
            figures[f"drain_per_s_c{concurrency}"] = jobs / drained
            figures[f"defer_drain_per_s_c{concurrency}"] = jobs / (deferred + drained)
            progress(
                f"procrastinate c={concurrency}: defer {jobs / deferred:,.0f}/s, "
                f"drain {jobs / drained:,.0f}/s, defer→drain {jobs / (deferred + drained):,.0f}/s"
            )
    return figures


def peer(results: Results, *, jobs: int) -> dict[str, float]:
    with pg_database() as url:
        conninfo = sa.engine.make_url(url).set(drivername="postgresql")
        figures = asyncio.run(_procrastinate(conninfo.render_as_string(hide_password=False), jobs))
    results.details["procrastinate"] = {
        "jobs": jobs,
        **{k: round(v, 1) for k, v in figures.items()},
    }
    for concurrency in (1, 4):
        results.add(
            "3 peer procrastinate",
            f"procrastinate defer→drain, worker concurrency {concurrency}",
            figures[f"defer_drain_per_s_c{concurrency}"],
            "jobs/s",
            note=(
                f"defer {figures[f'defer_per_s_c{concurrency}']:,.0f}/s, "
                f"drain {figures[f'drain_per_s_c{concurrency}']:,.0f}/s, {jobs} jobs"
            ),
        )
    return figures


def run(
    results: Results,
    *,
    wakes: int,
    service_wakes: int,
    agents: int,
    seconds: float,
    jobs: int,
    smoke: bool,
) -> None:
    """All PostgreSQL parts of benchmark 3 except claim latency."""
    throughput.run(
        results,
        kind="postgres",
        wakes=wakes,
        service_wakes=service_wakes,
        agents=agents,
        slices=2 if smoke else 10,
    )
    counts = (1, 2) if smoke else (1, 2, 4)
    scaleout(results, seconds=seconds, agents=200 if smoke else 2000, counts=counts)
    figures = peer(results, jobs=jobs)
    ours = results.details["throughput_postgres"]["wakes_per_s"]["product"]
    theirs = max(figures["defer_drain_per_s_c1"], figures["defer_drain_per_s_c4"])
    results.add(
        "3 peer procrastinate",
        "product wake→run→finish vs best procrastinate defer→drain",
        ours / theirs,
        "ratio",
        goal="ratio >= 1",
        ok=ours >= theirs,
        note=f"{ours:,.0f} wakes/s vs {theirs:,.0f} jobs/s",
    )
