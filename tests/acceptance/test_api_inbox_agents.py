"""HTTP API on both databases: inbox, activity filters, channel messages, agent settings."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.domain.status import InboxKind
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def _inbox_item(api: Api, ws: str, kind: InboxKind, title: str, **links: Any) -> int:
    api.clock.advance(timedelta(seconds=1))
    item = api.service.store.runlog.add_inbox_item(
        workspace_id=ws, kind=kind, title=title, now=api.clock.now(), **links
    )
    return item.id


def test_inbox_list_filters_pages_resolves_and_dismisses(api: Api) -> None:
    ws = api.workspace()["id"]
    worker = api.agent(ws)["id"]
    task = api.task(ws, assignee_agent_id=worker)["id"]
    first = _inbox_item(api, ws, InboxKind.AGENT_ERROR, "boom", agent_id=worker, task_id=task)
    second = _inbox_item(api, ws, InboxKind.TASK_REVIEW, "review me", task_id=task)
    third = _inbox_item(api, ws, InboxKind.AGENT_ERROR, "boom again")
    path = f"/api/v1/workspaces/{ws}/inbox"

    page = api.ok("GET", path, params={"limit": 2})
    assert [i["id"] for i in page["items"]] == [third, second]
    rest = api.ok("GET", path, params={"limit": 2, "cursor": page["next_cursor"]})
    assert [i["id"] for i in rest["items"]] == [first]
    assert rest["next_cursor"] is None
    item = rest["items"][0]
    assert (item["agent_id"], item["task_id"], item["approval_id"]) == (worker, task, None)
    assert item["resolved_at"] is None
    errors = api.ok("GET", path, params={"kind": "agent.error"})["items"]
    assert [i["id"] for i in errors] == [third, first]

    resolved = api.ok("POST", f"/api/v1/inbox/{first}/resolve")
    assert resolved["status"] == "resolved"
    assert resolved["resolved_at"].endswith("Z")
    api.clock.advance(timedelta(minutes=1))
    assert api.ok("POST", f"/api/v1/inbox/{first}/resolve") == resolved
    dismissed = api.ok("POST", f"/api/v1/inbox/{second}/dismiss")
    assert dismissed["status"] == "dismissed"
    conflict = api.request("POST", f"/api/v1/inbox/{second}/resolve")
    assert conflict.status_code == 409
    assert error_of(conflict)["field"] == "status"
    assert api.request("POST", f"/api/v1/inbox/{first}/dismiss").status_code == 409
    open_items = api.ok("GET", path, params={"status": "open"})["items"]
    assert [i["id"] for i in open_items] == [third]
    assert api.request("POST", "/api/v1/inbox/999999/resolve").status_code == 404
    bad = api.request("GET", path, params={"kind": "nonsense"})
    assert (bad.status_code, error_of(bad)["field"]) == (422, "kind")

    token, _run = api.run_token(ws, worker)
    assert api.ok("GET", f"/api/v1/inbox/{third}", token=token)["id"] == third
    assert api.request("POST", f"/api/v1/inbox/{third}/dismiss", token=token).status_code == 403
    other_ws = api.workspace("other")["id"]
    hidden = _inbox_item(api, other_ws, InboxKind.AGENT_ERROR, "theirs")
    assert api.request("GET", f"/api/v1/inbox/{hidden}", token=token).status_code == 404


def test_activity_filters_over_http(api: Api) -> None:
    ws = api.workspace()["id"]
    worker = api.agent(ws)["id"]
    start = api.clock.now()
    api.ok("POST", f"/api/v1/agents/{worker}/pause")
    api.clock.advance(timedelta(minutes=1))
    api.ok("POST", f"/api/v1/agents/{worker}/resume")
    path = f"/api/v1/workspaces/{ws}/activity"

    entries = api.ok("GET", path, params={"actor": "user", "agent_id": worker})["items"]
    assert [e["kind"] for e in entries] == ["agent_resumed", "agent_paused"]
    assert all(e["actor"] == "user" for e in entries)
    until = (start + timedelta(seconds=30)).isoformat()
    early = api.ok("GET", path, params={"until": until})["items"]
    assert [e["kind"] for e in early] == ["agent_paused"]
    late = api.ok("GET", path, params={"since": until.replace("+00:00", "")})["items"]
    assert [e["kind"] for e in late] == ["agent_resumed"]
    assert api.ok("GET", path, params={"kind": "agent_paused"})["items"][0]["kind"] == (
        "agent_paused"
    )
    assert api.ok("GET", path, params={"run_id": 5})["items"] == []
    assert api.ok("GET", path, params={"task_id": "nope"})["items"] == []
    cases: list[tuple[dict[str, Any], str]] = [
        ({"since": "yesterday"}, "since"),
        ({"since": until, "until": start.isoformat()}, "since"),
        ({"run_id": 0}, "run_id"),
    ]
    for params, field in cases:
        bad = api.request("GET", path, params=params)
        assert (bad.status_code, error_of(bad)["field"]) == (422, field), bad.text


def test_channel_message_becomes_a_comment_that_wakes_the_assignee(api: Api) -> None:
    ws = api.workspace()["id"]
    worker = api.agent(ws)["id"]
    task = api.task(ws, assignee_agent_id=worker)["id"]
    plain = api.task(ws, "a card", workflow="kanban", assignee_agent_id=worker)["id"]
    body = {"text": "Can you also fix the footer?", "author": "dana", "channel": "slack"}

    comment = api.ok("POST", f"/api/v1/channels/{task}/messages", status=201, json=body)
    assert (comment["author_kind"], comment["author_agent_id"]) == ("user", None)
    assert (comment["channel"], comment["external_author"]) == ("slack", "dana")
    assert comment["body"] == body["text"]
    listed = api.ok("GET", f"/api/v1/tasks/{task}/comments")["items"]
    assert listed[-1]["channel"] == "slack"
    wakes = api.service.store.listing.list_wakeups(agent_id=worker, limit=50).items
    keys = {w.idempotency_key for w in wakes}
    assert f"comment:{comment['id']}" in keys

    before = len(wakes)
    api.ok("POST", f"/api/v1/channels/{plain}/messages", status=201, json=body)
    after = api.service.store.listing.list_wakeups(agent_id=worker, limit=50).items
    assert len(after) == before, "a channel message on a non-Office task wakes nobody"

    assert api.request("POST", "/api/v1/channels/nope/messages", json=body).status_code == 404
    blank = api.request("POST", f"/api/v1/channels/{task}/messages", json={**body, "text": "  "})
    assert (blank.status_code, error_of(blank)["field"]) == (422, "text")
    token, _run = api.run_token(ws, worker)
    denied = api.request("POST", f"/api/v1/channels/{task}/messages", json=body, token=token)
    assert denied.status_code == 403
    other_task = api.task(api.workspace("other")["id"])["id"]
    hidden = api.request("POST", f"/api/v1/channels/{other_task}/messages", json=body, token=token)
    assert hidden.status_code == 403, "refused before the task is looked up"


def test_agent_settings_are_validated_and_admin_only(api: Api) -> None:
    ws = api.workspace()["id"]
    lead = api.agent(ws, "lead", role="coordinator")["id"]
    worker = api.agent(ws, reports_to=lead, permission_policy={"mode": "deny"})
    assert (worker["reports_to"], worker["permission_policy"]) == (
        lead,
        {"mode": "deny", "tools": []},
    )
    path = f"/api/v1/agents/{worker['id']}"
    changed = api.ok(
        "PATCH",
        path,
        json={
            "role": "specialist",
            "skip_idle_wakeups": False,
            "max_concurrent_sessions": 3,
            "cooldown_s": 2.5,
            "executor": "cli",
            "instructions": "Be brief.",
            "permission_policy": {"mode": "allow_listed", "tools": ["bash"]},
        },
    )
    assert (changed["role"], changed["max_concurrent_sessions"], changed["cooldown_s"]) == (
        "specialist",
        3,
        2.5,
    )
    assert changed["permission_policy"] == {"mode": "allow_listed", "tools": ["bash"]}
    cleared = api.ok("PATCH", path, json={"reports_to": None, "permission_policy": None})
    assert (cleared["reports_to"], cleared["permission_policy"]) == (None, None)

    for body, field in [
        ({"reports_to": worker["id"]}, "reports_to"),
        ({"max_concurrent_sessions": 0}, "max_concurrent_sessions"),
        ({"cooldown_s": -1}, "cooldown_s"),
        ({"role": "boss"}, "role"),
        ({"permission_policy": {"mode": "maybe"}}, "permission_policy.mode"),
        ({"colour": "red"}, "colour"),
    ]:
        bad = api.request("PATCH", path, json=body)
        assert (bad.status_code, error_of(bad)["field"]) == (422, field), body
    api.ok("PATCH", f"/api/v1/agents/{lead}", json={"reports_to": worker["id"]})
    cycle = api.request("PATCH", path, json={"reports_to": lead})
    assert (cycle.status_code, error_of(cycle)["field"]) == (422, "reports_to")

    token, _run = api.run_token(ws, worker["id"])
    attempts: list[tuple[str, str, dict[str, Any] | None]] = [
        ("PATCH", "", {"instructions": "obey me"}),
        ("POST", "/pause", None),
        ("POST", "/resume", None),
        ("POST", "/stop", None),
    ]
    for method, suffix, sent in attempts:
        response = api.request(method, path + suffix, json=sent, token=token)
        assert response.status_code == 403, (suffix, response.text)
    assert api.ok("GET", path)["instructions"] == "Be brief."


def test_pause_resume_stop_over_http(api: Api) -> None:
    ws = api.workspace()["id"]
    worker = api.agent(ws)["id"]
    path = f"/api/v1/agents/{worker}"
    paused = api.ok("POST", f"{path}/pause")
    assert (paused["status"], paused["paused_reason"]) == ("paused", "manual")
    api.ok("POST", f"{path}/wake", status=202, json={})
    api.call(api.service.run_until_idle)
    assert api.executor.launches == []
    resumed = api.ok("POST", f"{path}/resume")
    assert (resumed["status"], resumed["paused_reason"]) == ("idle", None)
    api.call(api.service.run_until_idle)
    assert len(api.executor.launches) == 1

    api.ok("POST", f"{path}/wake", status=202, json={})
    stopped = api.ok("PATCH", path, json={"status": "stopped"})
    assert stopped["status"] == "stopped"
    runs = api.ok("GET", "/api/v1/runs", params={"agent_id": worker})["items"]
    assert next((r["status"], r["reason"]) for r in runs) == ("cancelled", "agent_paused")


def test_resume_refuses_while_a_budget_policy_blocks(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = api.workspace()["id"]
    worker = api.agent(ws)["id"]
    api.service.store.office.update_agent(
        worker, now=api.clock.now(), status="paused", paused_reason="budget_exceeded"
    )

    class Budgets:
        blocking: object | None = "policy-42"

        async def blocking_policy(self, agent_id: str) -> object | None:
            return self.blocking

    budgets = Budgets()
    monkeypatch.setattr(api.service.budgets, "blocking_policy", budgets.blocking_policy)
    refused = api.request("POST", f"/api/v1/agents/{worker}/resume")
    assert refused.status_code == 409
    assert "policy-42" in error_of(refused)["message"]
    budgets.blocking = None
    assert api.ok("POST", f"/api/v1/agents/{worker}/resume")["status"] == "idle"


def _over_budget(api: Api, ws: str, agent_id: str) -> str:
    """A pause_agent policy of the agent that its spend already exceeds; its budget pause."""
    policy = api.ok(
        "POST",
        f"/api/v1/workspaces/{ws}/budgets",
        status=201,
        json={"scope_kind": "agent", "scope_id": agent_id, "limit_cents": 1},
    )
    api.service.store.budgets.add_cost_event(
        workspace_id=ws,
        agent_id=agent_id,
        input_tokens=1,
        output_tokens=1,
        cost_subcents=500,
        priced=True,
        now=api.clock.now(),
    )
    api.call(lambda: api.service.budgets.check_after_cost(agent_id, project_id=None))
    assert api.ok("GET", f"/api/v1/agents/{agent_id}")["paused_reason"] == "budget_exceeded"
    policy_id: str = policy["id"]
    return policy_id


def test_patch_status_goes_through_the_agent_control_rules(api: Api) -> None:
    """Regression (issue 4 items 5, 6): ``status: working`` revived any agent past its
    budget, and a refused PATCH still committed its other fields."""
    ws = api.workspace()["id"]
    worker = api.agent(ws, instructions="OLD")["id"]
    path = f"/api/v1/agents/{worker}"
    policy_id = _over_budget(api, ws, worker)

    refused = api.request("PATCH", path, json={"instructions": "NEW", "status": "idle"})
    assert refused.status_code == 409
    assert policy_id in error_of(refused)["message"]
    for status in ("working", "pending_approval"):
        bad = api.request("PATCH", path, json={"instructions": "NEW", "status": status})
        assert (bad.status_code, error_of(bad)["field"]) == (422, "status"), status
    after = api.ok("GET", path)
    assert (after["status"], after["instructions"]) == ("paused", "OLD")

    stopped = api.ok("PATCH", path, json={"status": "stopped", "instructions": "STOP"})
    assert (stopped["status"], stopped["instructions"]) == ("stopped", "STOP")
    revive = api.request("PATCH", path, json={"status": "working"})
    assert revive.status_code == 422
    assert api.ok("GET", path)["status"] == "stopped"
    conflict = api.request("PATCH", path, json={"status": "idle", "name": "lead"})
    assert conflict.status_code == 409

    api.ok("PATCH", f"/api/v1/budgets/{policy_id}", json={"limit_cents": 1000})
    resumed = api.ok("PATCH", path, json={"status": "idle", "instructions": "GO"})
    assert (resumed["status"], resumed["instructions"]) == ("idle", "GO")


def test_patch_checks_the_executor_and_resets_the_role_default(api: Api) -> None:
    """Regression (items 10, 11): unknown executors, stale skip_idle_wakeups, coercion."""
    ws = api.workspace()["id"]
    worker = api.agent(ws)
    assert worker["skip_idle_wakeups"] is True
    path = f"/api/v1/agents/{worker['id']}"
    for body, field in [
        ({"executor": "nope"}, "executor"),
        ({"skip_idle_wakeups": "yes"}, "skip_idle_wakeups"),
        ({"skip_idle_wakeups": 1}, "skip_idle_wakeups"),
    ]:
        bad = api.request("PATCH", path, json=body)
        assert (bad.status_code, error_of(bad)["field"]) == (422, field), body
    assert api.ok("PATCH", path, json={"executor": "cli"})["executor"] == "cli"
    assert api.ok("PATCH", path, json={"executor": None})["executor"] is None

    promoted = api.ok("PATCH", path, json={"role": "coordinator"})
    assert (promoted["role"], promoted["skip_idle_wakeups"]) == ("coordinator", False)
    kept = api.ok("PATCH", path, json={"role": "worker", "skip_idle_wakeups": False})
    assert (kept["role"], kept["skip_idle_wakeups"]) == ("worker", False)
    same_role = api.ok("PATCH", path, json={"role": "worker"})
    assert same_role["skip_idle_wakeups"] is False
    created = api.request(
        "POST", f"/api/v1/workspaces/{ws}/agents", json={"name": "x", "skip_idle_wakeups": "no"}
    )
    assert (created.status_code, error_of(created)["field"]) == (422, "skip_idle_wakeups")
