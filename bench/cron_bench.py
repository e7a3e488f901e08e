"""Benchmark 4: cron maths and the cron loop's cost per tick.

* next fire: ``parse_schedule(expr, zone).next_fire(start)`` (cold: parse + one fire) and
  ``schedule.next_fire`` chained from the previous fire (warm), for 10 expressions x 5
  zones over the start instants of ``bench_cron.py`` (DST transitions included). Goal: mean
  < 1 ms each.
* tick: ``triggers`` enabled schedule triggers (``* * * * *`` and ``*/5 * * * *``, each
  its own lightweight routine for one of 50 agents), of which 100 are due; one
  ``CronFirer.fire_due()`` pass at the fake clock's instant (due query, compare-and-set
  claim of each due trigger, routine run, dispatch through intake) is timed, then a pass
  with nothing due; three times, each on a freshly seeded database, the median reported.
  Goal: < 200 ms with 100 due.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from bench import bench_cron
from bench.common import Results, migrated, profile_text, progress, scratch_dir
from bench.throughput import NoopExecutor
from bench.workload import build_office
from office_scheduler.config import Settings
from office_scheduler.cron import parse_schedule
from office_scheduler.service import Service
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import routine_triggers, routines
from office_scheduler.testing import FakeClock

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
    "0 0 29 2 *",
)
ZONES = ("", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu")
DUE = 100
NOW = datetime(2026, 4, 7, 10, 0, tzinfo=UTC)


def next_fire(results: Results) -> None:
    def cold() -> list[float]:
        out = []
        for expression in EXPRESSIONS:
            for zone in ZONES:
                for start in bench_cron.STARTS:
                    began = time.perf_counter()
                    parse_schedule(expression, zone).next_fire(start)
                    out.append((time.perf_counter() - began) * 1e6)
        return out

    def warm() -> list[float]:
        out = []
        for expression in EXPRESSIONS:
            for zone in ZONES:
                schedule = parse_schedule(expression, zone)
                for start in bench_cron.STARTS:
                    cursor = start
                    began = time.perf_counter()
                    for _ in range(20):
                        cursor = schedule.next_fire(cursor)
                    out.append((time.perf_counter() - began) * 1e6 / 20)
        return out

    cold()  # warm imports and zone caches
    for name, samples in (("cold (parse + next fire)", cold()), ("warm (next fire)", warm())):
        mean = statistics.fmean(samples)
        results.add(
            "4 cron",
            f"next fire {name}, {len(EXPRESSIONS)} exprs x {len(ZONES)} zones",
            1e6 / mean,
            "fires/s",
            goal="mean < 1 ms",
            ok=mean < 1000.0,
            note=f"mean {mean:.1f} us, max {max(samples):.0f} us, n={len(samples)}",
        )


def _seed_triggers(store: Store, agent_ids: list[str], workspace_id: str, count: int) -> None:
    minute = NOW.replace(second=0, microsecond=0)
    routine_rows, trigger_rows = [], []
    for n in range(count):
        routine_id = uuid.uuid4().hex
        routine_rows.append(
            {
                "id": routine_id,
                "workspace_id": workspace_id,
                "name": f"heartbeat {n}",
                "assignee_agent_id": agent_ids[n % len(agent_ids)],
                "status": "active",
                "concurrency_policy": "coalesce_if_active",
                "catch_up_policy": "enqueue_missed_with_cap",
                "catch_up_max": 25,
                "task_template": None,
                "variables": [],
                "created_at": NOW - timedelta(days=1),
                "updated_at": NOW - timedelta(days=1),
            }
        )
        due = n < DUE
        trigger_rows.append(
            {
                "id": uuid.uuid4().hex,
                "routine_id": routine_id,
                "kind": "schedule",
                "enabled": True,
                "cron_expression": "* * * * *" if n % 2 else "*/5 * * * *",
                "timezone": "" if n % 3 else "Europe/Berlin",
                "next_run_at": minute if due else minute + timedelta(hours=1),
                "created_at": NOW - timedelta(days=1),
            }
        )
    with store.db.write() as conn:
        conn.execute(sa.insert(routines), routine_rows)
        conn.execute(sa.insert(routine_triggers), trigger_rows)


async def _ticks(service: Service, rounds: int) -> tuple[list[float], list[float], int]:
    busy, idle = [], []
    fired = 0
    for _ in range(rounds):
        began = time.perf_counter()
        made = await service.cron_firer.fire_due()
        busy.append((time.perf_counter() - began) * 1000.0)
        fired += len(made)
        began = time.perf_counter()
        await service.cron_firer.fire_due()
        idle.append((time.perf_counter() - began) * 1000.0)
    return busy, idle, fired


#: Cron passes timed, each on a freshly seeded database (the figure is their median).
PASSES = 3


def _one_pass(
    triggers: int, profile: Results | None = None
) -> tuple[list[float], list[float], int]:
    """Seed ``triggers`` into a fresh SQLite file and time one busy and one idle pass."""
    with scratch_dir() as home, migrated(f"sqlite:///{home}/cron.db") as db:
        store = Store.from_database(db)
        office = build_office(store, 50, NOW - timedelta(days=1), home)
        _seed_triggers(store, office.agents, office.workspace, triggers)
        clock = FakeClock(NOW)
        service = Service(
            Settings(home=home / "office", database_url=db.url),
            clock=clock,
            executors={"command": NoopExecutor()},
            store=store,
        )
        if profile is None:
            return asyncio.run(_ticks(service, 1))
        out: list[tuple[list[float], list[float], int]] = []
        text = profile_text(lambda: out.append(asyncio.run(_ticks(service, 1))))
        profile.details["profile_cron_tick"] = text
        return out[0]


def tick(results: Results, *, triggers: int, profile: bool = False) -> None:
    if profile:
        busy, _, _ = _one_pass(triggers, profile=results)
        results.add(
            "profile",
            "cron pass under pyinstrument",
            busy[0],
            "ms",
            note="see details.profile_cron_tick",
        )
        return
    passes = [_one_pass(triggers) for _ in range(PASSES)]
    busy = [p[0][0] for p in passes]
    idle = [p[1][0] for p in passes]
    fired = passes[0][2]
    progress(
        f"cron tick: {fired} routine runs, busy {statistics.median(busy):.0f} ms "
        f"(of {', '.join(f'{b:.0f}' for b in busy)}), idle {statistics.median(idle):.1f} ms"
    )
    results.details["cron_tick"] = {
        "triggers": triggers,
        "due": DUE,
        "fired": fired,
        "busy_ms": busy,
        "idle_ms": idle,
    }
    results.add(
        "4 cron",
        f"cron pass, {triggers:,} triggers, {min(DUE, triggers)} due",
        statistics.median(busy),
        "ms",
        goal="< 200 ms",
        ok=statistics.median(busy) < 200.0,
        note=f"{fired} routine runs dispatched; median of {PASSES} passes",
    )
    results.add(
        "4 cron",
        f"cron pass, {triggers:,} triggers, none due",
        statistics.median(idle),
        "ms",
        note="idle pass",
    )


def run(results: Results, *, triggers: int) -> None:
    next_fire(results)
    tick(results, triggers=triggers)
