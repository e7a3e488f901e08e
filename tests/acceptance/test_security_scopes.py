"""The run-token scope table: every API operation is either allowed to a launched agent
(within its workspace) or refused with 403, and the specific rules hold both ways."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.auth import RUN_TOKEN_SCOPES, denial
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


class Office:
    """Two tenants; ``token`` is a live run token of ``agent`` in ``ws``."""

    def __init__(self, api: Api) -> None:
        self.ws = api.workspace("acme")["id"]
        self.agent = api.agent(self.ws, "worker-1")["id"]
        self.peer = api.agent(self.ws, "worker-2")["id"]
        self.task = api.task(self.ws, "ours", assignee_agent_id=self.agent)["id"]
        self.other_ws = api.workspace("globex")["id"]
        self.other_agent = api.agent(self.other_ws, "spy")["id"]
        self.other_task = api.task(self.other_ws, "theirs")["id"]
        self.token, self.run_id = api.run_token(self.ws, self.agent)
        base = f"/api/v1/workspaces/{self.ws}"
        self.budget = api.ok(
            "POST",
            f"{base}/budgets",
            status=201,
            json={"scope_kind": "workspace", "limit_cents": 9},
        )["id"]
        self.routine = api.ok("POST", f"{base}/routines", status=201, json={"name": "r"})["id"]
        self.project = api.ok("POST", f"{base}/projects", status=201, json={"name": "p"})["id"]


@pytest.fixture
def office(api: Api) -> Office:
    return Office(api)


def _operations(api: Api) -> list[tuple[str, str, str]]:
    """(operation name, method, path) of every authenticated API operation."""
    found = []
    for path, item in api.client.app.openapi()["paths"].items():  # type: ignore[attr-defined]
        for method, operation in item.items():
            if operation.get("security"):
                name = operation["operationId"].split("_api_")[0]
                found.append((name, method.upper(), path))
    return found


def _fill(path: str, office: Office) -> str:
    ids = {
        "workspace_id": office.ws,
        "agent_id": office.agent,
        "task_id": office.task,
        "run_id": str(office.run_id),
        "budget_id": office.budget,
        "routine_id": office.routine,
        "project_id": office.project,
    }
    return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "1"), path)


def test_the_scope_table_is_enforced_on_every_operation(api: Api, office: Office) -> None:
    operations = _operations(api)
    names = {name for name, _, _ in operations}
    assert set(RUN_TOKEN_SCOPES) <= names, "the table names only real operations"
    assert len(names - set(RUN_TOKEN_SCOPES)) >= 25, "most operations are admin-only"
    for name, method, path in operations:
        body: Any = {} if method in {"POST", "PATCH"} else None
        response = api.request(method, _fill(path, office), token=office.token, json=body)
        if name in RUN_TOKEN_SCOPES:
            assert response.status_code != 403 or "run token may not" not in response.text, name
            assert response.status_code < 500, (name, response.text)
        else:
            assert response.status_code == 403, (name, method, path, response.text)
            assert error_of(response) == {
                "code": "forbidden",
                "message": denial(name),
                "field": None,
            }
    # The admin-only calls above changed nothing.
    assert api.ok("GET", f"/api/v1/budgets/{office.budget}")["limit_cents"] == 9
    assert api.ok("GET", f"/api/v1/agents/{office.agent}")["status"] == "idle"
    admins = api.ok("GET", "/api/v1/tokens", params={"kind": "admin"})["items"]
    assert [t["name"] for t in admins] == ["test"]


def test_an_agent_cannot_reach_another_workspace(api: Api, office: Office) -> None:
    token = office.token
    wake = api.request("POST", f"/api/v1/agents/{office.other_agent}/wake", token=token, json={})
    assert (wake.status_code, error_of(wake)["field"]) == (404, "agent_id")
    reassign = api.request(
        "PATCH", f"/api/v1/tasks/{office.task}", token=token,
        json={"assignee_agent_id": office.other_agent},
    )  # fmt: skip
    assert (reassign.status_code, error_of(reassign)["field"]) == (404, "assignee_agent_id")
    theirs = api.request(
        "PATCH", f"/api/v1/tasks/{office.other_task}", token=token,
        json={"assignee_agent_id": office.agent},
    )  # fmt: skip
    assert (theirs.status_code, error_of(theirs)["field"]) == (404, "task_id")
    queued = api.request(
        "POST", "/api/v1/runs", token=token,
        json={"task_id": office.task, "agent_id": office.other_agent},
    )  # fmt: skip
    assert queued.status_code == 404
    assert api.ok("GET", f"/api/v1/tasks/{office.task}")["assignee_agent_id"] == office.agent
    wakes = api.ok("GET", "/api/v1/wakeups", params={"agent_id": office.other_agent})["items"]
    assert wakes == []


def test_an_agent_works_within_its_workspace(api: Api, office: Office) -> None:
    token = office.token
    moved = api.ok(
        "PATCH", f"/api/v1/tasks/{office.task}", token=token,
        json={"assignee_agent_id": office.peer},
    )  # fmt: skip
    assert moved["assignee_agent_id"] == office.peer
    woken = api.ok("POST", f"/api/v1/agents/{office.agent}/wake", token=token, status=202, json={})
    assert woken["wakeup"]["source"] == "self"
    peer = api.request("POST", f"/api/v1/agents/{office.peer}/wake", token=token, json={})
    assert peer.status_code == 403, "an agent wakes only itself"


def test_an_agent_cannot_approve_its_own_approval(api: Api, office: Office) -> None:
    path = f"/api/v1/workspaces/{office.ws}/approvals"
    asked = api.ok("POST", path, token=office.token, status=201, json={"title": "Ship?"})
    assert asked["requested_by_agent_id"] == office.agent
    for verb in ("approve", "reject"):
        refused = api.request("POST", f"/api/v1/approvals/{asked['id']}/{verb}", token=office.token)
        assert refused.status_code == 403
        assert "a person decides" in error_of(refused)["message"]
    assert api.ok("GET", f"/api/v1/approvals/{asked['id']}")["status"] == "pending"
    approved = api.ok("POST", f"/api/v1/approvals/{asked['id']}/approve")
    assert approved["status"] == "approved"


def test_an_agent_cannot_change_budgets(api: Api, office: Office) -> None:
    token = office.token
    attempts: list[tuple[str, str, dict[str, Any] | None]] = [
        ("PATCH", f"/api/v1/budgets/{office.budget}", {"limit_cents": 10**9}),
        ("DELETE", f"/api/v1/budgets/{office.budget}", None),
        ("POST", f"/api/v1/workspaces/{office.ws}/budgets",
         {"scope_kind": "agent", "scope_id": office.agent, "limit_cents": 10**9}),
    ]  # fmt: skip
    for method, path, body in attempts:
        assert api.request(method, path, token=token, json=body).status_code == 403, path
    budgets = api.ok("GET", f"/api/v1/workspaces/{office.ws}/budgets")["items"]
    assert [(b["scope_kind"], b["limit_cents"]) for b in budgets] == [("workspace", 9)]
