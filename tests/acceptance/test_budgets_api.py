"""Budgets over HTTP (both databases): a real agent process that reports its cost pushes its
agent past the limit; policy CRUD, spend, errors and the ``office budget`` commands.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from api_harness import Api, error_of, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.api import create_app
from office_scheduler.cli import office
from office_scheduler.config import Settings
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor

COSTLY_AGENT = Path(__file__).parent / "agents" / "costly_agent.py"


@contextmanager
def real_agents_api(tmp_path: Path, url: str, schema: str | None) -> Iterator[Api]:
    """Like :func:`open_api`, but runs sessions as real processes (the command executor)."""
    store = Store.open(url, schema=schema)
    migrate.upgrade(store.db)
    clock = FakeClock()
    service = Service(
        Settings(home=tmp_path), clock=clock, executors={"command": CommandExecutor()}, store=store
    )
    admin_token, _record = service.tokens.mint_admin(name="test", now=clock.now())
    try:
        with TestClient(create_app(service, lifespan_manages_service=False)) as client:
            api = Api(
                service=service,
                client=client,
                clock=clock,
                executor=ScriptedExecutor(),  # unused: sessions are real processes
                admin_token=admin_token,
            )
            try:
                yield api
            finally:
                api.call(service.close)
    finally:
        store.close()


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def _drain(api: Api) -> None:
    api.clock.advance(timedelta(seconds=1))
    api.call(api.service.run_until_idle)


def _runs(api: Api, agent_id: str) -> list[tuple[str, str]]:
    items = api.ok("GET", "/api/v1/runs", params={"agent_id": agent_id, "limit": 100})["items"]
    return [(run["status"], run["reason"]) for run in sorted(items, key=lambda r: r["id"])]


def test_a_costly_run_pauses_its_agent_over_http(
    tmp_path: Path, db_url: str, db_schema: str | None
) -> None:
    with real_agents_api(tmp_path, db_url, db_schema) as api:
        costly = {"kind": "command", "argv": [sys.executable, str(COSTLY_AGENT)]}
        ws = api.workspace("acme", executors={"costly": costly}, default_executor="costly")["id"]
        boss = api.agent(ws, "boss", role="coordinator")["id"]
        # An expected run cost of 0 turns the projection off: the third run launches and
        # its real cost crosses the limit (a projected skip is tested on its own below).
        worker = api.agent(ws, "ann", expected_run_cents=0)["id"]
        for routine in api.ok("GET", f"/api/v1/workspaces/{ws}/routines")["items"]:
            assert api.request("DELETE", f"/api/v1/routines/{routine['id']}").status_code == 204
        project = api.ok(
            "POST",
            f"/api/v1/workspaces/{ws}/projects",
            status=201,
            json={"name": "site", "directory": str(tmp_path / "site")},
        )["id"]
        budget = api.ok(
            "POST",
            f"/api/v1/workspaces/{ws}/budgets",
            status=201,
            json={"scope_kind": "agent", "scope_id": worker, "limit_cents": 100},
        )
        assert (budget["action_on_exceed"], budget["alert_threshold_pct"]) == ("pause_agent", 80)

        def work(title: str) -> None:
            api.task(ws, title, project_id=project, assignee_agent_id=worker)

        work("one")  # 45 ¢
        _drain(api)
        work("two")  # 90 ¢: the alert
        _drain(api)
        work("three")  # 135 ¢: over the limit, the agent is paused
        work("four")  # queued behind three: skipped
        _drain(api)

        agent = api.ok("GET", f"/api/v1/agents/{worker}")
        assert agent["status"] == "paused"
        assert _runs(api, worker) == [("finished", "completed")] * 3 + [
            ("finished", "budget_exceeded")
        ]
        wakes = api.ok("GET", "/api/v1/wakeups", params={"agent_id": boss, "limit": 100})["items"]
        alerts = [w["payload"] for w in wakes if w["source"] == "budget_alert"]
        assert alerts == [{"agent_instance_id": worker, "budget_pct": 90}]
        inbox = api.ok("GET", f"/api/v1/workspaces/{ws}/inbox")["items"]
        kinds = sorted(item["kind"] for item in inbox)
        assert kinds == ["budget.alert", "budget.exceeded"]

        spend = api.ok("GET", f"/api/v1/workspaces/{ws}/spend")
        by_scope = {(i["scope_kind"], i["scope_id"]): i for i in spend["items"]}
        mine = by_scope[("agent", worker)]
        assert (mine["spent_cents"], mine["priced_count"], mine["unpriced_count"]) == (135, 3, 0)
        assert (mine["budget_pct"], mine["limit_cents"]) == (135, 100)
        assert by_scope[("project", project)]["spent_subcents"] == 13500

        raised = api.ok("PATCH", f"/api/v1/budgets/{budget['id']}", json={"limit_cents": 500})
        assert (raised["limit_cents"], raised["exceeded_period"]) == (500, None)
        assert api.call(lambda: api.service.budgets.blocking_policy(worker)) is None


def test_budget_crud_and_errors(api: Api) -> None:
    ws = api.workspace("acme")["id"]
    agent = api.agent(ws, "ann")["id"]
    path = f"/api/v1/workspaces/{ws}/budgets"
    created = api.ok(
        "POST", path, status=201, json={"scope_kind": "workspace", "limit_cents": 5000}
    )
    assert created["scope_id"] == ws
    assert created["created_at"].endswith("Z")
    duplicate = api.request("POST", path, json={"scope_kind": "workspace", "limit_cents": 10})
    assert duplicate.status_code == 409
    assert error_of(duplicate)["code"] == "conflict"
    for body, field in [
        ({"scope_kind": "agent", "scope_id": agent, "limit_cents": 0}, "limit_cents"),
        (
            {"scope_kind": "agent", "scope_id": agent, "limit_cents": 5, "alert_threshold_pct": 0},
            "alert_threshold_pct",
        ),
        ({"scope_kind": "agent", "limit_cents": 5}, "scope_id"),
        ({"scope_kind": "team", "limit_cents": 5}, "scope_kind"),
        ({"scope_kind": "agent", "scope_id": agent, "limit_cents": 5, "cap": 1}, "cap"),
    ]:
        response = api.request("POST", path, json=body)
        assert response.status_code == 422, (body, response.text)
        assert error_of(response)["field"] == field
    missing = api.request(
        "POST", path, json={"scope_kind": "agent", "scope_id": "x", "limit_cents": 5}
    )
    assert missing.status_code == 404
    mine = api.ok(
        "POST",
        path,
        status=201,
        json={"scope_kind": "agent", "scope_id": agent, "limit_cents": 300, "period": "lifetime"},
    )
    listed = api.ok("GET", path)["items"]
    assert [item["scope_kind"] for item in listed] == ["workspace", "agent"]
    assert api.ok("GET", f"/api/v1/budgets/{mine['id']}")["period"] == "lifetime"
    patched = api.ok("PATCH", f"/api/v1/budgets/{mine['id']}", json={"action_on_exceed": "notify"})
    assert patched["action_on_exceed"] == "notify"
    bad_patch = api.request("PATCH", f"/api/v1/budgets/{mine['id']}", json={"limit_cents": None})
    assert error_of(bad_patch)["field"] == "limit_cents"
    bad_period = api.request("GET", f"/api/v1/workspaces/{ws}/spend", params={"period": "soon"})
    assert (bad_period.status_code, error_of(bad_period)["field"]) == (422, "period")
    spend = api.ok("GET", f"/api/v1/workspaces/{ws}/spend", params={"period": "lifetime"})
    assert spend["period"] == "lifetime"
    assert spend["items"][0]["spent_subcents"] == 0

    token, _run = api.run_token(ws, agent)
    assert api.request("GET", path, token=token).status_code == 403
    assert (
        api.request(
            "POST", path, token=token, json={"scope_kind": "workspace", "limit_cents": 1}
        ).status_code
        == 403
    )
    assert api.request("DELETE", f"/api/v1/budgets/{mine['id']}").status_code == 204
    assert api.request("GET", f"/api/v1/budgets/{mine['id']}").status_code == 404


class Served:
    """The harness's app served by uvicorn in a thread, for the ``office budget`` commands."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        self.api = api
        self.url = url
        self.home = home

    def run(self, *args: str, token: str | None = None) -> Result:
        env: dict[str, str | None] = dict(CLEAN_ENV)
        env |= {"OFFICE_HOME": str(self.home), "OFFICE_TOKEN": token or self.api.admin_token}
        return CliRunner().invoke(office, ["--api-url", self.url, *args], env=env)

    def json(self, *args: str) -> Any:
        result = self.run("--json", *args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return json.loads(result.stdout)


@pytest.fixture
def served(api: Api, tmp_path: Path) -> Iterator[Served]:
    with serving_in_thread(api.client.app) as url:
        yield Served(api, url, tmp_path / "home")


def test_office_budget_commands(served: Served) -> None:
    ws = served.api.workspace("acme")["id"]
    agent = served.api.agent(ws, "ann")["id"]
    created = served.json(
        "budget", "create", "--workspace", ws, "--scope", "agent", "--agent", "ann",
        "--limit-cents", "250", "--on-exceed", "block_new_runs",
    )  # fmt: skip
    assert (created["scope_id"], created["limit_cents"]) == (agent, 250)
    listed = served.run("budget", "list", "--workspace", ws)
    assert listed.exit_code == 0
    assert "block_new_runs" in listed.stdout
    updated = served.json("budget", "update", created["id"], "--limit-cents", "400")
    assert updated["limit_cents"] == 400
    spend = served.json("budget", "spend", "--workspace", ws, "--period", "lifetime")
    assert spend["period"] == "lifetime"
    far = served.run("budget", "spend", "--workspace", ws, "--period", "9999-12")
    assert far.exit_code == 2, far.stderr
    assert "period" in far.stderr
    shown = served.run("budget", "show", created["id"])
    assert "400" in shown.stdout

    duplicate = served.run(
        "budget", "create", "--workspace", ws, "--scope", "agent", "--agent", "ann",
        "--limit-cents", "10",
    )  # fmt: skip
    assert duplicate.exit_code == 1
    assert "already has a budget" in duplicate.stderr
    no_target = served.run(
        "budget", "create", "--workspace", ws, "--scope", "project", "--limit-cents", "5"
    )
    assert no_target.exit_code == 2
    token, _run = served.api.run_token(ws, agent)
    refused = served.run("budget", "list", "--workspace", ws, token=token)
    assert refused.exit_code == 1
    assert "admin token" in refused.stderr
    deleted = served.run("budget", "delete", created["id"])
    assert deleted.exit_code == 0
    assert served.json("budget", "list", "--workspace", ws) == []


def test_spend_periods_out_of_range_and_coerced_numbers_are_422(api: Api) -> None:
    """Regression (issue 4 items 8, 11): ``period=9999-12`` was a 500 and ``"100"`` cents
    were accepted."""
    ws = api.workspace()["id"]
    for period in ("9999-12", "0000-01", "2026-13"):
        response = api.request("GET", f"/api/v1/workspaces/{ws}/spend", params={"period": period})
        assert (response.status_code, error_of(response)["field"]) == (422, "period"), period
    assert api.ok("GET", f"/api/v1/workspaces/{ws}/spend", params={"period": "9998-12"})
    path = f"/api/v1/workspaces/{ws}/budgets"
    for body, field in [
        ({"scope_kind": "workspace", "limit_cents": "100"}, "limit_cents"),
        ({"scope_kind": "workspace", "limit_cents": 100.0}, "limit_cents"),
        ({"scope_kind": "workspace", "limit_cents": 100, "alert_threshold_pct": "80"},
         "alert_threshold_pct"),
    ]:  # fmt: skip
        response = api.request("POST", path, json=body)
        assert (response.status_code, error_of(response)["field"]) == (422, field), body
    policy = api.ok("POST", path, status=201, json={"scope_kind": "workspace", "limit_cents": 100})
    patched = api.request("PATCH", f"/api/v1/budgets/{policy['id']}", json={"limit_cents": "5"})
    assert (patched.status_code, error_of(patched)["field"]) == (422, "limit_cents")


def test_a_run_projected_over_the_limit_is_skipped_over_http(
    tmp_path: Path, db_url: str, db_schema: str | None
) -> None:
    with real_agents_api(tmp_path, db_url, db_schema) as api:
        costly = {"kind": "command", "argv": [sys.executable, str(COSTLY_AGENT)]}
        ws = api.workspace("acme", executors={"costly": costly}, default_executor="costly")["id"]
        worker = api.agent(ws, "ann")["id"]
        assert api.ok("GET", f"/api/v1/agents/{worker}")["expected_run_cents"] is None
        api.ok("POST", f"/api/v1/workspaces/{ws}/budgets", status=201,
               json={"scope_kind": "agent", "scope_id": worker, "limit_cents": 100})  # fmt: skip
        patched = api.ok("PATCH", f"/api/v1/agents/{worker}", json={"expected_run_cents": 20})
        assert patched["expected_run_cents"] == 20
        bad = api.request("PATCH", f"/api/v1/agents/{worker}", json={"expected_run_cents": -1})
        assert (bad.status_code, error_of(bad)["field"]) == (422, "expected_run_cents")
        project = api.ok(
            "POST",
            f"/api/v1/workspaces/{ws}/projects",
            status=201,
            json={"name": "site", "directory": str(tmp_path / "site")},
        )["id"]
        api.task(ws, "one", project_id=project, assignee_agent_id=worker)  # 45 ¢
        _drain(api)
        api.task(ws, "two", project_id=project, assignee_agent_id=worker)  # 90 ¢
        _drain(api)
        # 90 ¢ spent + the median run (45 ¢, the history wins once cleared) would pass 100 ¢.
        api.ok("PATCH", f"/api/v1/agents/{worker}", json={"expected_run_cents": None})
        api.task(ws, "three", project_id=project, assignee_agent_id=worker)
        _drain(api)
        assert _runs(api, worker)[-1] == ("finished", "budget_exceeded")
        assert api.ok("GET", f"/api/v1/agents/{worker}")["status"] == "idle"
