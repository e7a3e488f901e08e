"""Benchmark 5: the Office recovery sweep and the idle-skip count with many tasks.

``tasks`` Office tasks (default 100,000) over 1,000 agents, created over the last 30 days
in every state (30 % TODO, 20 % IN_PROGRESS, 40 % DONE, 10 % CANCELLED); of the TODO tasks
inside the 24 h lookback, 95 % have a finished run of their assignee (their wake arrived)
and the rest are lost wakes the sweep must find. Timed, read-only, repeatable:

* one sweep query: ``QueueStore.recovery_candidates(limit=50)`` (the maintenance loop's);
* one idle-skip count: ``OfficeStore.count_actionable_tasks(agent)`` (the pipeline's).

The plans of both are stored in the results (``plans``).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta

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
    timed_ms,
)
from bench.seed import RUN_COLUMNS, analyze, copy_rows, run_row, seed_office
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
AGENTS = 1000
TASK_COLUMNS = (
    "id",
    "workspace_id",
    "workflow_id",
    "title",
    "description",
    "state",
    "assignee_agent_id",
    "requires_approval",
    "reviewers",
    "approvers",
    "created_at",
    "updated_at",
)


def _seed(db: Database, count: int) -> tuple[list[str], int]:
    workspace, agent_ids, flows = seed_office(db, AGENTS, NOW - timedelta(days=60))
    rng = random.Random(5)
    with_runs: list[tuple[str, str]] = []
    lost = 0

    def tasks() -> Iterator[tuple[object, ...]]:
        nonlocal lost
        for n in range(count):
            roll = rng.random()
            state = (
                "TODO"
                if roll < 0.3
                else "IN_PROGRESS"
                if roll < 0.5
                else "DONE"
                if roll < 0.9
                else "CANCELLED"
            )
            created = NOW - timedelta(seconds=rng.uniform(60, 30 * 86400))
            agent = agent_ids[n % AGENTS]
            task_id = uuid.uuid4().hex
            if state == "TODO" and NOW - created < timedelta(hours=24):
                if rng.random() < 0.95:
                    with_runs.append((task_id, agent))
                else:
                    lost += 1
            yield (
                task_id,
                workspace,
                flows["office"],
                f"task {n}",
                "",
                state,
                agent,
                False,
                json.dumps([]),
                json.dumps([]),
                created,
                created,
            )

    copy_rows(db, "tasks", TASK_COLUMNS, tasks())

    def runs() -> Iterator[tuple[object, ...]]:
        for task_id, agent in with_runs:
            row = run_row(workspace, agent, "finished", NOW - timedelta(minutes=5), finished=True)
            yield (*row[:2], task_id, *row[3:])

    copy_rows(db, "runs", RUN_COLUMNS, runs())
    analyze(db)
    return agent_ids, lost


def _one(results: Results, db: Database, label: str, count: int) -> None:
    agent_ids, lost = _seed(db, count)
    store = Store.from_database(db)
    progress(f"recovery/{label}: seeded {count:,} tasks ({lost} lost wakes)")
    found = store.queue.recovery_candidates(now=NOW, limit=50, max_redispatches=3)
    if len(found) != min(50, lost):
        raise RuntimeError(f"the sweep found {len(found)} candidates, expected {min(50, lost)}")
    sweep = timed_ms(
        lambda: store.queue.recovery_candidates(now=NOW, limit=50, max_redispatches=3), 30, 3
    )
    rng = random.Random(3)
    count_ms = timed_ms(lambda: store.office.count_actionable_tasks(rng.choice(agent_ids)), 200)
    bench = "5 recovery " + label
    results.add(
        bench,
        f"recovery sweep query, {count:,} tasks",
        median(sweep),
        "ms median",
        note=f"p99 {pct(sweep, 0.99):.2f} ms, {len(found)} candidates",
    )
    results.add(
        bench,
        f"idle-skip actionable count, {count:,} tasks",
        median(count_ms),
        "ms median",
        note=f"p99 {pct(count_ms, 0.99):.2f} ms",
    )
    with capture_sql(db) as seen:
        store.queue.recovery_candidates(now=NOW, limit=50, max_redispatches=3)
    results.plans[f"recovery sweep {label}"] = plans_of(db, seen)
    with capture_sql(db) as seen:
        store.office.count_actionable_tasks(agent_ids[0])
    results.plans[f"idle-skip count {label}"] = plans_of(db, seen)


def run(results: Results, *, tasks: int, postgres: bool) -> None:
    with scratch_dir() as home, migrated(f"sqlite:///{home}/recovery.db") as db:
        _one(results, db, "sqlite", tasks)
    if postgres:
        with ExitStack() as stack:
            url, schema = stack.enter_context(pg_schema())
            db = stack.enter_context(migrated(url, schema))
            _one(results, db, "postgres", tasks)
