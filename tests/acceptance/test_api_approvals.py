"""HTTP API of approvals: agents request, people decide, the requires_approval gate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def test_agent_requests_and_a_person_decides(api: Api) -> None:
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    token, _run_id = api.run_token(ws_id, worker["id"])
    path = f"/api/v1/workspaces/{ws_id}/approvals"

    asked = api.ok("POST", path, status=201, token=token, json={"title": "Deploy on Friday?"})
    assert (asked["status"], asked["kind"]) == ("pending", "generic")
    assert asked["requested_by_agent_id"] == worker["id"]
    assert asked["created_at"].endswith("Z")
    assert api.ok("GET", f"/api/v1/approvals/{asked['id']}", token=token) == asked

    refused = api.request("POST", f"/api/v1/approvals/{asked['id']}/approve", token=token)
    assert refused.status_code == 403
    assert "agents cannot approve or reject" in error_of(refused)["message"]

    decided = api.ok(
        "POST", f"/api/v1/approvals/{asked['id']}/reject", json={"decision_note": "not on Friday"}
    )
    assert (decided["status"], decided["decision_note"]) == ("rejected", "not on Friday")
    assert decided["decided_by"] == "user:test"
    assert decided["resolved_at"].endswith("Z")
    twice = api.request("POST", f"/api/v1/approvals/{asked['id']}/approve")
    assert (twice.status_code, error_of(twice)["code"]) == (409, "conflict")

    wakeups = api.ok("GET", "/api/v1/wakeups", params={"agent_id": worker["id"]})["items"]
    resolved = [w for w in wakeups if w["source"] == "approval_resolved"]
    assert [w["payload"] for w in resolved] == [
        {"approval_id": asked["id"], "status": "rejected", "decision_note": "not on Friday"}
    ]
    pending = api.ok("GET", path, params={"status": "pending"})["items"]
    assert pending == []
    everything = api.ok("GET", path)["items"]
    assert [a["id"] for a in everything] == [asked["id"]]


def test_approval_errors_use_the_envelope(api: Api) -> None:
    ws_id = api.workspace()["id"]
    other_ws = api.workspace("other")["id"]
    worker = api.agent(ws_id)
    token, _run_id = api.run_token(ws_id, worker["id"])
    path = f"/api/v1/workspaces/{ws_id}/approvals"
    cases: list[tuple[str, str, object, dict[str, str] | None, int, str]] = [
        ("POST", path, {"title": ""}, None, 422, "title"),
        ("POST", path, {"title": "x", "kind": "task_review"}, None, 422, "kind"),
        ("POST", path, {"title": "x", "task_id": "nope"}, None, 404, "task_id"),
        ("POST", path, {"title": "x", "requested_by_agent_id": "nope"}, None, 404,
         "requested_by_agent_id"),
        ("GET", path, None, {"status": "maybe"}, 422, "status"),
        ("GET", path, None, {"cursor": "garbage!"}, 422, "cursor"),
        ("GET", "/api/v1/approvals/nope", None, None, 404, "approval_id"),
        ("POST", "/api/v1/approvals/nope/approve", {}, None, 404, "approval_id"),
        ("POST", "/api/v1/workspaces/nope/approvals", {"title": "x"}, None, 404, "workspace_id"),
    ]  # fmt: skip
    for method, target, body, params, status, field in cases:
        response = api.request(method, target, json=body, params=params)
        assert response.status_code == status, (target, body, response.text)
        assert error_of(response)["field"] == field, (target, body)
    foreign = api.request(
        "POST", f"/api/v1/workspaces/{other_ws}/approvals", token=token, json={"title": "x"}
    )
    assert foreign.status_code == 404


def test_requires_approval_gate_over_http(api: Api) -> None:
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    builder = api.agent(ws_id, "builder")
    spec = api.task(ws_id, "Spec", assignee_agent_id=worker["id"], requires_approval=True)
    build = api.task(ws_id, "Build", assignee_agent_id=builder["id"], blocked_by=[spec["id"]])
    token, _run_id = api.run_token(ws_id, worker["id"])

    finished = api.ok("PATCH", f"/api/v1/tasks/{spec['id']}", token=token, json={"state": "DONE"})
    assert finished["state"] == "IN_REVIEW"
    (review,) = api.ok("GET", f"/api/v1/workspaces/{ws_id}/approvals")["items"]
    assert (review["kind"], review["task_id"]) == ("task_review", spec["id"])

    rejected = api.ok(
        "POST", f"/api/v1/approvals/{review['id']}/reject", json={"decision_note": "more tests"}
    )
    assert rejected["status"] == "rejected"
    assert api.ok("GET", f"/api/v1/tasks/{spec['id']}")["state"] == "IN_PROGRESS"
    comments = api.ok("GET", f"/api/v1/tasks/{spec['id']}/comments")["items"]
    assert "more tests" in comments[-1]["body"]

    again = api.ok("PATCH", f"/api/v1/tasks/{spec['id']}", token=token, json={"state": "DONE"})
    assert again["state"] == "IN_REVIEW"
    second = api.ok("GET", f"/api/v1/workspaces/{ws_id}/approvals", params={"status": "pending"})[
        "items"
    ][0]
    api.ok("POST", f"/api/v1/approvals/{second['id']}/approve", json={})
    assert api.ok("GET", f"/api/v1/tasks/{spec['id']}")["state"] == "DONE"
    wakeups = api.ok("GET", "/api/v1/wakeups", params={"agent_id": builder["id"]})["items"]
    assert "task_blockers_resolved" in [w["source"] for w in wakeups]
    assert build["blocked_by"] == [spec["id"]]


def test_blocker_cycles_are_422(api: Api) -> None:
    ws_id = api.workspace()["id"]
    first = api.task(ws_id, "first")
    second = api.task(ws_id, "second", blocked_by=[first["id"]])
    third = api.task(ws_id, "third", blocked_by=[second["id"]])
    for blocker in (third["id"], first["id"]):
        response = api.request(
            "POST", f"/api/v1/tasks/{first['id']}/blockers", json={"blocker_task_id": blocker}
        )
        assert response.status_code == 422
        assert error_of(response)["field"] == "blocker_task_id"


def test_agents_never_settle_a_review_over_http(api: Api) -> None:
    """Regression (issue 4 item 1): run tokens could approve or skip the review gate."""
    ws_id = api.workspace()["id"]
    assignee = api.agent(ws_id, "bee")
    other = api.agent(ws_id, "ann")
    gated = api.task(
        ws_id,
        "Gated",
        assignee_agent_id=assignee["id"],
        requires_approval=True,
        state="IN_PROGRESS",
    )
    dependant = api.task(ws_id, "Next", blocked_by=[gated["id"]])
    bee, _ = api.run_token(ws_id, assignee["id"])
    ann, _ = api.run_token(ws_id, other["id"])
    path = f"/api/v1/tasks/{gated['id']}"

    def patch(token: str, body: dict[str, object], status: int, field: str | None = None) -> None:
        response = api.request("PATCH", path, token=token, json=body)
        assert response.status_code == status, (body, response.text)
        if field is not None:
            assert error_of(response)["field"] == field

    def pending() -> list[dict[str, object]]:
        approvals = f"/api/v1/workspaces/{ws_id}/approvals"
        items: list[dict[str, object]] = api.ok("GET", approvals, params={"status": "pending"})[
            "items"
        ]
        return items

    # (b) another agent finishing it goes through the gate too.
    assert api.ok("PATCH", path, token=ann, json={"state": "DONE"})["state"] == "IN_REVIEW"
    (review,) = pending()
    assert review["requested_by_agent_id"] == other["id"]
    # (a) nobody but a person settles the pending review.
    assert api.ok("PATCH", path, token=bee, json={"state": "DONE"})["state"] == "IN_REVIEW"
    for token in (ann, bee):
        for state in ("IN_PROGRESS", "TODO", "CANCELLED"):  # (c): no cancelling either
            patch(token, {"state": state}, 403, "state")
    assert [item["id"] for item in pending()] == [review["id"]]
    assert api.ok("GET", path)["state"] == "IN_REVIEW"
    assert api.ok("GET", f"/api/v1/tasks/{dependant['id']}")["blocked_by"] == [gated["id"]]
    assert api.ok("GET", f"/api/v1/approvals/{review['id']}")["decided_by"] is None
    # (e) the review settings are for people only.
    settings: list[dict[str, object]] = [
        {"requires_approval": False},
        {"reviewers": []},
        {"approvers": [other["id"]]},
    ]
    for body in settings:
        (field,) = body
        patch(bee, body, 403, field)
    assert api.ok("GET", path)["requires_approval"] is True

    api.ok("POST", f"/api/v1/approvals/{review['id']}/reject", json={"decision_note": "no"})
    assert api.ok("GET", path)["state"] == "IN_PROGRESS"
    # (d) unassigning itself first does not skip the gate.
    api.ok("PATCH", path, token=bee, json={"assignee_agent_id": None})
    assert api.ok("PATCH", path, token=bee, json={"state": "DONE"})["state"] == "IN_REVIEW"
    (second,) = pending()
    api.ok("POST", f"/api/v1/approvals/{second['id']}/approve", json={})
    assert api.ok("GET", path)["state"] == "DONE"


def test_an_agent_cannot_create_a_gated_task_already_done(api: Api) -> None:
    """Regression: one POST with requires_approval and state DONE skipped the review."""
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    token, _run_id = api.run_token(ws_id, worker["id"])
    body = {"title": "Spec", "requires_approval": True, "state": "DONE"}
    refused = api.request("POST", f"/api/v1/workspaces/{ws_id}/tasks", token=token, json=body)
    assert refused.status_code == 403
    assert error_of(refused)["field"] == "state"
    tasks = api.ok("GET", f"/api/v1/workspaces/{ws_id}/tasks")["items"]
    assert tasks == []
    made = api.ok("POST", f"/api/v1/workspaces/{ws_id}/tasks", status=201, json=body)
    assert made["state"] == "DONE", "a person may record a task as already done"


def test_the_activity_names_who_asked_for_an_approval(api: Api) -> None:
    """Regression: a person asking on an agent's behalf was logged as the agent."""
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    token, _run_id = api.run_token(ws_id, worker["id"])
    path = f"/api/v1/workspaces/{ws_id}/approvals"
    api.ok(
        "POST",
        path,
        status=201,
        json={"title": "By a person", "requested_by_agent_id": worker["id"]},
    )
    api.ok("POST", path, status=201, token=token, json={"title": "By the agent"})

    entries = api.ok(
        "GET", f"/api/v1/workspaces/{ws_id}/activity", params={"action": "approval_requested"}
    )["items"]
    assert sorted((e["message"], e["actor"]) for e in entries) == [
        ("approval requested: By a person", "user"),
        ("approval requested: By the agent", f"agent:{worker['id']}"),
    ]
