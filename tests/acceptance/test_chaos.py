"""Chaos: 2,000 wakes over 50 misbehaving agents while the server is killed with SIGKILL.

Real processes end to end: ``office serve`` on a SQLite file, agents that succeed, fail,
rate-limit, hang and crash (``agents/chaos_agent.py``), and at least five SIGKILLs of the
server at random moments, each followed by a restart. Wakes whose request failed because the
server was down are sent again with the same idempotency key. Afterwards the database and
the agents' own lock records must show: every wakeup request in exactly one terminal state,
every run terminal, never two live sessions of one agent (``max_concurrent_sessions`` is 1)
or of one run, and no agent process left alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from office_scheduler.domain.status import RunStatus, WakeupStatus
from office_scheduler.store.facade import Store
from server_harness import Server

AGENTS = 50
WAKES = 2000
KILLS = 5
CHAOS_AGENT = Path(__file__).parent / "agents" / "chaos_agent.py"
TERMINAL_RUNS = {RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED}
TERMINAL_WAKEUPS = {
    WakeupStatus.COALESCED,
    WakeupStatus.CLAIMED,
    WakeupStatus.SKIPPED,
    WakeupStatus.CANCELLED,
}
# Short backoff and maintenance so retries come due and escalate within the test.
TUNING = {
    "OFFICE_RETRY_BACKOFF_S": "0.5,1,1,1",
    "OFFICE_MAINTENANCE_INTERVAL_S": "0.5",
    "OFFICE_SHUTDOWN_GRACE_S": "1",
}


def _office_dir(root: Path, chaos: Path) -> Path:
    office = root / "office"
    (office / "agents").mkdir(parents=True)
    executor = {
        "kind": "command",
        "argv": [sys.executable, str(CHAOS_AGENT)],
        "env": {"CHAOS_DIR": str(chaos)},
        "timeout_s": 2,
        "inactivity_timeout_s": 2,
    }
    config = {
        "workspace": {"name": "Chaos", "description": "agents that misbehave"},
        "settings": {"coalesce_window_s": 0, "default_executor": "chaos"},
        "executors": {"chaos": executor},
    }
    (office / "office.yml").write_text(json.dumps(config))
    for index in range(AGENTS):
        agent = {"name": f"a{index:02d}", "role": "worker", "cooldown_s": 0}
        (office / "agents" / f"a{index:02d}.yml").write_text(json.dumps(agent))
    return office


def _office(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    return subprocess.run(
        [sys.executable, "-m", "office_scheduler", *args],
        env={**env, "OFFICE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _agent_processes(chaos: Path) -> list[int]:
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"CHAOS_DIR={chaos}".encode() in environ.split(b"\0"):
            alive.append(int(entry.name))
    return alive


class Client:
    """Sends wakes, resending the ones that failed while the server was down."""

    def __init__(self, home: Path, agent_ids: list[str]) -> None:
        self.token = (home / "admin_token").read_text().strip()
        self.agent_ids = agent_ids
        self.pending = [(f"chaos-{n}", agent_ids[n % len(agent_ids)]) for n in range(WAKES)]
        random.Random(7).shuffle(self.pending)

    def send(self, url: str, count: int) -> None:
        """Send the next ``count`` wakes, 16 at a time (a burst, so many of them merge)."""
        batch, self.pending = self.pending[:count], self.pending[count:]
        with httpx.Client(base_url=url, timeout=10) as http:

            def wake(item: tuple[str, str]) -> bool:
                key, agent_id = item
                try:
                    response = http.post(
                        f"/api/v1/agents/{agent_id}/wake",
                        headers={"Authorization": f"Bearer {self.token}"},
                        json={"idempotency_key": key},
                    )
                except httpx.HTTPError:
                    return False
                return response.status_code == 202

            with ThreadPoolExecutor(max_workers=16) as pool:
                sent = list(pool.map(wake, batch))
        self.pending = [item for item, ok in zip(batch, sent, strict=True) if not ok] + self.pending


def _settled(store: Store) -> bool:
    if store.listing.list_wakeups(status=WakeupStatus.QUEUED, limit=1).items:
        return False
    unsettled = [status for status in RunStatus if status not in TERMINAL_RUNS]
    return not any(store.listing.list_runs(status=status, limit=1).items for status in unsettled)


def _all(page_of: object) -> list[object]:
    items: list[object] = []
    cursor = None
    while True:
        page = page_of(limit=500, cursor=cursor)  # type: ignore[operator]
        items += page.items
        cursor = page.next_cursor
        if cursor is None:
            return items


@pytest.mark.serial
@pytest.mark.timeout(600)
def test_chaos_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    chaos = tmp_path / "chaos"
    (chaos / "locks").mkdir(parents=True)
    home = tmp_path / "home"
    assert _office(home, "import", str(_office_dir(tmp_path, chaos)), "--yes").returncode == 0
    rng = random.Random(11)
    url = f"sqlite:///{home}/office.db"
    store = Store.open(url)
    try:
        [workspace] = store.office.list_workspaces()
        agent_ids = [agent.id for agent in store.office.list_agents(workspace.id)]
    finally:
        store.close()
    server = Server(home, env=TUNING)
    client = Client(home, agent_ids)
    kills = 0
    try:
        while client.pending or kills < KILLS:
            client.send(server.url, rng.randint(100, 400))
            time.sleep(rng.uniform(0.0, 1.5))
            if kills < KILLS:
                server.proc.send_signal(signal.SIGKILL)
                server.proc.communicate(timeout=30)
                kills += 1
                server = Server(home, env=TUNING)
        deadline = time.monotonic() + 300
        store = Store.open(url)
        try:
            while not _settled(store):
                assert time.monotonic() < deadline, "the office did not settle"
                time.sleep(0.5)
        finally:
            store.close()
    finally:
        code, _, err = server.stop()
    assert code == 0, err

    store = Store.open(url)
    try:
        wakeups = _all(store.listing.list_wakeups)
        runs = _all(store.listing.list_runs)
    finally:
        store.close()
    wakeup_states = Counter(w.status for w in wakeups)  # type: ignore[attr-defined]
    run_states = Counter((r.status, r.reason) for r in runs)  # type: ignore[attr-defined]
    starts = (chaos / "starts.log").read_text().splitlines()
    violations_file = chaos / "violations.log"
    violations = violations_file.read_text().splitlines() if violations_file.exists() else []
    survivors = _agent_processes(chaos)
    for pid in survivors:  # never leave one behind, whatever the assertions say
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    print(f"\nchaos: {kills} SIGKILLs, {len(wakeups)} wakeup requests, {len(runs)} runs")
    print(f"chaos: wakeups by status {dict(wakeup_states)}")
    print(f"chaos: runs by (status, reason) {dict(run_states)}")
    print(f"chaos: {len(starts)} agent sessions started, {len(violations)} lock violations")
    print(f"chaos: {len(survivors)} agent processes alive afterwards")

    assert kills >= KILLS
    assert len(wakeups) == WAKES  # every key exactly once, resends deduplicated
    assert set(wakeup_states) <= TERMINAL_WAKEUPS
    assert {status for status, _ in run_states} <= TERMINAL_RUNS
    assert violations == []
    assert survivors == []
