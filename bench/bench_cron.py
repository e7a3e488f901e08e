"""Micro-benchmark of ``office_scheduler.cron.next_fire``: ``python bench/bench_cron.py``.

Prints the mean microseconds per next-fire computation over a varied set of expressions and
zones, with start instants spread over several years (including DST transitions):

* cold: parse the expression and zone, then compute one next fire (what the scheduler does
  after each fire and what trigger validation does);
* warm: advance an already parsed schedule from its previous fire.

Exits 1 when either mean reaches the 1 ms budget.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from office_scheduler.cron import parse_schedule

BUDGET_US = 1000.0

EXPRESSIONS = (
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "30 1 * * *",
    "0 9 * * 1-5",
    "0 0 13 * 5",
    "15,45 8-18/2 * * mon-fri",
    "0 0 1 */3 *",
    "0 12 * jul-aug sun",
    "0 0 29 2 *",
    "0 0 29 2 1",
    "55 23 31 * *",
)
ZONES = (
    "",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kathmandu",
    "America/Santiago",
)
STARTS = (
    *(
        datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=37 * i, hours=5 * i, minutes=7 * i)
        for i in range(12)
    ),
    datetime(2026, 3, 8, 6, 50, tzinfo=UTC),  # New York spring forward
    datetime(2026, 11, 1, 5, 50, tzinfo=UTC),  # New York fall back
    datetime(2026, 10, 25, 0, 50, tzinfo=UTC),  # Berlin fall back
    datetime(2026, 10, 3, 15, 0, tzinfo=UTC),  # Lord Howe spring forward
)
WARM_STEPS = 20


def bench_cold() -> list[float]:
    """Microseconds per parse + next fire, one sample per (expression, zone, start)."""
    samples = []
    for expression in EXPRESSIONS:
        for zone in ZONES:
            for start in STARTS:
                began = time.perf_counter()
                parse_schedule(expression, zone).next_fire(start)
                samples.append((time.perf_counter() - began) * 1e6)
    return samples


def bench_warm() -> list[float]:
    """Microseconds per next fire on a parsed schedule, chaining from the previous fire."""
    samples = []
    for expression in EXPRESSIONS:
        for zone in ZONES:
            schedule = parse_schedule(expression, zone)
            for start in STARTS[:4]:
                cursor = start
                began = time.perf_counter()
                for _ in range(WARM_STEPS):
                    cursor = schedule.next_fire(cursor)
                samples.append((time.perf_counter() - began) * 1e6 / WARM_STEPS)
    return samples


def report(name: str, samples: list[float]) -> bool:
    mean = statistics.fmean(samples)
    worst = max(samples)
    p99 = statistics.quantiles(samples, n=100)[98]
    ok = mean < BUDGET_US
    print(
        f"{name:5} n={len(samples):5}  mean {mean:8.1f} us  p99 {p99:8.1f} us"
        f"  max {worst:8.1f} us  {'OK' if ok else 'OVER BUDGET'} (< {BUDGET_US:.0f} us)"
    )
    return ok


def main() -> int:
    bench_cold()  # warm up imports and zone caches
    cold = bench_cold()
    warm = bench_warm()
    print(f"next_fire over {len(EXPRESSIONS)} expressions x {len(ZONES)} zones")
    ok = report("cold", cold) & report("warm", warm)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
