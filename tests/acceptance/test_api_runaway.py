"""Causation and runaway limits over HTTP and the CLI (on both databases)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from api_harness import Api, error_of, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.cli import office
from office_scheduler.domain.status import InboxKind
from office_scheduler.store.engine import Database


class Served:
    """A served API with two workers on their own tasks; ``run`` invokes the CLI."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        self.api, self.url, self.home = api, url, home
        self.ws = api.workspace("acme")["id"]
        self.ann = api.agent(self.ws, "ann")["id"]
        self.bob = api.agent(self.ws, "bob")["id"]
        self.ann_task = api.task(self.ws, "Ann's", assignee_agent_id=self.ann)["id"]
        self.bob_task = api.task(self.ws, "Bob's", assignee_agent_id=self.bob)["id"]

    def run(self, *args: str) -> Result:
        env: dict[str, str | None] = dict(CLEAN_ENV)
        env |= {"OFFICE_HOME": str(self.home), "OFFICE_TOKEN": self.api.admin_token}
        return CliRunner().invoke(office, ["--api-url", self.url, *args], env=env)

    def json(self, *args: str) -> Any:
        result = self.run("--json", *args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return json.loads(result.stdout)


@pytest.fixture
def served(tmp_path: Path, database: Database) -> Iterator[Served]:
    with (
        open_api(tmp_path, database=database) as api,
        serving_in_thread(api.client.app) as url,
    ):
        yield Served(api, url, tmp_path / "home")


def _comment(api: Api, task: str, token: str, body: str = "over to you") -> None:
    api.ok("POST", f"/api/v1/tasks/{task}/comments", status=201, token=token, json={"body": body})


def _last_wake(api: Api, agent: str) -> dict[str, Any]:
    items = api.ok("GET", "/api/v1/wakeups", params={"agent_id": agent, "limit": 1})["items"]
    return items[0]  # type: ignore[no-any-return]


def test_a_run_tokens_comment_is_caused_by_its_run_and_a_persons_starts_at_depth_0(
    served: Served,
) -> None:
    api = served.api
    # Bob's assignment run would take the comment's wake (a merged shallower wake keeps
    # the run's depth): cancel it, so the comment makes a run of its own.
    queued = api.ok("GET", "/api/v1/runs", params={"agent_id": served.bob, "status": "queued"})
    for run in queued["items"]:
        cancel = functools.partial(api.service.cancel_run, int(run["id"]))
        api.call(cancel)
    token, run_id = api.run_token(served.ws, served.ann)
    _comment(api, served.bob_task, token)
    wake = _last_wake(api, served.bob)
    assert (wake["source"], wake["caused_by_run_id"], wake["causation_depth"]) == (
        "comment",
        run_id,
        1,
    )
    assert wake["human_rooted"] is True  # ann's run was a person's wake
    run = api.ok("GET", f"/api/v1/runs/{wake['run_id']}")
    assert (run["caused_by_run_id"], run["causation_depth"]) == (run_id, 1)
    shown = served.run("runs", "show", str(wake["run_id"]))
    assert f"caused by run {run_id}, depth 1" in shown.stdout

    _comment(api, served.bob_task, "admin", "a person's note")
    wake = _last_wake(api, served.bob)
    assert (wake["caused_by_run_id"], wake["causation_depth"], wake["human_rooted"]) == (
        None,
        0,
        True,
    )


def test_limits_api_and_cli_set_override_and_check(served: Served) -> None:
    api = served.api
    limits = api.ok("GET", f"/api/v1/workspaces/{served.ws}/limits")
    assert limits == {
        "set": {},
        "effective": {
            "max_causation_depth": 12,
            "max_self_wakes_per_hour": 6,
            "max_runs_per_hour": 30,
            "max_workspace_runs_per_hour": 300,
            "max_routine_runs_per_day": None,
            "no_progress_runs": 3,
        },
    }
    changed = api.ok(
        "PATCH", f"/api/v1/workspaces/{served.ws}/limits", json={"max_causation_depth": 4}
    )
    assert changed["effective"]["max_causation_depth"] == 4
    agent = api.ok("PATCH", f"/api/v1/agents/{served.ann}/limits", json={"max_runs_per_hour": None})
    assert agent["set"] == {"max_runs_per_hour": None}
    assert agent["effective"]["max_runs_per_hour"] is None
    assert agent["effective"]["max_causation_depth"] == 4
    bad = api.request("PATCH", f"/api/v1/agents/{served.ann}/limits", json={"max_loops": 1})
    assert bad.status_code == 422
    assert error_of(bad)["field"] == "max_loops"
    bad = api.request(
        "PATCH", f"/api/v1/workspaces/{served.ws}/limits", json={"max_runs_per_hour": -1}
    )
    assert bad.status_code == 422
    assert error_of(bad)["field"] == "max_runs_per_hour"
    token, _ = api.run_token(served.ws, served.ann)
    denied = api.request(
        "PATCH", f"/api/v1/agents/{served.ann}/limits", token=token, json={"max_runs_per_hour": 99}
    )
    assert denied.status_code == 403

    shown = served.json("limits", "set", "--agent", "ann", "max_runs_per_hour=inherit")
    assert shown["set"] == {}
    assert shown["effective"]["max_runs_per_hour"] == 30
    shown = served.json("limits", "set", "max_self_wakes_per_hour=none")
    assert shown["effective"]["max_self_wakes_per_hour"] is None
    table = served.run("limits", "show")
    assert "max_causation_depth" in table.stdout
    wrong = served.run("limits", "set", "max_loops=3")
    assert wrong.exit_code == 2
    assert "max_loops" in wrong.stderr


def test_a_held_wake_is_listed_and_released_once_by_api_and_cli(served: Served) -> None:
    api = served.api
    api.ok("PATCH", f"/api/v1/agents/{served.bob}/limits", json={"max_causation_depth": 0})
    token, run_id = api.run_token(served.ws, served.ann)
    _comment(api, served.bob_task, token, "first")
    _comment(api, served.bob_task, token, "second")

    held = served.json("wakeups", "list", "--status", "held")
    assert [w["status_reason"] for w in held] == ["depth_limit", "depth_limit"]
    assert all(w["run_id"] is None and w["caused_by_run_id"] == run_id for w in held)
    [item] = api.ok("GET", f"/api/v1/workspaces/{served.ws}/inbox", params={"kind": "wake.held"})[
        "items"
    ]
    assert item["agent_id"] == served.bob
    assert item["data"]["held_count"] == 2
    assert item["data"]["chain"][0]["run_id"] == run_id

    denied = api.request("POST", f"/api/v1/inbox/{item['id']}/release", token=token)
    assert denied.status_code == 403
    older, newer = sorted(w["id"] for w in held)
    released = served.json("wakeups", "release", str(older))
    [one] = released["items"]
    assert one["released"] is True
    assert one["successor"]["causation_depth"] == 0
    assert one["successor"]["human_rooted"] is True
    assert one["run_id"] is not None
    again = served.json("wakeups", "release", str(older))
    assert again["items"][0]["released"] is False
    assert again["items"][0]["wakeup"]["status"] == "released"

    by_item = api.ok("POST", f"/api/v1/inbox/{item['id']}/release")
    assert by_item["item"]["status"] == "resolved"
    assert [r["wakeup"]["id"] for r in by_item["items"]] == [newer]
    assert api.ok("POST", f"/api/v1/inbox/{item['id']}/release")["items"] == []
    assert served.json("wakeups", "list", "--status", "held") == []
    missing = served.run("wakeups", "release", "999999")
    assert missing.exit_code == 1
    assert error_of(api.request("POST", "/api/v1/wakeups/999999/release"))["field"] == "wakeup_id"
    mixed = api.request("POST", "/api/v1/wakeups/release", json={"wakeup_ids": [newer, 999999]})
    assert mixed.status_code == 404
    assert error_of(mixed)["field"] == "wakeup_ids"
    empty = api.request("POST", "/api/v1/wakeups/release", json={"wakeup_ids": []})
    assert empty.status_code == 422
    other = api.service.store.runlog.add_inbox_item(
        workspace_id=served.ws, kind=InboxKind.AGENT_ERROR, title="boom", now=api.clock.now()
    )
    wrong = api.request("POST", f"/api/v1/inbox/{other.id}/release")
    assert wrong.status_code == 422
    assert error_of(wrong)["field"] == "item_id"
