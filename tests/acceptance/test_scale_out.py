"""Scale-out: four ``office serve`` processes on one PostgreSQL schema, one SIGKILLed halfway.

Real processes end to end. A workload of wakes over agents is sent through the four
servers' APIs — explicit wakes (in batches, ``POST /workspaces/{id}/wakes``, as an
integration sending bursts would), one Office task per agent created with its assignee
(``task_assigned``; some are subtasks of another agent's task, some are blocked by one) and
comments on those tasks — paced evenly over a sending window (the sender keeps up to three
groups of 50 requests in flight, as a busy integration would) while five lightweight
routines fire every minute. In the second half subtasks and blockers are finished, each
waking the parent's or the dependant's assignee (``task_children_completed``,
``task_blockers_resolved``). The office uses second-granularity settings: a 3-second
coalescing hold and a 20-second cooldown per agent, so a busy agent's wakes gather in its
queued runs (one per task scope) while it rests, as coalescing is meant to; each agent
session lasts 5 seconds (asleep, as a real agent takes a while). Halfway through the
window, the process that holds maintenance leadership is killed with SIGKILL, its agents
still running.

The test asserts what must hold whatever the machine's speed, and prints its pace: every
wake was taken in (none refused or lost; a sender that falls behind its schedule keeps
sending), everything settles, the chaos test's invariants hold (every wakeup request and
run terminal, never two live sessions of one agent or run, no agent process left), every
cron tick fired exactly once, no run was claimed by two processes (for one retry of a run,
only a claim by the killed process may be followed by another claim, after its lease
expired), and no agent's queue head ever had to be corrected by maintenance. Its default
load (4,000 wakes over 100 agents in 60 s) keeps CI short; the pace goal — 10,000 wakes
over 200 agents taken in within 120 s through four processes — is ``make bench``'s
``scaleout`` benchmark (``bench/scaleout_processes.py``), which runs this test at that size
on a quiet machine. ``OFFICE_SCALE_WAKES``, ``OFFICE_SCALE_AGENTS`` and
``OFFICE_SCALE_SEND_S`` change the load and the window; ``OFFICE_SCALE_QUIET=1`` waits for a
quiet machine before the window; ``OFFICE_SCALE_REPORT`` names a JSON file the figures are
written to. Agents are shell scripts (``agents/scale_agent.sh``) that keep the chaos
agent's lock records.

On a two-core machine PostgreSQL, the four servers, their agent processes and the sending
client share two cores. Measured server + PostgreSQL CPU: about 5 ms per batched wake,
30 ms per comment or task, and about 100 ms per run (claim, prompt, session, end); runs are
bounded by the cooldown, not by the wakes.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from acceptance.test_chaos import TERMINAL_RUNS, TERMINAL_WAKEUPS, _agent_processes, _all, _settled
from office_scheduler.domain.routines import RoutineRunSource
from office_scheduler.domain.status import WakeSource
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import run_events, runs

#: The load: ``WAKES`` wakes in all, over ``AGENTS`` agents, sent over ``SEND_WINDOW_S``.
#: Each agent is assigned one task, so its wakes fall in two coalescing scopes (its task,
#: and no task). The default is CI's; ``make bench`` runs 10,000 over 200 agents in 120 s.
WAKES = int(os.environ.get("OFFICE_SCALE_WAKES", "4000"))
AGENTS = int(os.environ.get("OFFICE_SCALE_AGENTS", "100"))
SEND_WINDOW_S = float(os.environ.get("OFFICE_SCALE_SEND_S", "60"))
SERVERS = 4
TASKS = AGENTS
#: Comments are 14 % of the wakes, explicit wakes the rest (after the tasks' assignments).
COMMENTS = WAKES * 14 // 100
API_WAKES = WAKES - TASKS - COMMENTS
#: Subtasks and blockers finished in the second half of the window (office events); a
#: quarter of the tasks are subtasks and a quarter blocked, so there are enough to finish.
FINISHED = min(60, AGENTS * 3 // 10)
ROUTINES = 5
#: The sender paces the workload to end this long before the window closes.
SLACK_S = 5.0
#: Groups of 50 requests the sender keeps in flight at once.
GROUPS_IN_FLIGHT = 3
#: Second-granularity office settings: event wakes wait 3 s for company, and an agent rests
#: 20 s after each session, so a busy agent's wakes gather in its queued runs meanwhile.
COALESCE_S = 3
COOLDOWN_S = 20
#: How long each agent session lasts (asleep: real agents take a while, and no CPU).
SESSION_S = 5
#: A deadline for the queue to drain after the window, not a pace: each agent's two scopes
#: run one after the other, a session plus a cooldown each (about a minute at full size on
#: a quiet machine); a slow machine takes longer and still passes.
SETTLE_S = 600
SCALE_AGENT = Path(__file__).parent / "agents" / "scale_agent.sh"
#: The lease is long enough that a live node on a loaded machine never loses its runs (a
#: renewal every 7 s may be 13 s late); the killed node's runs come back 20 s after its death.
TUNING = {
    "OFFICE_LEASE_S": "20",
    "OFFICE_MAINTENANCE_INTERVAL_S": "2",
    "OFFICE_SAFETY_TICK_S": "1",
    "OFFICE_SHUTDOWN_GRACE_S": "2",
    "OFFICE_DB_POOL_SIZE": "4",
    "OFFICE_MAX_PARALLEL_RUNS": "64",
}


def _office_dir(root: Path, chaos: Path) -> Path:
    office = root / "office"
    (office / "agents").mkdir(parents=True)
    executor = {
        "kind": "command",
        "argv": ["/bin/sh", str(SCALE_AGENT)],
        "env": {"CHAOS_DIR": str(chaos), "SCALE_SESSION_S": str(SESSION_S)},
        "timeout_s": 20,
        "inactivity_timeout_s": 20,
    }
    config = {
        "workspace": {"name": "Scale", "description": "four processes, one queue"},
        "settings": {"coalesce_window_s": COALESCE_S, "default_executor": "fast"},
        "executors": {"fast": executor},
    }
    (office / "office.yml").write_text(json.dumps(config))
    for index in range(AGENTS):
        agent = {"name": f"s{index:03d}", "role": "worker", "cooldown_s": COOLDOWN_S}
        (office / "agents" / f"s{index:03d}.yml").write_text(json.dumps(agent))
    return office


class _Node:
    """``office serve`` as a real process; its log goes to a file (it is long)."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.log = (home / "serve.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "office_scheduler", "serve", "--port", "0"],
            env={**env, "OFFICE_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.startswith("Admin token"):
            line = self.proc.stdout.readline()
        if "API at " not in line:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise RuntimeError(f"office serve did not start: {line!r}")
        self.url = line.split("API at ")[1].split(",")[0]
        self.node_id = line.split("node ")[1].split(")")[0]

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.proc.send_signal(signum)
        self.proc.communicate(timeout=60)
        self.log.close()
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=30)
        self.log.close()


class _Client:
    """Sends the workload round-robin over the live servers; failed sends are retried."""

    def __init__(self, token: str, workspace_id: str, agent_ids: list[str]) -> None:
        self.headers = {"Authorization": f"Bearer {token}"}
        self.workspace_id = workspace_id
        self.agent_ids = agent_ids
        self.urls: list[str] = []
        self.commented: list[str] = []  # tasks that stay open (a done task's comments wake no one)
        # Task links for the office events: an anchor gets one subtask, a blocker task one
        # dependant; finishing the subtask or the blocker wakes the anchor's or the
        # dependant's assignee (task_children_completed, task_blockers_resolved).
        self.childless: list[str] = []
        self.unused_blockers: list[str] = []
        self.to_finish: list[tuple[str, str]] = []  # (task id, wake source it causes)
        self.sent: Counter[str] = Counter()
        self.caused: Counter[str] = Counter()  # event wakes the "done" requests must cause
        self.failures = 0
        self._count = threading.Lock()
        #: Requests under way per server URL (the kill waits for the victim's to end).
        self.in_flight: Counter[str] = Counter()
        self.http = httpx.Client(timeout=30, limits=httpx.Limits(max_connections=32))

    def _post(self, n: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._send("POST", n, path, body)

    def _send(self, method: str, n: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        for attempt in range(20):
            with self._count:
                url = self.urls[(n + attempt) % len(self.urls)]
                self.in_flight[url] += 1
            try:
                response = self.http.request(method, url + path, headers=self.headers, json=body)
            except httpx.HTTPError:
                with self._count:
                    self.failures += 1
                    self.in_flight[url] -= 1
                time.sleep(0.2)
                continue
            with self._count:
                self.in_flight[url] -= 1
            if response.status_code in (200, 201, 202):
                result: dict[str, Any] = response.json()
                return result
            raise AssertionError(f"{path}: {response.status_code} {response.text}")
        raise AssertionError(f"{path}: no server answered")

    def _task(self, n: int, agent_id: str) -> None:
        """Create the agent's task: by turns an anchor, an anchor's subtask, a blocker, or
        a blocker's dependant (when there is a free anchor or blocker to link to)."""
        body: dict[str, Any] = {"title": f"job {n}", "assignee_agent_id": agent_id}
        role = n % 4
        with self._count:
            if role == 1 and self.childless:
                body["parent_id"] = self.childless.pop()
            elif role == 2 and self.unused_blockers:
                body["blocked_by"] = [self.unused_blockers.pop()]
        task = self._post(n, f"/api/v1/workspaces/{self.workspace_id}/tasks", body)
        with self._count:
            if "parent_id" not in body and role != 3:  # never finished: comments wake
                self.commented.append(task["id"])
            if "parent_id" in body:
                self.to_finish.append((task["id"], WakeSource.TASK_CHILDREN_COMPLETED.value))
            elif "blocked_by" in body:
                self.to_finish.append(
                    (body["blocked_by"][0], WakeSource.TASK_BLOCKERS_RESOLVED.value)
                )
            elif role == 0:
                self.childless.append(task["id"])
            elif role == 3:
                self.unused_blockers.append(task["id"])

    def act(self, item: tuple[int, str, int]) -> None:
        n, kind, agent = item
        agent_id = self.agent_ids[agent]
        if kind == "comment" and self.commented:
            task_id = self.commented[n % len(self.commented)]
            self._post(n, f"/api/v1/tasks/{task_id}/comments", {"body": f"note {n}"})
        elif kind == "task":
            self._task(n, agent_id)
        elif kind == "done":
            with self._count:
                if not self.to_finish:
                    return
                task_id, causes = self.to_finish.pop(0)
            self._send("PATCH", n, f"/api/v1/tasks/{task_id}", {"state": "DONE"})
            with self._count:
                self.sent[kind] += 1
                self.caused[causes] += 1
            return
        else:  # a comment before any task exists wakes the agent itself
            kind = "wake"
            self._post(n, f"/api/v1/agents/{agent_id}/wake", {"idempotency_key": f"w-{n}"})
        with self._count:
            self.sent[kind] += 1

    def wake_many(self, items: list[tuple[int, str, int]]) -> None:
        """Explicit wakes, one batch request for all of ``items``."""
        if not items:
            return
        wakes = [
            {"agent_id": self.agent_ids[agent], "idempotency_key": f"w-{n}"}
            for n, _kind, agent in items
        ]
        self._post(items[0][0], f"/api/v1/workspaces/{self.workspace_id}/wakes", {"wakes": wakes})
        with self._count:
            self.sent["wake"] += len(items)

    def send(
        self, pool: ThreadPoolExecutor, group: list[tuple[int, str, int]]
    ) -> list[Future[None]]:
        """Start one group of the workload: its explicit wakes as one batch, the rest one by
        one; the requests' futures (the caller keeps a few groups in flight, as a busy
        integration would, instead of waiting out each group's slowest answer)."""
        wakes = [item for item in group if item[1] == "wake"]
        others = [item for item in group if item[1] != "wake"]
        return [pool.submit(self.wake_many, wakes), *(pool.submit(self.act, o) for o in others)]

    def healthz(self, url: str) -> dict[str, Any]:
        body: dict[str, Any] = self.http.get(url + "/healthz").json()
        return body


def _workload() -> list[tuple[int, str, int]]:
    """``(n, kind, agent index)`` in sending order; the k-th task goes to agent k.

    The tasks come in the first half; the ``done`` requests (finishing subtasks and
    blockers) are spread over the second.
    """
    rng = random.Random(3)
    kinds = ["wake"] * API_WAKES + ["comment"] * COMMENTS
    rng.shuffle(kinds)
    half = len(kinds) // 2
    for k in range(TASKS):  # spread evenly over the first half
        kinds.insert(k * (half + TASKS) // TASKS, "task")
    start = len(kinds) // 2
    for k in range(FINISHED):
        kinds.insert(start + k * (len(kinds) - start) // FINISHED, "done")
    tasks = iter(range(TASKS))
    return [
        (n, kind, next(tasks) % AGENTS if kind == "task" else n % AGENTS)
        for n, kind in enumerate(kinds)
    ]


def _cron_ticks(store: Store, routine_ids: list[str]) -> dict[str, list[datetime]]:
    ticks = {}
    for routine_id in routine_ids:
        runs = store.routines.list_runs(routine_id, limit=100)
        ticks[routine_id] = sorted(
            run.scheduled_for
            for run in runs
            if run.source is RoutineRunSource.CRON and run.scheduled_for is not None
        )
    return ticks


def _claims(store: Store) -> dict[tuple[int, int], list[str]]:
    """Claims from ``run_events``: (run id, retry count) → claiming node ids, in order."""
    query = (
        sa.select(run_events.c.run_id, run_events.c.data)
        .where(run_events.c.kind == "claimed")
        .order_by(run_events.c.id)
    )
    claims: dict[tuple[int, int], list[str]] = defaultdict(list)
    with store.db.read() as conn:
        for run_id, data in conn.execute(query):
            claims[(int(run_id), int(data["retry_count"]))].append(str(data["node_id"]))
    return claims


def _backlog(store: Store) -> dict[str, int]:
    """Runs not yet terminal, by status (progress while the office settles)."""
    query = (
        sa.select(runs.c.status, sa.func.count())
        .where(runs.c.status.not_in([status.value for status in TERMINAL_RUNS]))
        .group_by(runs.c.status)
    )
    with store.db.read() as conn:
        return {str(status): int(count) for status, count in conn.execute(query)}


def _busy_share(seconds: float) -> float:
    """The machine's busy share of CPU time over ``seconds`` (``/proc/stat``; 0 elsewhere)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    try:
        busy0, total0 = sample()
        time.sleep(seconds)
        busy1, total1 = sample()
    except OSError:
        return 0.0
    return (busy1 - busy0) / max(1, total1 - total0)


def _wait_until_quiet(*, at_most_s: float = 60.0, busy_below: float = 0.2) -> float:
    """Wait until the machine is mostly idle (what came before, e.g. PostgreSQL's vacuum
    after the parallel suite, has finished); returns the seconds waited.

    The window is wall time on two shared cores: it must start on a quiet machine.
    """
    began = time.monotonic()
    while time.monotonic() - began < at_most_s and _busy_share(1.0) >= busy_below:
        pass
    return time.monotonic() - began


def _kill_the_leader(client: _Client, nodes: list[_Node]) -> _Node:
    """SIGKILL the node that holds maintenance leadership (after routing requests away)."""
    leaders = [n for n in nodes if client.healthz(n.url)["maintenance_leader"]]
    assert len(leaders) == 1, "exactly one maintenance leader"
    victim = leaders[0]
    with client._count:
        client.urls.remove(victim.url)  # no new request goes to it ...
    deadline = time.monotonic() + 60
    while client.in_flight[victim.url] > 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # ... and none is under way when it dies (its answer would be lost)
    victim.kill()
    return victim


@pytest.mark.postgres
@pytest.mark.serial
@pytest.mark.timeout(1200)
def test_four_processes_share_one_queue_and_survive_a_sigkill(tmp_path: Path, pg_url: str) -> None:
    url = pg_url
    chaos = tmp_path / "chaos"
    (chaos / "locks").mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    env = {**base, **TUNING, "OFFICE_DATABASE_URL": url}
    homes = [tmp_path / f"home{n}" for n in range(SERVERS)]
    imported = subprocess.run(
        [
            sys.executable,
            "-m",
            "office_scheduler",
            "import",
            str(_office_dir(tmp_path, chaos)),
            "-y",
        ],
        env={**env, "OFFICE_HOME": str(homes[0])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    store = Store.open(url)
    nodes: list[_Node] = []
    client: _Client | None = None
    try:
        [workspace] = store.office.list_workspaces()
        agent_ids = [agent.id for agent in store.office.list_agents(workspace.id)]
        for home in homes:  # one at a time: the first mints the admin token
            nodes.append(_Node(home, env))
        token = (homes[0] / "admin_token").read_text().strip()
        client = _Client(token, workspace.id, agent_ids)
        client.urls = [node.url for node in nodes]
        routine_ids = []
        for index in range(ROUTINES):
            routine = client._post(
                index,
                f"/api/v1/workspaces/{workspace.id}/routines",
                {"name": f"every minute {index}", "assignee_agent_id": agent_ids[index]},
            )
            client._post(
                index,
                f"/api/v1/routines/{routine['id']}/triggers",
                {"kind": "schedule", "cron_expression": "* * * * *"},
            )
            routine_ids.append(routine["id"])

        work = _workload()
        per_batch = 50
        with store.db.writer.connect() as conn:
            conn.exec_driver_sql("CHECKPOINT")  # not in the middle of the window
        if os.environ.get("OFFICE_SCALE_QUIET") == "1":  # the benchmark's pace needs it
            print(f"\nscale-out: waited {_wait_until_quiet():.0f} s for a quiet machine")
        started = time.monotonic()
        victim: _Node | None = None
        behind = 0.0  # how far the sender fell behind its schedule, at worst
        in_flight: deque[list[Future[None]]] = deque()
        with ThreadPoolExecutor(max_workers=24) as pool:
            for first in range(0, len(work), per_batch):
                elapsed = time.monotonic() - started
                # A slow machine makes the sender late, never skip: everything is sent.
                while len(in_flight) >= GROUPS_IN_FLIGHT:
                    for request in in_flight.popleft():
                        request.result()
                in_flight.append(client.send(pool, work[first : first + per_batch]))
                if victim is None and elapsed >= SEND_WINDOW_S / 2:
                    victim = _kill_the_leader(client, nodes)
                ahead = started + (SEND_WINDOW_S - SLACK_S) * (first + per_batch) / len(work)
                behind = max(behind, time.monotonic() - ahead)
                time.sleep(max(0.0, ahead - time.monotonic()))
            for group in in_flight:
                for request in group:
                    request.result()
            if victim is None:
                victim = _kill_the_leader(client, nodes)
        sent_for = time.monotonic() - started
        wakes_sent = client.sent["wake"] + client.sent["task"] + client.sent["comment"]
        pace = (
            f"scale-out: pace: {wakes_sent} wakes taken in in {sent_for:.1f} s "
            f"({wakes_sent / sent_for:.0f}/s; the schedule asked for {SEND_WINDOW_S:.0f} s, "
            f"the sender was {behind:.1f} s late at worst) through {SERVERS} processes"
        )
        print(f"\n{pace}; sent {dict(client.sent)}")
        # Every wake was taken in (answered 2xx), however long it took.
        assert wakes_sent == API_WAKES + TASKS + COMMENTS == WAKES, dict(client.sent)
        assert victim is not None
        survivors = [node for node in nodes if node is not victim]
        settling = time.monotonic()
        reported = settling
        while not _settled(store):
            assert time.monotonic() < settling + SETTLE_S, f"not settled: {_backlog(store)}"
            if time.monotonic() - reported >= 15:
                reported = time.monotonic()
                print(f"scale-out: {reported - settling:.0f} s after the window {_backlog(store)}")
            time.sleep(0.5)
        settled_in = time.monotonic() - settling
        print(f"scale-out: settled {settled_in:.0f} s after the window")
        ended = datetime.now(UTC)
        health = [client.healthz(node.url) for node in survivors]
        wakeups = _all(store.listing.list_wakeups)
        runs = _all(store.listing.list_runs)
        ticks = _cron_ticks(store, routine_ids)
        claims = _claims(store)
    finally:
        codes = [node.stop() for node in nodes if node.proc.poll() is None]
        store.close()
        if client is not None:
            client.http.close()
    assert codes == [0] * (SERVERS - 1)

    corrected = [h for h in homes if "queue_heads_corrected" in (h / "serve.log").read_text()]
    starts = (chaos / "starts.log").read_text().splitlines()
    violations_file = chaos / "violations.log"
    violations = violations_file.read_text().splitlines() if violations_file.exists() else []
    left = _agent_processes(chaos)
    for pid in left:  # never leave one behind, whatever the assertions say
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    by_node = Counter(node for nodes_ in claims.values() for node in nodes_)
    reclaimed = {key: who for key, who in claims.items() if len(who) > 1}
    print(f"scale-out: victim {victim.node_id}")
    print(f"scale-out: {len(wakeups)} wakeup requests, {len(runs)} runs, {len(starts)} sessions")
    print(f"scale-out: wakeups by status {dict(Counter(w.status for w in wakeups))}")  # type: ignore[attr-defined]
    print(f"scale-out: wakeups by source {dict(Counter(w.source for w in wakeups))}")  # type: ignore[attr-defined]
    print(f"scale-out: claims by node {dict(by_node)}; re-claimed after the kill {len(reclaimed)}")
    print(f"scale-out: cron ticks {[len(t) for t in ticks.values()]}; {client.failures} resends")

    report = os.environ.get("OFFICE_SCALE_REPORT")
    if report:  # the benchmark's figures (bench/scaleout_processes.py)
        figures = {
            "wakes": wakes_sent,
            "agents": AGENTS,
            "servers": SERVERS,
            "window_s": SEND_WINDOW_S,
            "sent_s": round(sent_for, 2),
            "behind_s": round(behind, 2),
            "settled_s": round(settled_in, 1),
            "runs": len(runs),
            "sessions": len(starts),
        }
        Path(report).write_text(json.dumps(figures))

    # The chaos test's invariants.
    assert {w.status for w in wakeups} <= TERMINAL_WAKEUPS  # type: ignore[attr-defined]
    assert {r.status for r in runs} <= TERMINAL_RUNS  # type: ignore[attr-defined]
    assert violations == []
    assert left == []
    assert corrected == [], "a queue transition left an agent's queue head late"
    # Every request's wake was taken in: explicit wakes exactly once (keyed), and a wake for
    # every task (its assignment) and every comment (the task's assignee).
    by_source = Counter(w.source for w in wakeups)  # type: ignore[attr-defined]
    assert by_source[WakeSource.USER] == client.sent["wake"]
    assert by_source[WakeSource.TASK_ASSIGNED] >= client.sent["task"]
    assert by_source[WakeSource.COMMENT] >= client.sent["comment"]
    # Each finished subtask wakes its parent's assignee, each finished blocker its
    # dependant's: exactly once (one child per parent, one blocker per dependant).
    for source in (WakeSource.TASK_CHILDREN_COMPLETED, WakeSource.TASK_BLOCKERS_RESOLVED):
        assert client.caused[source.value] > 0
        assert by_source[source] == client.caused[source.value], source
    assert all(h["status"] == "ok" for h in health)
    assert sum(h["maintenance_leader"] for h in health) == 1, "a survivor took over"
    # Every process claimed work, and no run was claimed by two live processes.
    assert set(by_node) == {node.node_id for node in nodes}
    assert all(who[:-1] == [victim.node_id] * (len(who) - 1) for who in reclaimed.values())
    # Every cron tick fired exactly once: one run per minute, none missing, none doubled.
    last_boundary = (ended - timedelta(seconds=5)).replace(second=0, microsecond=0)
    for routine_id, fired in ticks.items():
        assert fired, f"routine {routine_id} never fired"
        assert len(fired) == len(set(fired)), f"routine {routine_id} fired a tick twice"
        expected = [fired[0] + timedelta(minutes=k) for k in range(len(fired))]
        assert fired == expected, f"routine {routine_id} skipped a tick"
        assert fired[-1] >= last_boundary, f"routine {routine_id} missed {last_boundary}"
