"""HTTP API: bearer tokens, run-token scoping, explicit wakes, the app lifespan."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.domain.status import RunStatus
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


class Office:
    """Two workspaces; ``agent`` has a live run token in ``ws``, ``other_ws`` is a tenant."""

    def __init__(self, api: Api) -> None:
        self.ws = api.workspace("acme")["id"]
        self.agent = api.agent(self.ws, "worker-1")["id"]
        self.peer = api.agent(self.ws, "worker-2")["id"]
        self.task = api.task(self.ws, "ours")["id"]
        self.other_ws = api.workspace("globex")["id"]
        self.other_agent = api.agent(self.other_ws, "spy")["id"]
        self.other_task = api.task(self.other_ws, "theirs")["id"]
        self.token, self.run_id = api.run_token(self.ws, self.agent)
        self.other_run = api.ok("POST", "/api/v1/runs", status=202, json={
            "task_id": self.other_task, "agent_id": self.other_agent,
        })["run_id"]  # fmt: skip


@pytest.fixture
def office(api: Api) -> Office:
    return Office(api)


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer osa_wrong", "Basic dXNlcjpwdw=="])
def test_missing_or_wrong_token_is_401(api: Api, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = api.client.get("/api/v1/workspaces", headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] == "unauthorized"


def test_revoked_admin_token_is_401(api: Api) -> None:
    secret, record = api.service.tokens.mint_admin(name="temp", now=api.clock.now())
    assert api.request("GET", "/api/v1/workspaces", token=secret).status_code == 200
    api.service.store.tokens.revoke(record.id, now=api.clock.now())
    response = api.request("GET", "/api/v1/workspaces", token=secret)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_expired_run_token_is_401(api: Api, office: Office) -> None:
    assert api.request("GET", f"/api/v1/agents/{office.agent}", token=office.token).is_success
    api.clock.advance(3601)
    response = api.request("GET", f"/api/v1/agents/{office.agent}", token=office.token)
    assert response.status_code == 401


def test_token_of_a_finished_run_is_401(api: Api, office: Office) -> None:
    assert api.request("GET", f"/api/v1/runs/{office.run_id}", token=office.token).is_success
    api.call(api.service.run_until_idle)
    run = api.ok("GET", f"/api/v1/runs/{office.run_id}")
    assert run["status"] == RunStatus.FINISHED.value, run
    assert run["finished_at"].endswith("Z")
    assert run["prompt_kind"] == "full"
    kinds = [e["kind"] for e in run["events"]]
    # A successful taskless run ends, then writes its continuation summary.
    assert kinds[-2:] == ["run_finished", "summary_updated"], kinds
    assert api.executor.launches, "the run was launched through the scripted executor"
    response = api.request("GET", f"/api/v1/runs/{office.run_id}", token=office.token)
    assert response.status_code == 401
    late = api.service.tokens.mint_run(
        workspace_id=office.ws,
        agent_id=office.agent,
        run_id=office.run_id,
        attempt=0,
        now=api.clock.now(),
        ttl=timedelta(hours=1),
    )
    unrevoked = api.request("GET", f"/api/v1/agents/{office.agent}", token=late)
    assert unrevoked.status_code == 401, "a token of an ended run is refused even unrevoked"


def test_run_token_reads_its_own_workspace(api: Api, office: Office) -> None:
    token = office.token
    listed = api.ok("GET", "/api/v1/workspaces", token=token)["items"]
    assert [w["id"] for w in listed] == [office.ws]
    assert api.ok("GET", f"/api/v1/tasks/{office.task}", token=token)["id"] == office.task
    agents = api.ok("GET", f"/api/v1/workspaces/{office.ws}/agents", token=token)["items"]
    assert {a["id"] for a in agents} == {office.agent, office.peer}
    runs = api.ok("GET", "/api/v1/runs", token=token)["items"]
    assert {r["workspace_id"] for r in runs} == {office.ws}
    wakeups = api.ok("GET", "/api/v1/wakeups", token=token)["items"]
    assert {w["workspace_id"] for w in wakeups} == {office.ws}
    assert api.ok("GET", f"/api/v1/workspaces/{office.ws}/inbox", token=token)["items"] == []


def test_other_workspace_is_404_for_a_run_token(api: Api, office: Office) -> None:
    ws, task, agent = office.other_ws, office.other_task, office.other_agent
    wakeup_id = api.ok("GET", "/api/v1/wakeups", params={"workspace_id": ws})["items"][0]["id"]
    reads: list[tuple[str, str, dict[str, Any] | None, dict[str, str] | None, str]] = [
        ("GET", f"/api/v1/workspaces/{ws}", None, None, "workspace_id"),
        ("GET", f"/api/v1/workspaces/{ws}/tasks", None, None, "workspace_id"),
        ("GET", f"/api/v1/workspaces/{ws}/projects", None, None, "workspace_id"),
        ("GET", f"/api/v1/workspaces/{ws}/activity", None, None, "workspace_id"),
        ("GET", f"/api/v1/workspaces/{ws}/inbox", None, None, "workspace_id"),
        ("GET", f"/api/v1/agents/{agent}", None, None, "agent_id"),
        ("GET", f"/api/v1/tasks/{task}", None, None, "task_id"),
        ("GET", f"/api/v1/tasks/{task}/comments", None, None, "task_id"),
        ("GET", f"/api/v1/tasks/{task}/subtasks", None, None, "task_id"),
        ("GET", f"/api/v1/runs/{office.other_run}", None, None, "run_id"),
        ("GET", f"/api/v1/wakeups/{wakeup_id}", None, None, "wakeup_id"),
        ("GET", "/api/v1/runs", None, {"workspace_id": ws}, "workspace_id"),
        ("GET", "/api/v1/wakeups", None, {"workspace_id": ws}, "workspace_id"),
        ("PATCH", f"/api/v1/tasks/{task}", {"title": "mine now"}, None, "task_id"),
        ("POST", f"/api/v1/tasks/{task}/comments", {"body": "hi"}, None, "task_id"),
        ("POST", f"/api/v1/tasks/{task}/archive", None, None, "task_id"),
        ("POST", f"/api/v1/tasks/{task}/blockers", {"blocker_task_id": office.task}, None,
         "task_id"),
        ("POST", f"/api/v1/workspaces/{ws}/tasks", {"title": "x"}, None, "workspace_id"),
        ("POST", f"/api/v1/agents/{agent}/wake", {}, None, "agent_id"),
        ("POST", "/api/v1/runs", {"task_id": task}, None, "task_id"),
        ("POST", "/api/v1/runs", {"task_id": office.task, "agent_id": agent}, None, "agent_id"),
    ]  # fmt: skip
    for method, path, body, params, field in reads:
        response = api.request(method, path, token=office.token, json=body, params=params)
        assert response.status_code == 404, (method, path, response.text)
        error = error_of(response)
        assert error["field"] == field, (method, path, error)
        assert "globex" not in response.text
    unknown = api.request("GET", "/api/v1/tasks/nope", token=office.token)
    foreign = api.request("GET", f"/api/v1/tasks/{task}", token=office.token)
    assert error_of(foreign)["message"] == error_of(unknown)["message"].replace("nope", task)
    assert api.ok("GET", f"/api/v1/tasks/{task}")["title"] == "theirs"


def test_run_token_cannot_manage_the_office(api: Api, office: Office) -> None:
    writes: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/api/v1/workspaces", {"name": "mine"}),
        ("PATCH", f"/api/v1/workspaces/{office.ws}", {"description": "x"}),
        ("POST", f"/api/v1/workspaces/{office.ws}/agents", {"name": "clone"}),
        ("PATCH", f"/api/v1/agents/{office.agent}", {"max_concurrent_sessions": 9}),
        ("PATCH", f"/api/v1/agents/{office.other_agent}", {"status": "paused"}),
        ("POST", f"/api/v1/workspaces/{office.ws}/projects", {"name": "p"}),
    ]
    for method, path, body in writes:
        response = api.request(method, path, token=office.token, json=body)
        assert response.status_code == 403, (path, response.text)
        assert error_of(response)["code"] == "forbidden"
    names = [a["name"] for a in api.ok("GET", f"/api/v1/workspaces/{office.ws}/agents")["items"]]
    assert names == ["worker-1", "worker-2"]


def test_run_token_works_on_tasks_of_its_workspace(api: Api, office: Office) -> None:
    token = office.token
    sub = api.ok("POST", f"/api/v1/workspaces/{office.ws}/tasks", token=token, status=201, json={
        "title": "split out", "parent_id": office.task, "assignee_agent_id": office.peer,
    })  # fmt: skip
    assert sub["parent_id"] == office.task
    wakeups = api.ok("GET", "/api/v1/wakeups", params={"agent_id": office.peer})["items"]
    assert [(w["source"], w["task_id"]) for w in wakeups] == [("task_assigned", sub["id"])]
    done = api.ok("PATCH", f"/api/v1/tasks/{sub['id']}", token=token, json={"state": "DONE"})
    assert done["state"] == "DONE"
    comment = api.ok(
        "POST", f"/api/v1/tasks/{office.task}/comments", token=token, status=201,
        json={"body": "on it"},
    )  # fmt: skip
    assert (comment["author_kind"], comment["author_agent_id"]) == ("agent", office.agent)
    queued = api.ok("POST", "/api/v1/runs", token=token, status=202, json={
        "task_id": office.task, "agent_id": office.peer,
    })  # fmt: skip
    assert queued["wakeup"]["source"] == "queue_run"


def test_wake_sources_user_and_self(api: Api, office: Office) -> None:
    by_admin = api.ok(
        "POST", f"/api/v1/agents/{office.peer}/wake", status=202,
        json={"reason": "standup", "payload": {"n": 1}},
    )  # fmt: skip
    assert by_admin["outcome"] == "created"
    assert by_admin["wakeup"]["source"] == "user"
    # A person's wake names who woke (the admin token's owner); an agent's own does not.
    assert by_admin["wakeup"]["payload"] == {
        "reason": "standup",
        "payload": {"n": 1},
        "user_id": "test",
    }
    assert isinstance(by_admin["run_id"], int)

    mine = api.task(office.ws, "mine", workflow="kanban", assignee_agent_id=office.agent)["id"]
    by_self = api.ok(
        "POST", f"/api/v1/agents/{office.agent}/wake", token=office.token, status=202,
        json={"reason": "check CI later", "task_id": mine, "idempotency_key": "me-1"},
    )  # fmt: skip
    assert by_self["wakeup"]["source"] == "self"
    assert by_self["wakeup"]["agent_id"] == office.agent
    assert by_self["wakeup"]["task_id"] == mine
    assert by_self["wakeup"]["payload"] == {"reason": "check CI later", "payload": {}}
    wakeup = api.ok("GET", f"/api/v1/wakeups/{by_self['wakeup']['id']}", token=office.token)
    assert wakeup == by_self["wakeup"]
    again = api.ok(
        "POST", f"/api/v1/agents/{office.agent}/wake", token=office.token, status=202,
        json={"reason": "check CI later", "task_id": mine, "idempotency_key": "me-1"},
    )  # fmt: skip
    assert again["outcome"] == "deduplicated"
    assert again["wakeup"]["id"] == by_self["wakeup"]["id"]
    other = api.request(
        "POST", f"/api/v1/agents/{office.agent}/wake", token=office.token,
        json={"reason": "again", "idempotency_key": "me-1"},
    )  # fmt: skip
    assert (other.status_code, error_of(other)["field"]) == (422, "idempotency_key")

    # A run about a task someone else holds would only be cancelled (assignee_changed).
    not_mine = api.request(
        "POST", f"/api/v1/agents/{office.agent}/wake", token=office.token,
        json={"reason": "peek", "task_id": office.task},
    )  # fmt: skip
    assert not_mine.status_code == 422
    assert error_of(not_mine) == {
        "code": "invalid",
        "field": "task_id",
        "message": f"task {office.task} has no assignee, and a wake about a task runs only for "
        "its assignee: assign it to worker-1 first, or queue a run for any agent (runs queue)",
    }

    other = api.request("POST", f"/api/v1/agents/{office.peer}/wake", token=office.token, json={})
    assert other.status_code == 403
    assert error_of(other)["code"] == "forbidden"


def test_lifespan_can_own_the_service(tmp_path: Path) -> None:
    with open_api(tmp_path, lifespan_manages_service=True) as api:
        health = api.ok("GET", "/healthz", token=None)
        assert health["loops"]["scheduler"] == "running"
        assert health["status"] == "ok"
    assert api.service.failed is not None
    assert not api.service.failed.done(), "no loop crashed"
