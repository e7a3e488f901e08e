"""Run the benchmark harness: ``python -m bench [--smoke] [--only NAME ...]``.

Prints one table (figure, goal, verdict, ratio or note per line) and writes
``bench/results.json`` (rows, query plans, profiles and raw details). See ``bench/README.md``.
Exit status: 0 when every benchmark ran (goals missed are reported, not fatal), 1 when one
of them crashed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bench.common import Results, pg_available, progress
from office_scheduler.cli.logs import configure_logging

BENCHES = (
    "throughput",
    "claim",
    "postgres",
    "scaleout",
    "cron",
    "recovery",
    "latency",
    "memory",
    "cli_help",
    "hot",
)
RESULTS_PATH = Path(__file__).resolve().parent / "results.json"


def _sizes(text: str) -> list[int]:
    try:
        values = [int(float(part)) for part in text.replace("_", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"sizes must be positive: {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds; CI)")
    parser.add_argument(
        "--only",
        action="append",
        choices=BENCHES,
        metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHES)}",
    )
    parser.add_argument("--wakes", type=int, help="throughput wakes on SQLite (default 20000)")
    parser.add_argument(
        "--service-wakes",
        type=int,
        help="wakes the product service processes of those (3000; 1/3 of it on PostgreSQL)",
    )
    parser.add_argument("--pg-wakes", type=int, help="throughput wakes on PostgreSQL (5000)")
    parser.add_argument(
        "--claim-sizes", type=_sizes, help="queued runs per claim size (10000,100000,1000000)"
    )
    parser.add_argument("--claim-samples", type=int, help="timed claims per cell (200)")
    parser.add_argument("--tasks", type=int, help="tasks of the recovery benchmark (100000)")
    parser.add_argument("--triggers", type=int, help="cron triggers of the tick benchmark (10000)")
    parser.add_argument("--memory-runs", type=int, help="runs in the memory benchmark (1000000)")
    parser.add_argument("--scaleout-seconds", type=float, help="seconds per scale-out round (8)")
    parser.add_argument("--jobs", type=int, help="procrastinate jobs deferred and drained (5000)")
    parser.add_argument(
        "--hot-wakes", type=int, help="wakes merged into the hot agent's one run (5000)"
    )
    parser.add_argument(
        "--hot-slice", type=int, help="merges timed at each size of the hot run (200)"
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip every PostgreSQL part")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="add a pyinstrument profile of the product's throughput hot path (SQLite)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS_PATH, help="results JSON path")
    args = parser.parse_args(argv)
    smoke = args.smoke
    defaults = {
        "wakes": 200 if smoke else 20_000,
        "service_wakes": 200 if smoke else 3_000,
        "pg_wakes": 150 if smoke else 5_000,
        "claim_sizes": [500, 2_000] if smoke else [10_000, 100_000, 1_000_000],
        "claim_samples": 20 if smoke else 200,
        "tasks": 2_000 if smoke else 100_000,
        "triggers": 300 if smoke else 10_000,
        "memory_runs": 5_000 if smoke else 1_000_000,
        "scaleout_seconds": 1.0 if smoke else 8.0,
        "jobs": 100 if smoke else 5_000,
        "hot_wakes": 500 if smoke else 5_000,
        "hot_slice": 50 if smoke else 200,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in (
        "wakes",
        "service_wakes",
        "pg_wakes",
        "claim_samples",
        "tasks",
        "triggers",
        "memory_runs",
        "jobs",
        "hot_wakes",
        "hot_slice",
    ):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    return args


def _benches(args: argparse.Namespace, postgres: bool) -> dict[str, Callable[[Results], None]]:
    from bench import (
        claim,
        cli_help,
        cron_bench,
        hot_agent,
        latency,
        memory,
        postgres_bench,
        recovery,
        scaleout_processes,
        throughput,
    )

    agents = 50 if args.smoke else 200
    out: dict[str, Callable[[Results], None]] = {
        "throughput": lambda r: throughput.run(
            r,
            kind="sqlite",
            wakes=args.wakes,
            agents=agents,
            service_wakes=args.service_wakes,
            slices=4 if args.smoke else 20,
        ),
        "claim": lambda r: claim.run(
            r, sizes=args.claim_sizes, samples=args.claim_samples, postgres=postgres
        ),
        "cron": lambda r: cron_bench.run(r, triggers=args.triggers),
        "recovery": lambda r: recovery.run(r, tasks=args.tasks, postgres=postgres),
        "latency": lambda r: latency.run(r, samples=10 if args.smoke else 100, smoke=args.smoke),
        "memory": lambda r: memory.run(r, runs=args.memory_runs, smoke=args.smoke),
        "cli_help": lambda r: cli_help.run(r, samples=3 if args.smoke else 7),
        "hot": lambda r: hot_agent.run(r, wakes=args.hot_wakes, size=args.hot_slice),
    }
    if postgres:
        out["postgres"] = lambda r: postgres_bench.run(
            r,
            wakes=args.pg_wakes,
            service_wakes=max(1, args.service_wakes // 3),
            agents=agents,
            seconds=args.scaleout_seconds,
            jobs=args.jobs,
            smoke=args.smoke,
        )
    if postgres and not args.smoke:  # minutes of real processes: never in --smoke
        out["scaleout"] = lambda r: scaleout_processes.run(r)
    if args.profile:

        def profiles(r: Results) -> None:
            throughput.profile(r, wakes=min(args.service_wakes, 1500), agents=agents)
            cron_bench.tick(r, triggers=args.triggers, profile=True)

        out["profile"] = profiles
    return out


def print_table(results: Results) -> None:
    """The table: one line per figure, with its goal and verdict."""
    header = f"| {'benchmark':24} | {'measure':52} | {'value':>12} | {'unit':9} | goal | note |"
    print(header)
    print("|" + "|".join("-" * (len(part) + 0) for part in header.split("|")[1:-1]) + "|")
    for row in results.rows:
        verdict = "" if row.ok is None else ("OK" if row.ok else "MISSED")
        goal = f"{row.goal} {verdict}".strip()
        value = f"{row.value:,.2f}" if abs(row.value) < 100 else f"{row.value:,.0f}"
        print(
            f"| {row.bench:24} | {row.name:52} | {value:>12} | {row.unit:9} | {goal} | {row.note} |"
        )
    for name, error in results.errors.items():
        print(f"| {name:24} | FAILED: {error.splitlines()[-1]} |")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(0)
    results = Results()
    reason = None if args.no_postgres else pg_available()
    postgres = not args.no_postgres and reason is None
    if reason is not None:
        results.errors["postgres"] = f"PostgreSQL unreachable, its parts skipped: {reason}"
    benches = _benches(args, postgres)
    wanted = [name for name in (*BENCHES, "profile") if name in benches]
    if args.only:
        wanted = [name for name in wanted if name in args.only or name == "profile"]
    began = time.perf_counter()
    for name in wanted:
        progress(f"[{name}] starting ({time.perf_counter() - began:.0f} s elapsed)")
        started = time.perf_counter()
        try:
            benches[name](results)
        except Exception:
            results.errors[name] = traceback.format_exc()
            print(results.errors[name], file=sys.stderr)
        results.details.setdefault("seconds", {})[name] = round(time.perf_counter() - started, 1)
    results.details["total_seconds"] = round(time.perf_counter() - began, 1)
    results.details["environment"] = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": platform.machine(),
        "cpus": _cpus(),
        "smoke": args.smoke,
    }
    print_table(results)
    payload = {
        "rows": [asdict(row) for row in results.rows],
        "plans": results.plans,
        "details": results.details,
        "errors": results.errors,
    }
    args.output.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"\nwrote {args.output} ({results.details['total_seconds']} s)")
    crashed = [name for name in results.errors if name != "postgres"]
    return 1 if crashed else 0


def _cpus() -> int:
    import os

    return os.cpu_count() or 0
