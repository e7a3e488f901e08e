"""Dashboard page times with 10,000 runs and 1,000 tasks in the database.

Seeds a SQLite file through the store (bulk inserts for the runs and their wake requests
and events), then requests every page through the ASGI app with httpx (signed in with the
session cookie) and prints the median and worst of several requests per page. The target
is every page under 300 ms.

    .venv/bin/python bench/bench_dashboard.py [--runs 10000] [--tasks 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa

from office_scheduler.api import create_app
from office_scheduler.auth import TokenService
from office_scheduler.config import Settings
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.status import AgentRole, TaskState
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import activity_log, run_events, runs, wakeup_requests

TARGET_MS = 300.0
OUTCOMES = [
    ("finished", "completed"),
    ("finished", "no_actionable_tasks"),
    ("finished", "blocked"),
    ("failed", "agent_failed"),
    ("cancelled", "task_terminal"),
]


def seed(store: Store, *, n_runs: int, n_tasks: int, now: datetime) -> tuple[str, str, str]:
    """Workspace, 5 agents, ``n_tasks`` tasks, ``n_runs`` runs; returns ids to visit."""
    ws = store.office.create_workspace(name="bench", settings=WorkspaceSettings(), now=now)
    agents = [
        store.office.create_agent(
            workspace_id=ws.id, name=f"agent-{i}", role=AgentRole.WORKER, now=now
        )
        for i in range(5)
    ]
    states = list(TaskState)
    task_ids = [
        store.office.create_task(
            workspace_id=ws.id,
            title=f"Task {i}",
            now=now,
            assignee_agent_id=agents[i % 5].id,
            state=states[i % len(states)],
        ).id
        for i in range(n_tasks)
    ]
    rng = random.Random(7)
    rows, requests, events, activity = [], [], [], []
    for i in range(n_runs):
        at = now - timedelta(minutes=rng.randint(0, 60 * 24 * 20))
        status, reason = OUTCOMES[i % len(OUTCOMES)] if i % 50 else ("queued", None)
        agent = agents[i % 5].id
        task = task_ids[i % n_tasks]
        rows.append(
            {
                "workspace_id": ws.id,
                "agent_id": agent,
                "task_id": task,
                "source": "task_assigned",
                "classification": "event",
                "status": status,
                "reason": reason,
                "requested_at": at,
                "not_before": at,
                "finished_at": at if status != "queued" else None,
                "prompt": "You were woken because ..." * 20,
            }
        )
        requests.append(
            {
                "workspace_id": ws.id,
                "agent_id": agent,
                "task_id": task,
                "source": "task_assigned",
                "classification": "event",
                "payload": {},
                "status": "claimed",
                "run_id": i + 1,
                "requested_at": at,
            }
        )
        activity.append(
            {
                "workspace_id": ws.id,
                "at": at,
                "kind": "run_finished",
                "agent_id": agent,
                "task_id": task,
                "run_id": i + 1,
                "message": f"run {i + 1} {status}",
                "data": {},
                "actor": "system",
            }
        )
        for k in range(3):
            events.append(
                {"run_id": i + 1, "at": at, "kind": f"step_{k}", "message": "decided", "data": {}}
            )
    with store.db.write() as conn:
        conn.execute(sa.insert(runs), rows)
        conn.execute(sa.insert(wakeup_requests), requests)
        conn.execute(sa.insert(run_events), events)
        conn.execute(sa.insert(activity_log), activity)
    return ws.id, agents[0].id, task_ids[0]


async def measure(
    app: object, token: str, paths: list[str], repeat: int
) -> list[tuple[str, float, float, int]]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    results = []
    async with httpx.AsyncClient(
        transport=transport, base_url="http://bench", cookies={"office_session": token}
    ) as client:
        for path in paths:
            timings = []
            status = 0
            for _ in range(repeat + 1):
                started = time.perf_counter()
                response = await client.get(path)
                timings.append((time.perf_counter() - started) * 1000)
                status = response.status_code
            timings = timings[1:]  # the first request warms caches and templates
            results.append((path, statistics.median(timings), max(timings), status))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        store = Store.open(url)
        migrate.upgrade(store.db)
        now = datetime.now(UTC)
        started = time.perf_counter()
        _, agent, task = seed(store, n_runs=args.runs, n_tasks=args.tasks, now=now)
        secret, _ = TokenService(store).mint_admin(name="bench", now=now)
        print(
            f"seeded {args.runs} runs, {args.tasks} tasks in {time.perf_counter() - started:.1f} s"
        )
        service = Service(Settings(home=Path(tmp), database_url=url), store=store)
        app = create_app(service)
        paths = [
            "/",
            "/board",
            f"/tasks/{task}",
            "/runs",
            "/runs?status=finished&reason=blocked",
            f"/runs?agent={agent}&since=2000-01-01",
            "/runs/5000",
            "/wakeups",
            "/routines",
            "/routines/new",
            "/inbox",
            "/activity",
            "/agents",
            f"/agents/{agent}",
        ]
        results = asyncio.run(measure(app, secret, paths, args.repeat))
        store.close()
    print(f"{'page':45} {'median ms':>10} {'worst ms':>10}  status")
    slow = 0
    for path, median, worst, status in results:
        flag = "" if worst < TARGET_MS and status == 200 else "  <-- over target"
        slow += bool(flag)
        print(f"{path:45} {median:10.1f} {worst:10.1f}  {status}{flag}")
    print("every page under 300 ms" if not slow else f"{slow} page(s) over 300 ms")


if __name__ == "__main__":
    main()
