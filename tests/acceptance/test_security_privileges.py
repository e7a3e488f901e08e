"""An agent cannot raise its own privileges through the API: the body fields a run token
may send (generated from the OpenAPI schema, so a new field or route cannot slip past),
and the approval gate around the tasks that wait for a task under review."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api_harness import EXECUTORS, Api, error_of, open_api
from office_scheduler.auth import (
    RUN_TOKEN_FIELDS,
    RUN_TOKEN_KEPT_FIELDS,
    RUN_TOKEN_SCOPES,
    field_denial,
)
from office_scheduler.store.engine import Database

#: Fields that choose what runs or with which credentials: never a run token's.
PRIVILEGED = {"executor", "project_id"}


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def _schema(api: Api) -> dict[str, Any]:
    schema: dict[str, Any] = api.client.app.openapi()  # type: ignore[attr-defined]
    return schema


def _body_fields(api: Api) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Every run-token operation that takes a body: (method, path, properties)."""
    schema = _schema(api)
    found = {}
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            name = operation["operationId"].split("_api_")[0]
            if name not in RUN_TOKEN_SCOPES or "requestBody" not in operation:
                continue
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            model = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
            found[name] = (method.upper(), path, model["properties"])
    return found


def _sample(prop: dict[str, Any]) -> Any:
    """Some value of the property's type (refused fields are refused whatever it is)."""
    kinds = [prop.get("type")] + [option.get("type") for option in prop.get("anyOf", [])]
    for kind, value in [("boolean", False), ("array", []), ("object", {}), ("integer", 1)]:
        if kind in kinds:
            return value
    return "x"


class Office:
    """A workspace with executors ``cli`` and ``prod`` (prod's env holds its secret)."""

    def __init__(self, api: Api) -> None:
        executors = {**EXECUTORS, "prod": {"argv": ["prod-cli"], "env": {"PROD_KEY": "p"}}}
        self.ws = api.workspace("acme", executors=executors)["id"]
        self.agent = api.agent(self.ws, "worker-1")["id"]
        self.peer = api.agent(self.ws, "worker-2")["id"]
        base = f"/api/v1/workspaces/{self.ws}"
        self.project = api.ok("POST", f"{base}/projects", status=201, json={"name": "p"})["id"]
        self.task = api.task(self.ws, "ours", assignee_agent_id=self.agent)["id"]
        self.theirs = api.task(self.ws, "theirs", assignee_agent_id=self.peer)["id"]
        self.token, self.run_id = api.run_token(self.ws, self.agent)

    def ids(self) -> dict[str, str]:
        return {
            "workspace_id": self.ws,
            "agent_id": self.agent,
            "task_id": self.task,
            "run_id": str(self.run_id),
        }


@pytest.fixture
def office(api: Api) -> Office:
    return Office(api)


def test_every_run_token_route_with_a_body_has_its_fields_listed(api: Api) -> None:
    bodies = _body_fields(api)
    assert set(bodies) == set(RUN_TOKEN_FIELDS), "a route taking a body needs its field list"
    for name, (_method, _path, props) in bodies.items():
        assert RUN_TOKEN_FIELDS[name] <= set(props), f"{name} lists only real fields"
    for name in ("create_task", "update_task"):
        assert set(bodies[name][2]) >= PRIVILEGED, name
        assert not PRIVILEGED & RUN_TOKEN_FIELDS[name], name
        assert RUN_TOKEN_KEPT_FIELDS[name] == PRIVILEGED, name


def test_every_field_outside_the_list_is_refused_naming_it(api: Api, office: Office) -> None:
    ids = office.ids()
    checked = 0
    for name, (method, path, props) in _body_fields(api).items():
        url = path.format(**ids)
        for field, prop in props.items():
            sent = {field: _sample(prop)}
            response = api.request(method, url, token=office.token, json=sent)
            if field in RUN_TOKEN_FIELDS[name]:
                assert response.status_code != 403 or (
                    error_of(response)["message"] != field_denial(name, field)
                ), (name, field)
            else:
                assert response.status_code == 403, (name, field, response.text)
                assert error_of(response) == {
                    "code": "forbidden",
                    "message": field_denial(name, field),
                    "field": field,
                }
            assert response.status_code < 500
            checked += 1
    assert checked >= 25


def test_a_run_token_cannot_choose_another_executor_or_project(api: Api, office: Office) -> None:
    create = f"/api/v1/workspaces/{office.ws}/tasks"
    for field, value in [("executor", "prod"), ("project_id", office.project)]:
        mine = {"title": "escalate", "assignee_agent_id": office.agent, field: value}
        created = api.request("POST", create, token=office.token, json=mine)
        assert (created.status_code, error_of(created)["field"]) == (403, field)
        for task in (office.task, office.theirs):
            patched = api.request(
                "PATCH", f"/api/v1/tasks/{task}", token=office.token, json={field: value}
            )
            assert (patched.status_code, error_of(patched)["field"]) == (403, field)
    titles = [t["title"] for t in api.ok("GET", create)["items"]]
    assert "escalate" not in titles, "nothing was created"
    for task in (office.task, office.theirs):
        stored = api.ok("GET", f"/api/v1/tasks/{task}")
        assert (stored["executor"], stored["project_id"]) == (None, None)
    # A subtask still works, and people may set both.
    sub = {"title": "sub", "parent_id": office.task, "assignee_agent_id": office.peer}
    assert api.ok("POST", create, status=201, token=office.token, json=sub)["parent_id"]
    changed = api.ok(
        "PATCH",
        f"/api/v1/tasks/{office.task}",
        json={"executor": "prod", "project_id": office.project},
    )
    assert (changed["executor"], changed["project_id"]) == ("prod", office.project)
    made = api.ok("POST", create, status=201, json={"title": "t", "executor": "prod"})
    assert made["executor"] == "prod"


class Gate:
    """Task ``gated`` awaits a review; ``blocked`` waits for it, ``child`` is its subtask."""

    def __init__(self, api: Api, office: Office) -> None:
        ws, agent = office.ws, office.agent
        self.gated = api.task(ws, "spec", assignee_agent_id=agent, requires_approval=True)["id"]
        self.blocked = api.task(ws, "build", assignee_agent_id=agent, blocked_by=[self.gated])["id"]
        self.child = api.task(ws, "part", assignee_agent_id=agent, parent_id=self.gated)["id"]
        done = api.ok(
            "PATCH", f"/api/v1/tasks/{self.gated}", token=office.token, json={"state": "DONE"}
        )
        assert done["state"] == "IN_REVIEW"
        reviews = api.service.store.approvals.pending_task_reviews(self.gated)
        self.approval = reviews[0].id


def _refused_at_gate(response: Any, gate: Gate, field: str) -> None:
    assert response.status_code == 409, response.text
    error = error_of(response)
    assert (error["code"], error["field"]) == ("conflict", field)
    assert gate.gated in error["message"]
    assert gate.approval in error["message"]


def test_a_run_token_cannot_move_work_past_the_approval_gate(api: Api, office: Office) -> None:
    gate = Gate(api, office)
    token = office.token
    for task in (gate.blocked, gate.child):
        for state in ("DONE", "CANCELLED"):
            path = f"/api/v1/tasks/{task}"
            moved = api.request("PATCH", path, token=token, json={"state": state})
            _refused_at_gate(moved, gate, "state")
        started = api.ok(
            "PATCH", f"/api/v1/tasks/{task}", token=token, json={"state": "IN_PROGRESS"}
        )
        assert started["state"] == "IN_PROGRESS", "work short of finishing goes on"
    unblock = api.request(
        "DELETE", f"/api/v1/tasks/{gate.blocked}/blockers/{gate.gated}", token=token
    )
    _refused_at_gate(unblock, gate, "blocker_id")
    archive = api.request("POST", f"/api/v1/tasks/{gate.gated}/archive", token=token)
    _refused_at_gate(archive, gate, "task_id")
    assert api.ok("GET", f"/api/v1/tasks/{gate.blocked}")["blocked_by"] == [gate.gated]
    assert api.ok("GET", f"/api/v1/tasks/{gate.gated}")["archived_at"] is None
    assert api.ok("GET", f"/api/v1/tasks/{gate.child}")["state"] == "IN_PROGRESS"


def test_people_may_move_work_past_the_gate(api: Api, office: Office) -> None:
    gate = Gate(api, office)
    assert api.ok("PATCH", f"/api/v1/tasks/{gate.child}", json={"state": "DONE"})["state"] == (
        "DONE"
    )
    unblocked = api.ok("DELETE", f"/api/v1/tasks/{gate.blocked}/blockers/{gate.gated}")
    assert unblocked["blocked_by"] == []
    assert api.ok("POST", f"/api/v1/tasks/{gate.gated}/archive")["archived_at"] is not None


def test_after_the_decision_the_agent_may_go_on(api: Api, office: Office) -> None:
    gate = Gate(api, office)
    api.ok("POST", f"/api/v1/approvals/{gate.approval}/approve", json={})
    done = api.ok(
        "PATCH", f"/api/v1/tasks/{gate.blocked}", token=office.token, json={"state": "DONE"}
    )
    assert done["state"] == "DONE"


def test_repeating_the_value_a_task_has_anyway_is_allowed(api: Api, office: Office) -> None:
    parent = api.task(office.ws, "in project", assignee_agent_id=office.agent)["id"]
    api.ok(
        "PATCH", f"/api/v1/tasks/{parent}", json={"project_id": office.project, "executor": "cli"}
    )
    create = f"/api/v1/workspaces/{office.ws}/tasks"
    same = {"title": "sub", "parent_id": parent, "project_id": office.project, "executor": "cli"}
    sub = api.ok("POST", create, status=201, token=office.token, json=same)
    assert (sub["project_id"], sub["executor"]) == (office.project, "cli")
    repeat = {"project_id": office.project, "executor": "cli", "title": "renamed"}
    assert api.ok("PATCH", f"/api/v1/tasks/{parent}", token=office.token, json=repeat)["title"] == (
        "renamed"
    )
    for field in ("project_id", "executor"):
        cleared = api.request(
            "PATCH", f"/api/v1/tasks/{parent}", token=office.token, json={field: None}
        )
        assert (cleared.status_code, error_of(cleared)["field"]) == (403, field)
    other = {"title": "sub", "parent_id": parent, "executor": "prod"}
    refused = api.request("POST", create, token=office.token, json=other)
    assert (refused.status_code, error_of(refused)["field"]) == (403, "executor")
    plain = api.ok(
        "POST", create, status=201, token=office.token, json={"title": "t", "executor": None}
    )
    assert plain["executor"] is None
