"""Runaway protection end to end: ``office serve`` and two agents that ping-pong comments.

A person's comment starts the loop; each agent answers every comment with one on the
other's task. The chain stops at ``max_causation_depth`` by itself: a bounded number of
runs, one inbox item, and the held wake visible and releasable (exactly once).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from server_harness import Server

AGENT = Path(__file__).parent / "agents" / "pingpong_agent.py"
#: Kept low so the loop is short; the default (12) is covered by the integration tests.
DEPTH = 5
T = TypeVar("T")


class Office:
    """An HTTP client of a running ``office serve`` with its admin token."""

    def __init__(self, server: Server, home: Path) -> None:
        token = (home / "admin_token").read_text().strip()
        self.http = httpx.Client(
            base_url=server.url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        assert response.status_code < 300, response.text
        return response.json()

    def runs(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.call("GET", "/runs", params={"limit": 500})["items"]
        return items[::-1]  # oldest first


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float) -> T:
    """Poll ``probe`` until it answers something true (generous deadlines: slow machines)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found: T | None = probe()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def office(tmp_path: Path) -> Iterator[Office]:
    home = tmp_path / "home"
    server = Server(home)
    client = Office(server, home)
    try:
        yield client
    finally:
        client.http.close()
        code, _out, err = server.stop()
        assert code == 0, err
        assert "Traceback" not in err


def _setup(client: Office, directory: Path) -> tuple[str, dict[str, str], dict[str, str]]:
    executor = {
        "kind": "command",
        "argv": [sys.executable, str(AGENT)],
        "env": {"PINGPONG_DIR": str(directory)},
        "timeout_s": 120,
    }
    settings = {
        "coalesce_window_s": 0,
        "default_executor": "pingpong",
        "executors": {"pingpong": executor},
    }
    space = client.call("POST", "/workspaces", json={"name": "acme", "settings": settings})
    ws = str(space["id"])
    client.call("PATCH", f"/workspaces/{ws}/limits", json={"max_causation_depth": DEPTH})
    agents = {}
    for name in ("ann", "bob"):
        body = {"name": name, "role": "worker", "cooldown_s": 0}
        agents[name] = client.call("POST", f"/workspaces/{ws}/agents", json=body)["id"]
    project = client.call(
        "POST", f"/workspaces/{ws}/projects", json={"name": "site", "directory": str(directory)}
    )
    tasks = {
        name: client.call(
            "POST",
            f"/workspaces/{ws}/tasks",
            json={
                "title": f"ping-pong {name}",
                "project_id": project["id"],
                "assignee_agent_id": agent,
            },
        )["id"]
        for name, agent in agents.items()
    }
    return ws, agents, tasks


def _all_ended(client: Office) -> list[dict[str, Any]] | None:
    found = client.runs()
    return found if found and all(run["finished_at"] for run in found) else None


def _held(client: Office) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.call("GET", "/wakeups", params={"status": "held"})["items"]
    return items


@pytest.mark.timeout(300)
def test_two_agents_ping_ponging_comments_stop_by_themselves_and_nothing_is_lost(
    office: Office, tmp_path: Path
) -> None:
    client = office
    ws, _agents, tasks = _setup(client, tmp_path)
    wait_for("the assignment runs", lambda: len(_all_ended(client) or []) >= 2, timeout_s=120)

    client.call("POST", f"/tasks/{tasks['ann']}/comments", json={"body": "please sort it out"})
    [held] = wait_for("a held wake", lambda: _held(client), timeout_s=180)
    runs = wait_for("every run to end", lambda: _all_ended(client), timeout_s=120)

    chain = [run for run in runs if run["source"] == "comment"]
    assert sorted(run["causation_depth"] for run in chain) == list(range(DEPTH + 1))
    assert all(run["status"] == "finished" for run in chain)
    assert (held["status_reason"], held["causation_depth"]) == ("depth_limit", DEPTH + 1)
    assert held["run_id"] is None
    assert held["caused_by_run_id"] == max(chain, key=lambda r: r["causation_depth"])["id"]
    items = client.call(
        "GET", f"/workspaces/{ws}/inbox", params={"kind": "wake.held", "status": "open"}
    )["items"]
    assert len(items) == 1
    [item] = items
    assert item["agent_id"] == held["agent_id"]
    assert [link["depth"] for link in item["data"]["chain"]] == list(range(DEPTH, -1, -1))

    (tmp_path / "stop").write_text("enough\n")
    released = client.call("POST", f"/inbox/{item['id']}/release")
    [one] = released["items"]
    assert one["released"] is True
    assert (one["successor"]["causation_depth"], one["successor"]["human_rooted"]) == (0, True)
    again = client.call("POST", f"/wakeups/{held['id']}/release")
    assert again["released"] is False

    def one_more_ended() -> list[dict[str, Any]] | None:
        found = _all_ended(client)
        return found if found is not None and len(found) == len(runs) + 1 else None

    after = wait_for("the released wake's run to end", one_more_ended, timeout_s=120)
    assert after[-1]["id"] == one["run_id"]
    assert after[-1]["status"] == "finished"
    assert _held(client) == []
    assert client.call("GET", f"/wakeups/{held['id']}")["status"] == "released"
