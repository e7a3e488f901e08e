"""HTTP API of routines: CRUD, validation, manual fires, triggers and signed webhooks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.routines.webhooks import sign
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


class Office:
    """A workspace with one worker agent."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.ws = api.workspace("acme")["id"]
        self.agent = api.agent(self.ws, "worker-1")["id"]

    def routine(self, name: str = "Daily triage", **fields: Any) -> dict[str, Any]:
        body = {"name": name, "assignee_agent_id": self.agent, **fields}
        path = f"/api/v1/workspaces/{self.ws}/routines"
        result: dict[str, Any] = self.api.ok("POST", path, status=201, json=body)
        return result

    def trigger(self, routine_id: str, **fields: Any) -> dict[str, Any]:
        path = f"/api/v1/routines/{routine_id}/triggers"
        result: dict[str, Any] = self.api.ok("POST", path, status=201, json=fields)
        return result

    def runs(self, routine_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api.ok("GET", f"/api/v1/routines/{routine_id}/runs")[
            "items"
        ]
        return items


@pytest.fixture
def office(api: Api) -> Office:
    return Office(api)


def deliver(
    api: Api,
    url_path: str,
    body: bytes = b"{}",
    *,
    secret: str | None = None,
    timestamp: int | None = None,
    signature: str | None = None,
    bearer: str | None = None,
    key: str | None = None,
) -> httpx2.Response:
    """POST a webhook delivery without the admin token, signed when ``secret`` is given."""
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        stamp = int(api.clock.now().timestamp()) if timestamp is None else timestamp
        headers["X-Signature-Timestamp"] = str(stamp)
        headers["X-Signature-256"] = signature or sign(secret, stamp, body)
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    if key is not None:
        headers["Idempotency-Key"] = key
    return api.client.post(url_path, content=body, headers=headers)


# -- CRUD ---------------------------------------------------------------------------------


def test_routine_crud(api: Api, office: Office) -> None:
    created = office.routine(
        description="look at new issues",
        concurrency_policy="skip_if_active",
        catch_up_policy="skip_missed",
        catch_up_max=3,
        variables=[
            {"name": "label", "type": "select", "options": ["bug", "ops"], "default": "bug"}
        ],
    )
    assert created["kind"] == "lightweight"
    assert created["status"] == "active"
    assert created["assignee_agent_id"] == office.agent
    assert (created["concurrency_policy"], created["catch_up_policy"]) == (
        "skip_if_active",
        "skip_missed",
    )
    assert created["catch_up_max"] == 3
    assert created["task_template"] is None
    assert created["variables"] == [
        {"name": "label", "type": "select", "default": "bug", "required": False,
         "options": ["bug", "ops"], "path": None},
    ]  # fmt: skip
    assert created["created_at"].endswith("Z")
    routine_id = created["id"]

    assert api.ok("GET", f"/api/v1/routines/{routine_id}") == created
    listed = api.ok("GET", f"/api/v1/workspaces/{office.ws}/routines")
    assert [item["id"] for item in listed["items"]] == [routine_id]

    api.clock.advance(timedelta(seconds=5))
    changed = api.ok(
        "PATCH",
        f"/api/v1/routines/{routine_id}",
        json={"name": "Triage", "task_template": {"title": "Triage {{label}}"}},
    )
    assert changed["name"] == "Triage"
    assert changed["kind"] == "heavy"
    assert changed["task_template"] == {"title": "Triage {{label}}", "description": ""}
    assert changed["updated_at"] > created["updated_at"]
    unassigned = api.ok("PATCH", f"/api/v1/routines/{routine_id}", json={"assignee_agent_id": None})
    assert unassigned["assignee_agent_id"] is None

    deleted = api.request("DELETE", f"/api/v1/routines/{routine_id}")
    assert deleted.status_code == 204
    assert deleted.content == b""
    missing = api.request("GET", f"/api/v1/routines/{routine_id}")
    assert missing.status_code == 404
    assert error_of(missing)["field"] == "routine_id"
    assert api.ok("GET", f"/api/v1/workspaces/{office.ws}/routines")["items"] == []


def test_template_placeholders_are_declared_on_save(api: Api, office: Office) -> None:
    created = office.routine(
        task_template={"title": "Report {{date}} for {{team}}", "description": "{{new_var}}"},
        variables=[{"name": "team", "type": "text", "default": "core", "required": True}],
    )
    assert created["kind"] == "heavy"
    names = [(v["name"], v["type"], v["default"], v["required"]) for v in created["variables"]]
    assert names == [("team", "text", "core", True), ("new_var", "text", None, False)]

    changed = api.ok(
        "PATCH",
        f"/api/v1/routines/{created['id']}",
        json={"task_template": {"title": "Report {{team}} {{extra}}"}},
    )
    assert [v["name"] for v in changed["variables"]] == ["team", "new_var", "extra"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "concurrency_policy": "sometimes"}, "concurrency_policy"),
        ({"name": "x", "catch_up_policy": "all"}, "catch_up_policy"),
        ({"name": "x", "catch_up_max": 0}, "catch_up_max"),
        ({"name": "x", "status": "sleeping"}, "status"),
        ({"name": "   "}, "name"),
        ({"description": "no name"}, "name"),
        ({"name": "x", "task_template": {"title": ""}}, "task_template.title"),
        ({"name": "x", "variables": [{"name": "n", "type": "float"}]}, "variables[0].type"),
        ({"name": "x", "variables": [{"name": "date"}]}, "variables[0].name"),
        ({"name": "x", "variables": [{"name": "n", "type": "number", "default": "many"}]},
         "variables[0].default"),
        ({"name": "x", "colour": "red"}, "colour"),
    ],
)  # fmt: skip
def test_invalid_routines_are_422_naming_the_field(
    api: Api, office: Office, body: dict[str, Any], field: str
) -> None:
    response = api.request("POST", f"/api/v1/workspaces/{office.ws}/routines", json=body)

    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["field"] == field
    assert error["code"] == "invalid"


def test_invalid_patch_and_unknown_references(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    bad_policy = api.request(
        "PATCH", f"/api/v1/routines/{routine_id}", json={"concurrency_policy": "never"}
    )
    null_name = api.request("PATCH", f"/api/v1/routines/{routine_id}", json={"name": None})
    nobody = api.request(
        "PATCH", f"/api/v1/routines/{routine_id}", json={"assignee_agent_id": "nobody"}
    )
    no_space = api.request("POST", "/api/v1/workspaces/nope/routines", json={"name": "x"})
    no_space_list = api.request("GET", "/api/v1/workspaces/nope/routines")

    assert (bad_policy.status_code, error_of(bad_policy)["field"]) == (422, "concurrency_policy")
    assert "coalesce_if_active" in error_of(bad_policy)["message"]
    assert (null_name.status_code, error_of(null_name)["field"]) == (422, "name")
    assert (nobody.status_code, error_of(nobody)["field"]) == (404, "assignee_agent_id")
    assert no_space.status_code == 404
    assert no_space_list.status_code == 404
    for path in ("/api/v1/routines/nope", "/api/v1/routines/nope/runs"):
        assert api.request("GET", path).status_code == 404
    assert api.request("PATCH", "/api/v1/routine-triggers/nope", json={}).status_code == 404
    assert api.request("DELETE", "/api/v1/routine-triggers/nope").status_code == 404


def test_run_tokens_read_their_workspace_only_and_cannot_write(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    token, _run_id = api.run_token(office.ws, office.agent)
    other_ws = api.workspace("globex")["id"]
    other_agent = api.agent(other_ws, "spy")["id"]
    other_token, _ = api.run_token(other_ws, other_agent)

    assert api.request("GET", f"/api/v1/routines/{routine_id}", token=token).status_code == 200
    listed = api.request("GET", f"/api/v1/workspaces/{office.ws}/routines", token=token)
    assert listed.status_code == 200
    runs = api.request("GET", f"/api/v1/routines/{routine_id}/runs", token=token)
    assert runs.status_code == 200
    hidden = api.request("GET", f"/api/v1/routines/{routine_id}", token=other_token)
    assert hidden.status_code == 404
    assert error_of(hidden)["field"] == "routine_id"
    fire = api.request("POST", f"/api/v1/routines/{routine_id}/fire", token=token, json={})
    assert fire.status_code == 403
    create = api.request(
        "POST", f"/api/v1/workspaces/{office.ws}/routines", token=token, json={"name": "mine"}
    )
    assert create.status_code == 403
    assert api.request("GET", f"/api/v1/routines/{routine_id}", token=None).status_code == 401


# -- manual fires -------------------------------------------------------------------------


def test_manual_fire_of_a_lightweight_routine_wakes_the_assignee(api: Api, office: Office) -> None:
    routine = office.routine(variables=[{"name": "depth", "type": "number", "default": 1}])

    fired = api.ok(
        "POST",
        f"/api/v1/routines/{routine['id']}/fire",
        status=201,
        json={"variables": {"depth": "3", "note": "by hand"}},
    )

    assert fired["source"] == "manual"
    assert fired["status"] == "dispatched", fired
    assert fired["linked_run_id"] is not None
    assert fired["linked_task_id"] is None
    assert fired["variables"]["depth"] == 3
    assert fired["variables"]["note"] == "by hand"
    assert fired["variables"]["date"] == "2026-01-05"
    assert fired["created_at"].endswith("Z")
    wakeups = api.ok("GET", "/api/v1/wakeups", params={"agent_id": office.agent})["items"]
    routine_wakes = [w for w in wakeups if w["source"] == "routine"]
    assert len(routine_wakes) == 1
    assert routine_wakes[0]["run_id"] == fired["linked_run_id"]
    assert routine_wakes[0]["payload"]["routine_id"] == routine["id"]

    again = api.ok("POST", f"/api/v1/routines/{routine['id']}/fire", status=201)
    runs = office.runs(routine["id"])
    assert [run["id"] for run in runs] == [again["id"], fired["id"]], "newest first"
    limited = api.ok("GET", f"/api/v1/routines/{routine['id']}/runs", params={"limit": 1})
    assert [run["id"] for run in limited["items"]] == [again["id"]]


def test_manual_fire_of_a_heavy_routine_creates_a_task(api: Api, office: Office) -> None:
    routine = office.routine(
        task_template={"title": "Daily report {{date}}", "description": "Scope: {{scope}}"},
        variables=[{"name": "scope", "type": "text", "default": "all"}],
    )

    fired = api.ok("POST", f"/api/v1/routines/{routine['id']}/fire", status=201, json={})

    assert fired["status"] == "task_created", fired
    assert fired["linked_task_id"] is not None
    task = api.ok("GET", f"/api/v1/tasks/{fired['linked_task_id']}")
    assert task["title"] == "Daily report 2026-01-05"
    assert task["description"] == "Scope: all"
    assert task["assignee_agent_id"] == office.agent
    workspace = api.service.store.office.get_workspace(office.ws)
    assert task["workflow_id"] == workspace.routine_workflow_id


@pytest.mark.parametrize(
    ("policy", "second"),
    [("coalesce_if_active", "coalesced"), ("skip_if_active", "skipped"),
     ("always_enqueue", "task_created")],
)  # fmt: skip
def test_concurrency_policy_of_manual_fires(
    api: Api, office: Office, policy: str, second: str
) -> None:
    routine = office.routine(task_template={"title": "Sweep"}, concurrency_policy=policy)
    path = f"/api/v1/routines/{routine['id']}/fire"

    first = api.ok("POST", path, status=201)
    again = api.ok("POST", path, status=201)

    assert first["status"] == "task_created"
    assert again["status"] == second, again
    if second == "coalesced":
        assert again["coalesced_into_run_id"] == first["id"]
    tasks = api.ok("GET", f"/api/v1/workspaces/{office.ws}/tasks")["items"]
    assert len(tasks) == (2 if second == "task_created" else 1)


def test_fire_rejects_inactive_routines_and_bad_variables(api: Api, office: Office) -> None:
    routine = office.routine(variables=[{"name": "count", "type": "number", "required": True}])
    path = f"/api/v1/routines/{routine['id']}/fire"

    bad = api.request("POST", path, json={"variables": {"count": "lots"}})
    missing = api.request("POST", path, json={})
    paused = api.ok("PATCH", f"/api/v1/routines/{routine['id']}", json={"status": "paused"})
    while_paused = api.request("POST", path, json={"variables": {"count": 1}})
    api.ok("PATCH", f"/api/v1/routines/{routine['id']}", json={"status": "active"})
    resumed = api.request("POST", path, json={"variables": {"count": 1}})

    assert (bad.status_code, error_of(bad)["field"]) == (422, "variables.count")
    assert (missing.status_code, error_of(missing)["field"]) == (422, "variables.count")
    assert paused["status"] == "paused"
    assert while_paused.status_code == 409
    assert error_of(while_paused)["field"] == "status"
    assert resumed.status_code == 201
    assert len(office.runs(routine["id"])) == 1


# -- triggers -----------------------------------------------------------------------------


def test_schedule_triggers(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    trigger = office.trigger(
        routine_id, kind="schedule", cron_expression="0  9 * * 1-5", timezone="Europe/Paris"
    )
    assert trigger["cron_expression"] == "0 9 * * 1-5"
    assert trigger["timezone"] == "Europe/Paris"
    assert trigger["next_run_at"] == "2026-01-06T08:00:00Z"
    assert trigger["secret"] is None
    assert trigger["url_path"] is None

    changed = api.ok(
        "PATCH", f"/api/v1/routine-triggers/{trigger['id']}", json={"cron_expression": "30 7 * * *"}
    )
    assert changed["next_run_at"] == "2026-01-06T06:30:00Z"
    disabled = api.ok("PATCH", f"/api/v1/routine-triggers/{trigger['id']}", json={"enabled": False})
    assert disabled["enabled"] is False
    listed = api.ok("GET", f"/api/v1/routines/{routine_id}/triggers")["items"]
    assert [item["id"] for item in listed] == [trigger["id"]]

    deleted = api.request("DELETE", f"/api/v1/routine-triggers/{trigger['id']}")
    assert deleted.status_code == 204
    assert api.ok("GET", f"/api/v1/routines/{routine_id}/triggers")["items"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "schedule", "cron_expression": "61 * * * *"}, "cron_expression"),
        ({"kind": "schedule", "cron_expression": "@daily"}, "cron_expression"),
        ({"kind": "schedule"}, "cron_expression"),
        ({"kind": "schedule", "cron_expression": "0 9 * * *", "timezone": "Mars/Olympus"},
         "timezone"),
        ({"kind": "sometimes"}, "kind"),
        ({}, "kind"),
        ({"kind": "webhook", "signing_mode": "md5"}, "signing_mode"),
        ({"kind": "webhook", "cron_expression": "* * * * *"}, "cron_expression"),
        ({"kind": "manual", "secret": "mine"}, "secret"),
    ],
)  # fmt: skip
def test_invalid_triggers_are_422_naming_the_field(
    api: Api, office: Office, body: dict[str, Any], field: str
) -> None:
    routine_id = office.routine()["id"]

    response = api.request("POST", f"/api/v1/routines/{routine_id}/triggers", json=body)

    assert response.status_code == 422, response.text
    assert error_of(response)["field"] == field
    assert api.ok("GET", f"/api/v1/routines/{routine_id}/triggers")["items"] == []


def test_invalid_trigger_patches(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    schedule = office.trigger(routine_id, kind="schedule", cron_expression="0 9 * * *")
    manual = office.trigger(routine_id, kind="manual")

    bad_zone = api.request(
        "PATCH", f"/api/v1/routine-triggers/{schedule['id']}", json={"timezone": "Nowhere/City"}
    )
    no_schedule = api.request(
        "PATCH", f"/api/v1/routine-triggers/{manual['id']}", json={"cron_expression": "0 * * * *"}
    )
    null_enabled = api.request(
        "PATCH", f"/api/v1/routine-triggers/{schedule['id']}", json={"enabled": None}
    )

    assert (bad_zone.status_code, error_of(bad_zone)["field"]) == (422, "timezone")
    assert (no_schedule.status_code, error_of(no_schedule)["field"]) == (422, "cron_expression")
    assert (null_enabled.status_code, error_of(null_enabled)["field"]) == (422, "enabled")


def test_webhook_secret_is_shown_only_on_creation(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    hmac_trigger = office.trigger(routine_id, kind="webhook")
    bearer = office.trigger(routine_id, kind="webhook", signing_mode="bearer")
    unsigned = office.trigger(routine_id, kind="webhook", signing_mode="none")

    assert hmac_trigger["signing_mode"] == "hmac_sha256"
    assert hmac_trigger["secret"]
    assert bearer["secret"]
    assert unsigned["secret"] is None
    public_id = hmac_trigger["public_id"]
    assert hmac_trigger["url_path"] == f"/api/routine-triggers/{public_id}/fire"
    listed = api.request("GET", f"/api/v1/routines/{routine_id}/triggers")
    assert hmac_trigger["secret"] not in listed.text
    assert bearer["secret"] not in listed.text
    assert all("secret" not in item for item in listed.json()["items"])
    patched = api.request(
        "PATCH", f"/api/v1/routine-triggers/{hmac_trigger['id']}", json={"enabled": True}
    )
    assert "secret" not in patched.json()


# -- webhooks -----------------------------------------------------------------------------


def test_signed_webhook_fires_once_per_idempotency_key(api: Api, office: Office) -> None:
    routine = office.routine(variables=[{"name": "severity", "type": "number"}])
    trigger = office.trigger(routine["id"], kind="webhook")
    body = json.dumps({"severity": 2, "alert": "disk full"}).encode()

    first = deliver(api, trigger["url_path"], body, secret=trigger["secret"], key="evt-1")
    api.clock.advance(timedelta(seconds=30))
    retry = deliver(api, trigger["url_path"], body, secret=trigger["secret"], key="evt-1")

    assert first.status_code == 202, first.text
    fired = first.json()
    assert fired["deduplicated"] is False
    run = fired["routine_run"]
    assert run["source"] == "webhook"
    assert run["trigger_id"] == trigger["id"]
    assert run["status"] == "dispatched"
    assert run["variables"]["severity"] == 2
    assert run["variables"]["alert"] == "disk full"
    assert run["idempotency_key"] == f"routine:{routine['id']}:webhook:evt-1"
    assert retry.status_code == 202, retry.text
    assert retry.json()["deduplicated"] is True
    assert retry.json()["routine_run"]["id"] == run["id"]
    assert [r["id"] for r in office.runs(routine["id"])] == [run["id"]]


def test_webhook_authentication_failures_store_nothing(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    trigger = office.trigger(routine_id, kind="webhook")
    url, secret = trigger["url_path"], trigger["secret"]
    now = int(api.clock.now().timestamp())

    unsigned = deliver(api, url)
    wrong_secret = deliver(api, url, secret="not-the-secret")
    tampered = deliver(api, url, b'{"a": 2}', secret=secret, signature=sign(secret, now, b"{}"))
    stale = deliver(api, url, secret=secret, timestamp=now - 301)
    future = deliver(api, url, secret=secret, timestamp=now + 301)
    malformed = api.client.post(
        url,
        content=b"{}",
        headers={"X-Signature-Timestamp": "soon", "X-Signature-256": sign(secret, now, b"{}")},
    )
    with_admin_token = api.client.post(
        url, content=b"{}", headers={"Authorization": f"Bearer {api.admin_token}"}
    )

    assert (unsigned.status_code, error_of(unsigned)["field"]) == (401, "X-Signature-256")
    assert (wrong_secret.status_code, error_of(wrong_secret)["field"]) == (401, "X-Signature-256")
    assert tampered.status_code == 401
    assert (stale.status_code, error_of(stale)["field"]) == (401, "X-Signature-Timestamp")
    assert future.status_code == 401
    assert (malformed.status_code, error_of(malformed)["field"]) == (401, "X-Signature-Timestamp")
    assert with_admin_token.status_code == 401, "an API token does not sign a webhook"
    assert office.runs(routine_id) == []
    assert deliver(api, url, secret=secret).status_code == 202
    assert len(office.runs(routine_id)) == 1


def test_exact_replay_of_a_signed_delivery_is_409(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    trigger = office.trigger(routine_id, kind="webhook")
    stamp = int(api.clock.now().timestamp())
    body = b'{"n": 1}'

    first = deliver(api, trigger["url_path"], body, secret=trigger["secret"], timestamp=stamp)
    api.clock.advance(timedelta(seconds=10))
    replay = deliver(api, trigger["url_path"], body, secret=trigger["secret"], timestamp=stamp)
    api.clock.advance(timedelta(seconds=1))
    fresh = deliver(api, trigger["url_path"], body, secret=trigger["secret"])

    assert first.status_code == 202, first.text
    assert replay.status_code == 409
    assert error_of(replay)["field"] == "X-Signature-256"
    assert fresh.status_code == 202, "the same body signed anew is a new delivery"
    assert len(office.runs(routine_id)) == 2


def test_bearer_and_unsigned_webhooks(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    bearer = office.trigger(routine_id, kind="webhook", signing_mode="bearer")
    unsigned = office.trigger(routine_id, kind="webhook", signing_mode="none")

    wrong = deliver(api, bearer["url_path"], bearer="nope")
    absent = deliver(api, bearer["url_path"])
    right = deliver(api, bearer["url_path"], b'{"variables": {"x": "y"}}', bearer=bearer["secret"])
    open_call = deliver(api, unsigned["url_path"], b"")

    assert (wrong.status_code, error_of(wrong)["field"]) == (401, "Authorization")
    assert absent.status_code == 401
    assert right.status_code == 202, right.text
    assert right.json()["routine_run"]["variables"]["x"] == "y"
    assert open_call.status_code == 202, open_call.text
    assert len(office.runs(routine_id)) == 2


def test_webhook_errors(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    trigger = office.trigger(routine_id, kind="webhook")
    url, secret = trigger["url_path"], trigger["secret"]

    unknown = deliver(api, "/api/routine-triggers/no-such-id/fire", secret=secret)
    not_json = deliver(api, url, b"{not json", secret=secret)
    not_object = deliver(api, url, b"[1, 2]", secret=secret)
    too_big = deliver(api, url, b"{}" + b" " * (256 * 1024), secret=secret)
    bad_key = deliver(api, url, secret=secret, key=" ")
    api.ok("PATCH", f"/api/v1/routine-triggers/{trigger['id']}", json={"enabled": False})
    disabled = deliver(api, url, secret=secret)
    api.ok("PATCH", f"/api/v1/routine-triggers/{trigger['id']}", json={"enabled": True})
    api.ok("PATCH", f"/api/v1/routines/{routine_id}", json={"status": "paused"})
    paused = deliver(api, url, secret=secret)

    assert unknown.status_code == 404
    assert (not_json.status_code, error_of(not_json)["field"]) == (422, "body")
    assert not_object.status_code == 422
    assert (too_big.status_code, error_of(too_big)["field"]) == (413, "body")
    assert (bad_key.status_code, error_of(bad_key)["field"]) == (422, "Idempotency-Key")
    assert (disabled.status_code, error_of(disabled)["field"]) == (409, "enabled")
    assert (paused.status_code, error_of(paused)["field"]) == (409, "status")
    assert office.runs(routine_id) == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"x": "a\\u0000b"}',
        b'{"x\\u0000": 1}',
        b'{"x": NaN}',
        b'{"x": 1e999}',
        b'{"x": -Infinity}',
    ],
)
def test_values_the_database_cannot_store_are_422(api: Api, office: Office, body: bytes) -> None:
    routine_id = office.routine()["id"]
    trigger = office.trigger(routine_id, kind="webhook", signing_mode="none")
    headers = {"Authorization": f"Bearer {api.admin_token}", "Content-Type": "application/json"}

    delivered = deliver(api, trigger["url_path"], body)
    fired = api.client.post(
        f"/api/v1/routines/{routine_id}/fire", content=b'{"variables": ' + body + b"}",
        headers=headers,
    )  # fmt: skip

    assert (delivered.status_code, error_of(delivered)["field"]) == (422, "body")
    assert fired.status_code == 422, fired.text
    assert error_of(fired)["field"].startswith("variables")
    assert office.runs(routine_id) == []


def test_openapi_documents_the_routine_routes(api: Api) -> None:
    paths = api.ok("GET", "/openapi.json", token=None)["paths"]

    assert "/api/v1/workspaces/{workspace_id}/routines" in paths
    assert "/api/v1/routines/{routine_id}/fire" in paths
    assert "/api/v1/routine-triggers/{trigger_id}" in paths
    assert "/api/routine-triggers/{public_id}/fire" in paths
    assert "/api/v1/routine-triggers/{public_id}/fire" not in paths
