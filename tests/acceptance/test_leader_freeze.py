"""A frozen node never freezes the office: two ``office serve`` processes on PostgreSQL.

The maintenance leader, with agent sessions running, is frozen with ``SIGSTOP`` (what a VM
pause or a long GC does: the process keeps its connections but runs nothing). The other
node takes the lease within the TTL plus one maintenance interval, requeues the frozen
node's expired runs and runs them to the end. On ``SIGCONT`` the old node finds its run
leases expired: it stops the agent processes of the runs it lost (they hide from the other
node's orphan scan, as agents on another machine would be out of its reach), writes no
result for them, records ``attempt_abandoned``, and does not act as leader. Every run ends
exactly once.

Deadlines are generous (the machine may be slow and shared); nothing waits a fixed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from office_scheduler.domain.status import RunStatus
from office_scheduler.store.facade import Store

pytestmark = [pytest.mark.postgres, pytest.mark.serial, pytest.mark.timeout(600)]

FREEZE_AGENT = Path(__file__).parent / "agents" / "freeze_agent.py"
AGENTS = 3
TTL_S = 6.0
INTERVAL_S = 1.0
TUNING = {
    "OFFICE_LEADER_TTL_S": str(TTL_S),
    "OFFICE_LEASE_S": "6",
    "OFFICE_MAINTENANCE_INTERVAL_S": str(INTERVAL_S),
    "OFFICE_SAFETY_TICK_S": "1",
    "OFFICE_SHUTDOWN_GRACE_S": "2",
    "OFFICE_DB_POOL_SIZE": "3",
}
#: Slack on top of TTL + interval for the take-over on a loaded two-core machine.
TAKEOVER_SLACK_S = 10.0
#: How long any state may take to be reached on a slow machine.
DEADLINE_S = 120.0

T = TypeVar("T")


def _until(what: str, probe: Callable[[], T | None], timeout: float = DEADLINE_S) -> T:
    """Poll ``probe`` until it returns a truthy value; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class _Node:
    """``office serve`` as a real process; its log goes to a file."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.log_path = home / "serve.log"
        self.log = self.log_path.open("w")
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

    def health(self) -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(self.url + "/healthz", timeout=30).json()
        return body

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate(timeout=30)
        self.log.close()


def _office_dir(root: Path, freeze_dir: Path) -> Path:
    office = root / "office"
    (office / "agents").mkdir(parents=True)
    executor = {
        "kind": "command",
        "argv": [sys.executable, str(FREEZE_AGENT)],
        "env": {"FREEZE_DIR": str(freeze_dir)},
        "timeout_s": 900,
        "inactivity_timeout_s": 900,
    }
    config = {
        "workspace": {"name": "Freeze", "description": "a leader that stops"},
        "settings": {"coalesce_window_s": 0, "default_executor": "freeze"},
        "executors": {"freeze": executor},
    }
    (office / "office.yml").write_text(json.dumps(config))
    for index in range(AGENTS):
        agent = {"name": f"f{index}", "role": "worker", "cooldown_s": 0}
        (office / "agents" / f"f{index}.yml").write_text(json.dumps(agent))
    return office


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of a stopped scheduler may linger as a zombie until reaped.
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return False
    return True


def _first_pids(starts: Path, run_ids: list[int]) -> dict[int, int] | None:
    pids = {}
    for run_id in run_ids:
        path = starts / f"{run_id}-1"
        text = path.read_text().strip() if path.exists() else ""
        if not text:
            return None
        pids[run_id] = int(text)
    return pids


def test_a_frozen_leader_is_replaced_and_abandons_its_lost_attempts_when_it_wakes(
    tmp_path: Path, pg_url: str
) -> None:
    freeze_dir = tmp_path / "freeze"
    starts = freeze_dir / "starts"
    starts.mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    env = {**base, **TUNING, "OFFICE_DATABASE_URL": pg_url}
    homes = [tmp_path / "home-a", tmp_path / "home-b"]
    imported = subprocess.run(
        [
            sys.executable,
            "-m",
            "office_scheduler",
            "import",
            str(_office_dir(tmp_path, freeze_dir)),
            "-y",
        ],
        env={**env, "OFFICE_HOME": str(homes[0])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    store = Store.open(pg_url)
    nodes: list[_Node] = []
    first_pids: dict[int, int] = {}
    try:
        [workspace] = store.office.list_workspaces()
        agent_ids = [agent.id for agent in store.office.list_agents(workspace.id)]
        frozen = _Node(homes[0], env)
        nodes.append(frozen)
        token = (homes[0] / "admin_token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        _until("the first node to lead", lambda: frozen.health()["maintenance_leader"])

        # The first node claims and starts every run before the second node exists.
        run_ids = []
        for agent_id in agent_ids:
            answer = httpx.post(
                f"{frozen.url}/api/v1/agents/{agent_id}/wake", headers=headers, json={}, timeout=30
            )
            assert answer.status_code == 202, answer.text
            run_ids.append(int(answer.json()["run_id"]))
        first_pids = _until("the first sessions", lambda: _first_pids(starts, run_ids))
        for run_id in run_ids:
            run = store.queue.get_run(run_id)
            assert (run.status, run.claimed_by) == (RunStatus.RUNNING, frozen.node_id)

        other = _Node(homes[1], env)
        nodes.append(other)
        seen = _until(
            "the second node to see the leader", lambda: other.health()["leader"]["node_id"]
        )
        assert seen == frozen.node_id
        epoch = frozen.health()["leader"]["epoch"]

        frozen.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        _until("the other node to take the lease", lambda: other.health()["maintenance_leader"])
        took_s = time.monotonic() - stopped
        leader = other.health()["leader"]
        assert leader["node_id"] == other.node_id
        assert leader["epoch"] == epoch + 1
        assert leader["expires_at"]
        print(f"\nfreeze: the other node led {took_s:.1f} s after SIGSTOP (TTL {TTL_S} s)")
        assert took_s < TTL_S + INTERVAL_S + TAKEOVER_SLACK_S

        # It requeues the frozen node's expired runs; they launch and finish there.
        def all_finished() -> bool:
            return all(store.queue.get_run(r).status is RunStatus.FINISHED for r in run_ids)

        _until("the runs to finish on the other node", all_finished)
        for run_id in run_ids:
            run = store.queue.get_run(run_id)
            assert run.claimed_by == other.node_id
            assert (starts / f"{run_id}-2").exists()
        assert all(_alive(pid) for pid in first_pids.values()), (
            "the frozen node's sessions were out of the other node's reach"
        )

        frozen.proc.send_signal(signal.SIGCONT)

        def abandoned() -> bool:
            return all(
                any(
                    e.kind == "attempt_abandoned" and e.data.get("node_id") == frozen.node_id
                    for e in store.runlog.list_run_events(run_id)
                )
                for run_id in run_ids
            )

        _until("attempt_abandoned for every lost run", abandoned)
        _until(
            "the old node to stop its agents",
            lambda: not any(_alive(pid) for pid in first_pids.values()),
        )
        health = _until("the old node to answer", frozen.health)
        assert health["maintenance_leader"] is False
        assert health["leader"]["this_node"] is False
        assert _until(
            "the old node to read the lease",
            lambda: frozen.health()["leader"]["node_id"] == other.node_id,
        )
        assert other.health()["maintenance_leader"] is True
        assert other.health()["leader"]["epoch"] == epoch + 1, "leadership stayed put"

        # Every run ended exactly once, with the second attempt's result.
        for run_id in run_ids:
            run = store.queue.get_run(run_id)
            assert run.status is RunStatus.FINISHED
            assert run.result is not None
            assert run.result.get("summary") == "attempt 2"
            kinds = [e.kind for e in store.runlog.list_run_events(run_id)]
            assert kinds.count("run_finished") == 1, kinds
            assert kinds.count("attempt_abandoned") == 1, kinds
        log = frozen.log_path.read_text()
        assert "maintenance_leadership_lost" in log
    finally:
        for node in nodes:
            node.stop()
        for pid in first_pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        store.close()
