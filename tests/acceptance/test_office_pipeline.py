"""The autonomous office end to end: ``office serve``, real agent processes, HTTP only.

* Spec → Build → Review → Ship: the coordinator plans the chain, Spec needs approval; a
  person rejects once and approves once, everything else happens by itself.
* Four subtasks ending within three seconds wake their coordinator once: the four
  ``task_children_completed`` wakes coalesce into one run (``coalesced_count`` 4).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from office_scheduler.store.facade import Store
from server_harness import Server

AGENT = Path(__file__).parent / "agents" / "pipeline_agent.py"
NOTE = "cover the error cases too"
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

    def setup(self, directory: Path, coalesce_window_s: float, agents: dict[str, str]) -> str:
        executor = {
            "kind": "command",
            "argv": [sys.executable, str(AGENT)],
            "env": {"PIPELINE_DIR": str(directory)},
            "timeout_s": 120,
        }
        settings = {
            "coalesce_window_s": coalesce_window_s,
            "default_executor": "pipeline",
            "executors": {"pipeline": executor},
        }
        space = self.call("POST", "/workspaces", json={"name": "acme", "settings": settings})
        for name, role in agents.items():
            body = {"name": name, "role": role, "cooldown_s": 0}
            self.call("POST", f"/workspaces/{space['id']}/agents", json=body)
        return str(space["id"])

    def agents(self, ws_id: str) -> dict[str, str]:
        return {
            a["name"]: a["id"] for a in self.call("GET", f"/workspaces/{ws_id}/agents")["items"]
        }

    def runs(self, **params: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.call("GET", "/runs", params={**params, "limit": 500})[
            "items"
        ]
        return items[::-1]  # oldest first


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 90) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def office(tmp_path: Path) -> Iterator[tuple[Office, Server]]:
    home = tmp_path / "home"
    server = Server(home)
    client = Office(server, home)
    try:
        yield client, server
    finally:
        client.http.close()
        code, _out, err = server.stop()
        assert code == 0, err
        assert "Traceback" not in err


def _parent(office: Office, ws_id: str, directory: Path, steps: list[str]) -> dict[str, Any]:
    project = office.call(
        "POST", f"/workspaces/{ws_id}/projects", json={"name": "site", "directory": str(directory)}
    )
    lead = office.agents(ws_id)["lead"]
    body = {
        "title": "Release 1.0",
        "description": "\n".join(f"step: {step}" for step in steps),
        "project_id": project["id"],
        "assignee_agent_id": lead,
    }
    return dict(office.call("POST", f"/workspaces/{ws_id}/tasks", json=body))


def _ended_runs(office: Office, **params: str) -> list[dict[str, Any]] | None:
    """The runs matching ``params`` once every one of them has ended, else ``None``."""
    found = office.runs(**params)
    return found if found and all(run["finished_at"] for run in found) else None


def _second_approval(office: Office, ws_id: str, first_id: str) -> dict[str, Any] | None:
    found = _pending_approval(office, ws_id)
    return found if found is not None and found["id"] != first_id else None


def _pending_approval(office: Office, ws_id: str) -> dict[str, Any] | None:
    params = {"status": "pending"}
    items = office.call("GET", f"/workspaces/{ws_id}/approvals", params=params)["items"]
    return items[0] if items else None


@pytest.mark.timeout(240)
def test_spec_build_review_ship_with_one_rejection_and_one_approval(
    office: tuple[Office, Server], tmp_path: Path
) -> None:
    client, _server = office
    agents = {
        "lead": "coordinator",
        "spec-writer": "worker",
        "builder": "worker",
        "reviewer": "reviewer",
        "shipper": "worker",
    }
    ws_id = client.setup(tmp_path, 0.5, agents)
    parent = _parent(
        client,
        ws_id,
        tmp_path,
        [
            "Spec | spec-writer | - | approval",
            "Build | builder | Spec | -",
            "Review | reviewer | Build | -",
            "Ship | shipper | Review | -",
        ],
    )

    first = wait_for("the spec's review gate", lambda: _pending_approval(client, ws_id))
    assert (first["kind"], first["status"]) == ("task_review", "pending")
    spec_id = first["task_id"]
    assert client.call("GET", f"/tasks/{spec_id}")["state"] == "IN_REVIEW"
    client.call("POST", f"/approvals/{first['id']}/reject", json={"decision_note": NOTE})

    second = wait_for(
        "the spec to be finished again", lambda: _second_approval(client, ws_id, first["id"])
    )
    client.call("POST", f"/approvals/{second['id']}/approve", json={"decision_note": "good"})

    wait_for(
        "the parent task to be done",
        lambda: client.call("GET", f"/tasks/{parent['id']}")["state"] == "DONE",
        timeout_s=150,
    )
    children = client.call("GET", f"/tasks/{parent['id']}/subtasks")["items"]
    assert [(c["title"], c["state"]) for c in children] == [
        ("Spec", "DONE"),
        ("Build", "DONE"),
        ("Review", "DONE"),
        ("Ship", "DONE"),
    ]
    ids = client.agents(ws_id)
    runs = wait_for("every run to end", lambda: _ended_runs(client, workspace_id=ws_id))
    assert all(run["status"] in ("finished", "cancelled") for run in runs), runs
    launched = [run for run in runs if run["started_at"] is not None]
    per_agent = {name: [r for r in launched if r["agent_id"] == ids[name]] for name in agents}
    assert {name: len(found) for name, found in per_agent.items()} == {
        "lead": 2,  # the plan, and the close once every step has ended
        "spec-writer": 2,  # the first draft, and the rework after the rejection
        "builder": 1,
        "reviewer": 1,
        "shipper": 1,
    }
    assert [r["source"] for r in per_agent["spec-writer"]] == ["task_assigned", "comment"]
    rework = per_agent["spec-writer"][1]
    merged = client.call("GET", f"/wakeups?run_id={rework['id']}")["items"]
    (wake,) = [entry for entry in merged if entry["source"] == "comment"]
    assert wake["payload"]["rejection"]["note"] == NOTE
    assert wake["payload"]["rejection"]["by"].startswith("user:")
    assert wake["payload"]["comment_id"]
    prompt = (tmp_path / "prompts" / f"{rework['id']}.md").read_text()
    assert NOTE in prompt
    for name in ("builder", "reviewer", "shipper"):
        held = [r for r in runs if r["agent_id"] == ids[name] and r["started_at"] is None]
        assert [(r["source"], r["reason"]) for r in held] == [("task_assigned", "blocked")]
        assert [r["source"] for r in per_agent[name]] == ["task_blockers_resolved"]
    lead_sources = [r["source"] for r in per_agent["lead"]]
    assert lead_sources == ["task_assigned", "task_children_completed"]
    decided = client.call("GET", f"/workspaces/{ws_id}/approvals")["items"]
    assert [a["status"] for a in decided] == ["approved", "rejected"]
    store = Store.open(f"sqlite:///{tmp_path / 'home' / 'office.db'}")
    try:
        inbox = store.runlog.list_inbox(ws_id)
    finally:
        store.close()
    assert sorted((item.kind.value, item.status.value) for item in inbox) == [
        ("task.review", "resolved"),
        ("task.review", "resolved"),
    ]


@pytest.mark.timeout(180)
def test_four_children_ending_together_wake_the_coordinator_once(
    office: tuple[Office, Server], tmp_path: Path
) -> None:
    client, _server = office
    agents = {"lead": "coordinator", "w1": "worker", "w2": "worker", "w3": "worker", "w4": "worker"}
    ws_id = client.setup(tmp_path, 5, agents)
    parent = _parent(client, ws_id, tmp_path, [f"Part {n} | w{n} | - | -" for n in range(1, 5)])
    wait_for(
        "the parent task to be done",
        lambda: client.call("GET", f"/tasks/{parent['id']}")["state"] == "DONE",
        timeout_s=150,
    )
    children = client.call("GET", f"/tasks/{parent['id']}/subtasks")["items"]
    ended = sorted(datetime.fromisoformat(c["updated_at"]) for c in children)
    assert (ended[-1] - ended[0]).total_seconds() < 3, "precondition: four ends within 3 s"
    lead = client.agents(ws_id)["lead"]
    runs = wait_for("the coordinator's last run", lambda: _ended_runs(client, agent_id=lead))
    woken = [r for r in runs if r["source"] == "task_children_completed"]
    assert len(woken) == 1, woken
    (run,) = woken
    assert run["coalesced_count"] == 4
    assert (run["status"], run["reason"]) == ("finished", "completed")
    assert run["started_at"] is not None
    assert len([r for r in runs if r["started_at"] is not None]) == 2
