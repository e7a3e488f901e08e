"""Attempt fencing end to end: two ``office serve`` processes on one PostgreSQL schema.

The node running a session is killed with SIGKILL; its run's lease expires and the other
node claims the run and launches it again (attempt 2). The first session's agent process
is kept alive (``agents/fencing_agent.py`` leaves a detached zombie holding its run token);
its late ``office task done`` is refused with "this run attempt is over" and logged on the
run, and the task stays as the new session left it. Every wait is a deadline polled, never a
fixed sleep, so a slow machine only makes the test slower.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from acceptance.test_scale_out import _Node

FENCING_AGENT = Path(__file__).parent / "agents" / "fencing_agent.py"
#: A short lease and quick maintenance, so the dead node's run is recovered in seconds.
TUNING = {
    "OFFICE_LEASE_S": "5",
    "OFFICE_MAINTENANCE_INTERVAL_S": "1",
    "OFFICE_SAFETY_TICK_S": "1",
    "OFFICE_SHUTDOWN_GRACE_S": "2",
}
#: Every step's deadline (generous: two shared cores may be busy with other work).
DEADLINE_S = 180.0

T = TypeVar("T")


def _poll(what: str, probe: Callable[[], T | None]) -> T:
    """The first non-``None`` value of ``probe``, polled until :data:`DEADLINE_S`."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = probe()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _report(path: Path) -> dict[str, Any] | None:
    """The JSON an agent process wrote (atomically), or ``None`` while it has not."""
    if not path.exists():
        return None
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def _fence_processes(fence: Path) -> list[int]:
    """Processes whose environment names ``FENCE_DIR=<fence>`` (agents and zombie)."""
    marker = f"FENCE_DIR={fence}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_a_killed_nodes_session_cannot_finish_the_task_after_the_run_moved(
    tmp_path: Path, pg_url: str
) -> None:
    fence = tmp_path / "fence"
    fence.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    env = {**base, **TUNING, "OFFICE_DATABASE_URL": pg_url}
    first_node = _Node(tmp_path / "home-a", env)
    nodes = [first_node]
    http = httpx.Client(timeout=60)
    try:
        token = (tmp_path / "home-a" / "admin_token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}

        def call(method: str, url: str, **kwargs: Any) -> Any:
            response = http.request(method, url, headers=headers, **kwargs)
            assert response.status_code < 300, response.text
            return response.json()

        executor = {
            "kind": "command",
            "argv": [sys.executable, str(FENCING_AGENT)],
            "env": {"FENCE_DIR": str(fence)},
            "timeout_s": 900,
            "inactivity_timeout_s": 900,
        }
        settings = {
            "coalesce_window_s": 0,
            "default_executor": "fence",
            "executors": {"fence": executor},
        }
        api = first_node.url + "/api/v1"
        ws = call("POST", f"{api}/workspaces", json={"name": "acme", "settings": settings})["id"]
        body = {"name": "ann", "role": "worker", "cooldown_s": 0}
        agent = call("POST", f"{api}/workspaces/{ws}/agents", json=body)["id"]
        body = {"title": "Ship it", "assignee_agent_id": agent}
        task = call("POST", f"{api}/workspaces/{ws}/tasks", json=body)["id"]

        first = _poll("the first session", lambda: _report(fence / "first.json"))
        run_id = int(first["run_id"])
        second_node = _Node(tmp_path / "home-b", env)  # the only node once the first dies
        nodes.append(second_node)
        first_node.kill()
        api = second_node.url + "/api/v1"

        second = _poll("the run's second session", lambda: _report(fence / "second.json"))
        assert int(second["run_id"]) == run_id
        assert second["returncode"] == 0, second["stderr"]
        (fence / "go").write_text(second_node.url)
        late = _poll("the zombie's late call", lambda: _report(fence / "late.json"))
        assert late["returncode"] != 0, late
        assert "this run attempt is over" in late["stderr"], late
        assert call("GET", f"{api}/tasks/{task}")["state"] == "IN_REVIEW"

        (fence / "release").write_text("")

        def ended() -> dict[str, Any] | None:
            run: dict[str, Any] = call("GET", f"{api}/runs/{run_id}")
            return run if run["status"] == "finished" else None

        run = _poll("the run to finish", ended)
        assert call("GET", f"{api}/tasks/{task}")["state"] == "IN_REVIEW"
        events = run["events"]
        kinds = [event["kind"] for event in events]
        for kind in ("lease_expired", "orphan_killed", "requeued", "stale_token_refused"):
            assert kind in kinds, kinds
        claims = [event["data"]["node_id"] for event in events if event["kind"] == "claimed"]
        assert (claims[0], claims[-1]) == (first_node.node_id, second_node.node_id)
        launches = [event["data"]["attempt"] for event in events if event["kind"] == "launched"]
        # Two launches; a third only if the first node, briefly alive beside the second,
        # lost its lease on a loaded machine and had launched the run once more.
        assert len(launches) >= 2, launches
        assert launches == list(range(1, len(launches) + 1)), launches
        assert run["attempt"] == len(launches)
        (refused,) = [event for event in events if event["kind"] == "stale_token_refused"]
        assert refused["data"]["attempt"] == 1
        assert refused["data"]["method"] == "PATCH"
        assert second_node.stop() == 0
    finally:
        http.close()
        for node in nodes:
            if node.proc.poll() is None:
                node.kill()
        for pid in _fence_processes(fence):  # never leave an agent behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert _fence_processes(fence) == []
