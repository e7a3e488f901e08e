"""HTTP API: CRUD happy paths, validation errors, Office wakes through the API."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.domain.errors import BusyError
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def test_healthz_needs_no_token(api: Api) -> None:
    body = api.ok("GET", "/healthz", token=None)
    assert body == {
        "status": "ok",
        "database": "ok",
        "loops": {"scheduler": "not_started", "inflight_runs": 0},
        "node_id": api.service.settings.node_id,
        "role": "api",
        "maintenance_leader": False,
        "leader": {"node_id": None, "epoch": None, "expires_at": None, "this_node": False},
    }


def test_openapi_document_lists_the_routes(api: Api) -> None:
    paths = api.ok("GET", "/openapi.json", token=None)["paths"]
    assert "/api/v1/tasks/{task_id}" in paths
    assert "/api/v1/runs" in paths
    assert api.request("GET", "/docs", token=None).status_code == 200


def test_workspace_crud_hides_executor_secrets(api: Api) -> None:
    created = api.workspace("acme")
    assert created["name"] == "acme"
    assert created["created_at"].endswith("Z")
    executor = created["settings"]["executors"]["cli"]
    assert executor["env_keys"] == ["API_KEY"]
    assert "env" not in executor
    ws_id = created["id"]

    fetched = api.request("GET", f"/api/v1/workspaces/{ws_id}")
    assert fetched.status_code == 200
    assert "s3cret" not in fetched.text
    assert fetched.json() == created
    listed = api.ok("GET", "/api/v1/workspaces")
    assert [item["id"] for item in listed["items"]] == [ws_id]
    assert listed["next_cursor"] is None

    patch = {
        "description": "the office",
        "settings": {
            "coalesce_window_s": 2.5,
            "executors": {"cli": {"argv": ["other-cli", "--json"]}},
        },
    }
    changed = api.ok("PATCH", f"/api/v1/workspaces/{ws_id}", json=patch)
    assert changed["description"] == "the office"
    assert changed["settings"]["coalesce_window_s"] == 2.5
    assert changed["settings"]["default_executor"] == "cli"
    assert changed["settings"]["executors"]["cli"]["argv"] == ["other-cli", "--json"]
    stored = api.service.store.office.get_workspace(ws_id).settings.executors["cli"]
    assert stored.env == {"API_KEY": "s3cret"}, "an executor sent without env keeps its env"

    duplicate = api.request("POST", "/api/v1/workspaces", json={"name": "acme"})
    assert duplicate.status_code == 409
    assert error_of(duplicate)["field"] == "name"


def test_executor_preset_round_trips_through_the_api(api: Api) -> None:
    ws_id = api.workspace()["id"]
    patch = {
        "settings": {
            "executors": {"claude": {"preset": "claude", "preset_args": ["--model", "sonnet"]}}
        }
    }
    changed = api.ok("PATCH", f"/api/v1/workspaces/{ws_id}", json=patch)
    executor = changed["settings"]["executors"]["claude"]
    assert (executor["preset"], executor["preset_args"]) == ("claude", ["--model", "sonnet"])
    stored = api.service.store.office.get_workspace(ws_id).settings.executors["claude"]
    assert (stored.preset, stored.preset_args) == ("claude", ("--model", "sonnet"))
    bad = {"settings": {"executors": {"x": {"preset": "cursor"}}}}
    response = api.request("PATCH", f"/api/v1/workspaces/{ws_id}", json=bad)
    assert response.status_code == 422
    assert "preset" in error_of(response)["field"]


def test_project_crud(api: Api) -> None:
    ws_id = api.workspace()["id"]
    path = f"/api/v1/workspaces/{ws_id}/projects"
    project = api.ok("POST", path, status=201, json={"name": "web", "repos": ["git@x:web"]})
    assert project["workspace_id"] == ws_id
    assert project["repos"] == ["git@x:web"]
    assert api.ok("GET", f"/api/v1/projects/{project['id']}") == project
    assert [p["id"] for p in api.ok("GET", path)["items"]] == [project["id"]]
    changed = api.ok("PATCH", f"/api/v1/projects/{project['id']}", json={"directory": "/srv/web"})
    assert changed["directory"] == "/srv/web"
    cleared = api.ok("PATCH", f"/api/v1/projects/{project['id']}", json={"directory": None})
    assert cleared["directory"] is None


def test_agent_crud_and_pause(api: Api) -> None:
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id, "ceo", role="ceo", cooldown_s=30)
    assert agent["role"] == "ceo"
    assert agent["status"] == "idle"
    assert agent["cooldown_s"] == 30
    assert agent["skip_idle_wakeups"] is False, "coordinators are woken even when idle"
    assert agent["max_concurrent_sessions"] == 1
    assert api.ok("GET", f"/api/v1/agents/{agent['id']}") == agent
    listed = api.ok("GET", f"/api/v1/workspaces/{ws_id}/agents")
    assert [a["name"] for a in listed["items"]] == ["ceo"]

    paused = api.ok("PATCH", f"/api/v1/agents/{agent['id']}", json={"status": "paused"})
    assert paused["status"] == "paused"
    resumed = api.ok(
        "PATCH",
        f"/api/v1/agents/{agent['id']}",
        json={"status": "idle", "max_concurrent_sessions": 3, "cooldown_s": 5},
    )
    assert (resumed["status"], resumed["max_concurrent_sessions"]) == ("idle", 3)
    assert resumed["cooldown_s"] == 5


def test_task_crud_blockers_subtasks_archive(api: Api) -> None:
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    first = api.task(ws_id, "Design", description="draw it")
    second = api.task(ws_id, "Build", blocked_by=[first["id"]], state="TODO")
    assert second["blocked_by"] == [first["id"]]
    assert second["is_office"] is True
    assert second["children"] == []
    assert second["comments_count"] == 0
    assert second["created_at"].endswith("Z")

    child = api.task(ws_id, "Build part", parent_id=second["id"])
    detail = api.ok("GET", f"/api/v1/tasks/{second['id']}")
    assert detail["children"] == [child["id"]]
    subtasks = api.ok("GET", f"/api/v1/tasks/{second['id']}/subtasks")
    assert [t["id"] for t in subtasks["items"]] == [child["id"]]

    task_path = f"/api/v1/tasks/{first['id']}"
    changed = api.ok(
        "PATCH",
        task_path,
        json={"title": "Design v2", "state": "IN_PROGRESS", "assignee_agent_id": worker["id"]},
    )
    assert (changed["title"], changed["state"]) == ("Design v2", "IN_PROGRESS")
    assert changed["assignee_agent_id"] == worker["id"]
    unassigned = api.ok("PATCH", task_path, json={"assignee_agent_id": None})
    assert unassigned["assignee_agent_id"] is None

    blockers = f"/api/v1/tasks/{first['id']}/blockers"
    linked = api.ok("POST", blockers, json={"blocker_task_id": child["id"]})
    assert linked["blocked_by"] == [child["id"]]
    cycle = api.request("POST", blockers, json={"blocker_task_id": second["id"]})
    assert cycle.status_code == 422
    assert error_of(cycle)["field"] == "blocker_task_id"
    unlinked = api.ok("DELETE", f"{blockers}/{child['id']}")
    assert unlinked["blocked_by"] == []

    archived = api.ok("POST", f"/api/v1/tasks/{child['id']}/archive")
    assert archived["archived_at"].endswith("Z")
    tasks_path = f"/api/v1/workspaces/{ws_id}/tasks"
    visible = api.ok("GET", tasks_path)["items"]
    assert [t["id"] for t in visible] == [first["id"], second["id"]]
    everything = api.ok("GET", tasks_path, params={"include_archived": "true"})["items"]
    assert len(everything) == 3
    in_progress = api.ok("GET", tasks_path, params={"state": "IN_PROGRESS"})["items"]
    assert [t["id"] for t in in_progress] == [first["id"]]


def test_task_list_pages_with_a_cursor(api: Api) -> None:
    ws_id = api.workspace()["id"]
    ids = [api.task(ws_id, f"task {n}")["id"] for n in range(3)]
    path = f"/api/v1/workspaces/{ws_id}/tasks"
    seen: list[str] = []
    params: dict[str, str | int] = {"limit": 2}
    while True:
        page = api.ok("GET", path, params=params)
        seen += [t["id"] for t in page["items"]]
        if page["next_cursor"] is None:
            break
        params = {"limit": 2, "cursor": page["next_cursor"]}
    assert seen == ids


def test_comments_by_a_person(api: Api) -> None:
    ws_id = api.workspace()["id"]
    task = api.task(ws_id)
    path = f"/api/v1/tasks/{task['id']}/comments"
    comment = api.ok("POST", path, status=201, json={"body": "looks good"})
    assert (comment["author_kind"], comment["author_agent_id"]) == ("user", None)
    assert [c["body"] for c in api.ok("GET", path)["items"]] == ["looks good"]
    assert api.ok("GET", f"/api/v1/tasks/{task['id']}")["comments_count"] == 1


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/workspaces/nope", "workspace_id"),
        ("/api/v1/workspaces/nope/tasks", "workspace_id"),
        ("/api/v1/workspaces/nope/agents", "workspace_id"),
        ("/api/v1/workspaces/nope/activity", "workspace_id"),
        ("/api/v1/projects/nope", "project_id"),
        ("/api/v1/agents/nope", "agent_id"),
        ("/api/v1/tasks/nope", "task_id"),
        ("/api/v1/tasks/nope/comments", "task_id"),
        ("/api/v1/runs/999", "run_id"),
        ("/api/v1/wakeups/999", "wakeup_id"),
    ],
)
def test_unknown_ids_are_404(api: Api, path: str, field: str) -> None:
    response = api.request("GET", path)
    assert response.status_code == 404
    error = error_of(response)
    assert (error["code"], error["field"]) == ("not_found", field)


def test_unknown_references_in_bodies_are_404(api: Api) -> None:
    ws_id = api.workspace()["id"]
    response = api.request(
        "POST", f"/api/v1/workspaces/{ws_id}/tasks", json={"title": "x", "assignee_agent_id": "z"}
    )
    assert response.status_code == 404
    assert error_of(response)["field"] == "assignee_agent_id"
    queued = api.request("POST", "/api/v1/runs", json={"task_id": "nope"})
    assert (queued.status_code, error_of(queued)["field"]) == (404, "task_id")


def test_invalid_input_is_422_naming_the_field(api: Api) -> None:
    ws_id = api.workspace()["id"]
    tasks = f"/api/v1/workspaces/{ws_id}/tasks"
    cases: list[tuple[str, str, object, str]] = [
        ("POST", tasks, {"title": ""}, "title"),
        ("POST", tasks, {"title": "   "}, "title"),
        ("POST", tasks, {"title": "x" * 501}, "title"),
        ("POST", tasks, {"title": "ok", "state": "SLEEPING"}, "state"),
        ("POST", tasks, {"title": "ok", "workflow": "routine"}, "workflow"),
        ("POST", tasks, {"title": "ok", "reviewers": ["a"] * 101}, "reviewers"),
        ("POST", tasks, {"title": "ok", "colour": "red"}, "colour"),
        ("POST", tasks, {}, "title"),
        ("POST", f"/api/v1/workspaces/{ws_id}/agents", {"name": "a", "max_concurrent_sessions": 0},
         "max_concurrent_sessions"),
        ("POST", f"/api/v1/workspaces/{ws_id}/agents", {"name": "a", "role": "intern"}, "role"),
        ("POST", "/api/v1/workspaces", {"name": "b", "settings": {"recovery_lookback_hours": 0}},
         "settings.recovery_lookback_hours"),
    ]  # fmt: skip
    for method, path, body, field in cases:
        response = api.request(method, path, json=body)
        assert response.status_code == 422, (body, response.text)
        error = error_of(response)
        assert (error["code"], error["field"]) == ("invalid", field), (body, error)
        assert error["message"]


def test_invalid_patches_and_queries_are_422(api: Api) -> None:
    ws_id = api.workspace()["id"]
    task = api.task(ws_id)
    agent = api.agent(ws_id)
    cases: list[tuple[str, str, object, dict[str, str] | None, str]] = [
        ("PATCH", f"/api/v1/tasks/{task['id']}", {"title": None}, None, "title"),
        ("PATCH", f"/api/v1/tasks/{task['id']}", {"state": "done"}, None, "state"),
        ("PATCH", f"/api/v1/agents/{agent['id']}", {"status": None}, None, "status"),
        ("PATCH", f"/api/v1/agents/{agent['id']}", {"cooldown_s": -1}, None, "cooldown_s"),
        ("GET", f"/api/v1/workspaces/{ws_id}/tasks", None, {"state": "NOPE"}, "state"),
        ("GET", f"/api/v1/workspaces/{ws_id}/tasks", None, {"limit": "0"}, "limit"),
        ("GET", "/api/v1/runs", None, {"limit": "501"}, "limit"),
        ("GET", "/api/v1/runs", None, {"cursor": "garbage!"}, "cursor"),
        ("GET", "/api/v1/runs", None, {"status": "sleeping"}, "status"),
        ("GET", "/api/v1/wakeups", None, {"cursor": "WzE4NDQ2NzQ0MDczNzA5NTUxNjE1XQ"}, "cursor"),
        ("GET", "/api/v1/runs/abc", None, None, "run_id"),
        ("GET", "/api/v1/runs/99999999999999999999", None, None, "run_id"),
    ]
    for method, path, body, params, field in cases:
        response = api.request(method, path, json=body, params=params)
        assert response.status_code == 422, (path, body, params, response.text)
        assert error_of(response)["field"] == field, (path, body, params)


def test_office_task_with_assignee_queues_a_task_assigned_wakeup(api: Api) -> None:
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    task = api.task(ws_id, assignee_agent_id=worker["id"])
    wakeups = api.ok("GET", "/api/v1/wakeups", params={"agent_id": worker["id"]})["items"]
    assert [(w["source"], w["task_id"]) for w in wakeups] == [("task_assigned", task["id"])]
    wakeup = api.ok("GET", f"/api/v1/wakeups/{wakeups[0]['id']}")
    assert wakeup == wakeups[0]
    assert wakeup["requested_at"].endswith("Z")
    runs = api.ok("GET", "/api/v1/runs", params={"task_id": task["id"]})["items"]
    assert [(r["id"], r["status"], r["source"]) for r in runs] == [
        (wakeup["run_id"], "queued", "task_assigned")
    ]


def test_kanban_task_with_assignee_queues_nothing_until_queue_run(api: Api) -> None:
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    task = api.task(ws_id, workflow="kanban", assignee_agent_id=worker["id"])
    assert task["is_office"] is False
    assert api.ok("GET", "/api/v1/wakeups", params={"workspace_id": ws_id})["items"] == []

    queued = api.ok("POST", "/api/v1/runs", status=202, json={"task_id": task["id"]})
    assert queued["outcome"] == "created"
    assert queued["wakeup"]["source"] == "queue_run"
    assert queued["wakeup"]["agent_id"] == worker["id"]
    run = api.ok("GET", f"/api/v1/runs/{queued['run_id']}")
    assert (run["status"], run["task_id"], run["source"]) == ("queued", task["id"], "queue_run")
    assert run["events"] == []
    again = api.ok(
        "POST", "/api/v1/runs", status=202, json={"task_id": task["id"], "idempotency_key": "k"}
    )
    assert again["outcome"] == "coalesced"
    duplicate = api.ok(
        "POST", "/api/v1/runs", status=202, json={"task_id": task["id"], "idempotency_key": "k"}
    )
    assert duplicate["outcome"] == "deduplicated"
    assert duplicate["wakeup"]["id"] == again["wakeup"]["id"]


def test_queue_run_without_assignee_names_agent_id(api: Api) -> None:
    ws_id = api.workspace()["id"]
    task = api.task(ws_id, workflow="kanban")
    response = api.request("POST", "/api/v1/runs", json={"task_id": task["id"]})
    assert (response.status_code, error_of(response)["field"]) == (422, "agent_id")


def test_runs_and_wakeups_list_newest_first_with_filters(api: Api) -> None:
    ws_id = api.workspace()["id"]
    worker = api.agent(ws_id)
    tasks = [api.task(ws_id, f"t{n}", workflow="kanban") for n in range(3)]
    run_ids = [
        api.ok(
            "POST", "/api/v1/runs", status=202, json={"task_id": t["id"], "agent_id": worker["id"]}
        )["run_id"]
        for t in tasks
    ]
    seen: list[int] = []
    params: dict[str, str | int] = {"limit": 2, "source": "queue_run", "status": "queued"}
    while True:
        page = api.ok("GET", "/api/v1/runs", params=params)
        seen += [r["id"] for r in page["items"]]
        if page["next_cursor"] is None:
            break
        params = {**params, "cursor": page["next_cursor"]}
    assert seen == run_ids[::-1]
    assert api.ok("GET", "/api/v1/runs", params={"status": "finished"})["items"] == []
    wakeups = api.ok("GET", "/api/v1/wakeups", params={"run_id": run_ids[0]})["items"]
    assert [w["run_id"] for w in wakeups] == [run_ids[0]]
    claimed = api.ok("GET", "/api/v1/wakeups", params={"status": "claimed", "limit": 500})
    assert len(claimed["items"]) == 3


def _cursor(key: list[object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def test_nul_characters_and_overflowing_cursors_are_422(api: Api) -> None:
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id)
    tasks = f"/api/v1/workspaces/{ws_id}/tasks"
    cases: list[tuple[str, str, object, dict[str, str] | None, str]] = [
        ("POST", tasks, {"title": "a\x00b"}, None, "title"),
        ("POST", f"/api/v1/agents/{agent['id']}/wake", {"payload": {"k": ["\x00"]}}, None,
         "payload"),
        ("GET", "/api/v1/tasks/a%00b", None, None, "task_id"),
        ("GET", tasks, None, {"assignee_agent_id": "a\x00"}, "assignee_agent_id"),
        ("GET", tasks, None, {"cursor": _cursor(["0001-01-01T00:00:00+14:00", "x"])}, "cursor"),
        ("GET", f"/api/v1/workspaces/{ws_id}/activity", None,
         {"cursor": _cursor(["2026-01-01T00:00:00+00:00", 2**64])}, "cursor"),
        ("POST", tasks, None, None, "body"),
    ]  # fmt: skip
    for method, path, body, params, field in cases:
        response = api.request(method, path, json=body, params=params)
        assert response.status_code == 422, (path, body, params, response.text)
        assert error_of(response)["field"] == field, (path, body, params)
    broken = api.client.post(
        tasks,
        content=b'{"title": ',
        headers={"Authorization": f"Bearer {api.admin_token}", "Content-Type": "application/json"},
    )
    assert (broken.status_code, error_of(broken)["field"]) == (422, "body")


def test_unknown_routes_and_methods_use_the_error_envelope(api: Api) -> None:
    missing = api.request("GET", "/api/v1/nothing-here")
    assert (missing.status_code, error_of(missing)["code"]) == (404, "not_found")
    wrong = api.request("DELETE", "/api/v1/runs")
    assert (wrong.status_code, error_of(wrong)["code"]) == (405, "method_not_allowed")


def test_an_idempotency_key_of_500_characters_is_taken_and_501_refused(api: Api) -> None:
    """Review: keys are stored with their scope (``user:<agent id>:``), so a key longer than
    462 characters failed although the API takes 500."""
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id, "worker-1")["id"]
    wake = f"/api/v1/agents/{agent}/wake"
    key = "k" * 500
    first = api.ok("POST", wake, status=202, json={"idempotency_key": key})
    again = api.ok("POST", wake, status=202, json={"idempotency_key": key})
    assert (first["outcome"], again["outcome"]) == ("created", "deduplicated")
    batch = {"wakes": [{"agent_id": agent, "idempotency_key": "b" * 500}]}
    [item] = api.ok("POST", f"/api/v1/workspaces/{ws_id}/wakes", status=202, json=batch)["items"]
    assert item["outcome"] == "coalesced"
    too_long = api.request("POST", wake, json={"idempotency_key": "k" * 501})
    assert too_long.status_code == 422
    assert error_of(too_long)["field"] == "idempotency_key"


def test_a_batch_of_wakes_is_taken_in_one_request_in_the_order_sent(api: Api) -> None:
    ws_id = api.workspace()["id"]
    first = api.agent(ws_id, "worker-1")["id"]
    second = api.agent(ws_id, "worker-2")["id"]
    task = api.task(ws_id, workflow="kanban", assignee_agent_id=first)["id"]
    single = api.ok(
        "POST", f"/api/v1/agents/{second}/wake", status=202, json={"idempotency_key": "k1"}
    )
    wakes = [
        {"agent_id": second, "reason": "review", "idempotency_key": "k2"},
        {"agent_id": first, "task_id": task, "payload": {"n": 1}},
        {"agent_id": first, "task_id": task, "reason": "again"},
        {"agent_id": second, "idempotency_key": "k1"},
    ]
    body = api.ok("POST", f"/api/v1/workspaces/{ws_id}/wakes", status=202, json={"wakes": wakes})
    items = body["items"]
    assert [(i["wakeup"]["agent_id"], i["outcome"]) for i in items] == [
        (second, "coalesced"),  # joins the run of the single wake sent before
        (first, "created"),
        (first, "coalesced"),
        (second, "deduplicated"),  # the single wake's key, scoped to the same agent
    ]
    assert items[3]["wakeup"]["id"] == single["wakeup"]["id"]
    assert items[0]["run_id"] == single["run_id"]
    assert items[1]["run_id"] == items[2]["run_id"] != single["run_id"]
    assert {i["wakeup"]["source"] for i in items} == {"user"}
    assert items[1]["wakeup"]["task_id"] == task
    assert items[1]["wakeup"]["payload"] == {"reason": None, "payload": {"n": 1}}
    listed = api.ok("GET", "/api/v1/wakeups", params={"workspace_id": ws_id})["items"]
    assert len(listed) == 4  # the single wake and three of the batch; the duplicate adds none


@pytest.mark.parametrize(
    ("wake", "status", "field"),
    [
        ({"agent_id": "ghost"}, 404, "wakes.1.agent_id"),
        ({"agent_id": "{agent}", "task_id": "ghost"}, 404, "wakes.1.task_id"),
        ({"agent_id": "{agent}", "task_id": "{unassigned}"}, 422, "wakes.1.task_id"),
        ({"agent_id": "{other}"}, 404, "wakes.1.agent_id"),
        ({"agent_id": "{agent}", "payload": {"x": "y" * 300_000}}, 422, "wakes.1.payload"),
        ({"agent_id": "{agent}", "idempotency_key": ""}, 422, "wakes.1.idempotency_key"),
        ({"agent_id": "{agent}", "colour": "red"}, 422, "wakes.1.colour"),
    ],
)
def test_a_batch_with_one_bad_wake_is_refused_whole_and_names_it(
    api: Api, wake: dict[str, object], status: int, field: str | None
) -> None:
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id)["id"]
    other_ws = api.workspace("elsewhere")["id"]
    other = api.agent(other_ws, "stranger")["id"]
    unassigned = api.task(ws_id, workflow="kanban")["id"]
    names = {"agent": agent, "other": other, "unassigned": unassigned}
    bad = {k: v.format(**names) if isinstance(v, str) else v for k, v in wake.items()}
    response = api.request(
        "POST",
        f"/api/v1/workspaces/{ws_id}/wakes",
        json={"wakes": [{"agent_id": agent, "idempotency_key": "good"}, bad]},
    )
    assert response.status_code == status, response.text
    assert error_of(response)["field"] == field
    assert api.ok("GET", "/api/v1/wakeups", params={"workspace_id": ws_id})["items"] == []
    assert api.ok("GET", "/api/v1/runs", params={"workspace_id": ws_id})["items"] == []


@pytest.mark.parametrize(("count", "field"), [(0, "wakes"), (501, "wakes")])
def test_a_batch_holds_one_to_five_hundred_wakes(api: Api, count: int, field: str) -> None:
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id)["id"]
    response = api.request(
        "POST", f"/api/v1/workspaces/{ws_id}/wakes", json={"wakes": [{"agent_id": agent}] * count}
    )
    assert (response.status_code, error_of(response)["field"]) == (422, field)


@pytest.mark.parametrize(
    ("wakes", "status", "field"),
    [
        (
            [{"agent_id": "ghost"}, {"agent_id": "{agent}", "payload": {"x": "y" * 300_000}}],
            404,
            "wakes.0.agent_id",
        ),
        (
            [{"agent_id": "{agent}", "payload": {"x": "y" * 300_000}}, {"agent_id": "ghost"}],
            422,
            "wakes.0.payload",
        ),
        (
            [{"agent_id": "ghost"}, {"agent_id": "{agent}", "task_id": "nope"}],
            404,
            "wakes.0.agent_id",
        ),
        (
            [{"agent_id": "{agent}", "task_id": "nope"}, {"agent_id": "ghost"}],
            404,
            "wakes.0.task_id",
        ),
    ],
)
def test_a_batch_error_names_the_first_bad_wake_in_the_order_sent(
    api: Api, wakes: list[dict[str, object]], status: int, field: str
) -> None:
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id, "zzz")["id"]  # sorts after "ghost"
    body = [
        {k: v.format(agent=agent) if isinstance(v, str) else v for k, v in w.items()} for w in wakes
    ]
    response = api.request("POST", f"/api/v1/workspaces/{ws_id}/wakes", json={"wakes": body})
    assert (response.status_code, error_of(response)["field"]) == (status, field)


def test_a_batch_that_keeps_meeting_concurrent_work_is_503_with_retry_after(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws_id = api.workspace()["id"]
    agent = api.agent(ws_id)["id"]

    async def busy(requests: object) -> object:
        raise BusyError("send it again")

    monkeypatch.setattr(api.service.intake, "enqueue_many", busy)
    hooks = api.client.event_hooks
    api.client.event_hooks = {"request": [], "response": []}  # this 5xx is the point
    try:
        response = api.request(
            "POST", f"/api/v1/workspaces/{ws_id}/wakes", json={"wakes": [{"agent_id": agent}]}
        )
    finally:
        api.client.event_hooks = hooks
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert error_of(response)["code"] == "busy"
