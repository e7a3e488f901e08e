"""Hostile input over HTTP: body size, JSON depth, lengths, pagination, slow bodies, the
webhook rate limit, forged webhooks, and secrets that no response ever shows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.api.limits import Limits, LimitsMiddleware, json_depth
from office_scheduler.routines.webhooks import sign
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def test_a_body_over_one_mebibyte_is_413(api: Api) -> None:
    ws = api.workspace()["id"]
    path = f"/api/v1/workspaces/{ws}/tasks"
    big = json.dumps({"title": "x", "description": "a" * (1024 * 1024)}).encode()
    declared = api.client.post(path, content=big, headers=_admin(api))
    assert (declared.status_code, error_of(declared)["code"]) == (413, "payload_too_large")
    assert error_of(declared)["field"] == "body"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the stream is counted
        yield big[: len(big) // 2]
        yield big[len(big) // 2 :]

    streamed = api.client.post(path, content=chunks(), headers=_admin(api))
    assert streamed.status_code == 413
    assert api.ok("GET", path)["items"] == [], "nothing was stored"


def test_deep_json_is_refused_without_parsing(api: Api) -> None:
    ws = api.workspace()["id"]
    agent = api.agent(ws)["id"]
    deep: Any = "leaf"
    for _ in range(40):
        deep = {"k": deep}
    response = api.request("POST", f"/api/v1/agents/{agent}/wake", json={"payload": deep})
    assert (response.status_code, error_of(response)["field"]) == (422, "body")
    assert "deeper than 32" in error_of(response)["message"]
    shallow = api.request("POST", f"/api/v1/agents/{agent}/wake", json={"payload": {"a": [1]}})
    assert shallow.status_code == 202
    assert json_depth(b'{"a": "[[[[[[[[[[", "b": [{}]}') == 3, "brackets in strings ignored"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "t" * 501}, "title"),
        ({"title": "t", "description": "d" * 100_001}, "description"),
        ({"title": "t", "blocked_by": ["x"] * 101}, "blocked_by"),
        ({"title": "t", "reviewers": ["r" * 101]}, "reviewers.0"),
        ({"title": "t", "surprise": 1}, "surprise"),
    ],
)
def test_lengths_are_checked_and_the_field_named(
    api: Api, body: dict[str, Any], field: str
) -> None:
    ws = api.workspace()["id"]
    response = api.request("POST", f"/api/v1/workspaces/{ws}/tasks", json=body)
    assert (response.status_code, error_of(response)["field"]) == (422, field)


def test_pages_are_capped_and_unparsable_bodies_are_422(api: Api) -> None:
    ws = api.workspace()["id"]
    for path in ("/api/v1/runs", "/api/v1/wakeups", f"/api/v1/workspaces/{ws}/tasks"):
        response = api.request("GET", path, params={"limit": 501})
        assert (response.status_code, error_of(response)["field"]) == (422, "limit"), path
    # Regression (found by the fuzz run): a form body was a 400 "error parsing the body".
    form = api.client.post(
        f"/api/v1/workspaces/{ws}/tasks",
        content=b"--x\r\nbroken",
        headers={**_admin(api), "Content-Type": "multipart/form-data; boundary=x"},
    )
    assert (form.status_code, error_of(form)["field"]) == (422, "body")


def test_a_slow_body_is_408() -> None:
    sent: list[dict[str, Any]] = []

    async def never_finishes() -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app is not reached")

    middleware = LimitsMiddleware(app, Limits(body_timeout_s=0.05))
    scope = {"type": "http", "method": "POST", "path": "/api/v1/workspaces", "headers": []}
    asyncio.run(middleware(scope, never_finishes, send))
    assert sent[0]["status"] == 408


class Hook:
    """A routine with an hmac-signed webhook trigger."""

    def __init__(self, api: Api, name: str = "acme") -> None:
        self.api = api
        ws = api.workspace(name)["id"]
        agent = api.agent(ws)["id"]
        body = {
            "name": "deploy",
            "assignee_agent_id": agent,
            "concurrency_policy": "always_enqueue",
        }
        path = f"/api/v1/workspaces/{ws}/routines"
        self.routine = api.ok("POST", path, status=201, json=body)["id"]
        trigger = api.ok(
            "POST", f"/api/v1/routines/{self.routine}/triggers", status=201,
            json={"kind": "webhook", "signing_mode": "hmac_sha256"},
        )  # fmt: skip
        self.url, self.secret = trigger["url_path"], trigger["secret"]

    def deliver(
        self, body: bytes = b"{}", *, secret: str | None = None, sent: bytes | None = None
    ) -> httpx2.Response:
        """Sign ``body`` with ``secret`` (the trigger's) and send it (or ``sent`` instead)."""
        stamp = int(self.api.clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            "X-Signature-Timestamp": str(stamp),
            "X-Signature-256": sign(secret or self.secret, stamp, body),
        }
        return self.api.client.post(self.url, content=sent or body, headers=headers)

    def routine_runs(self) -> int:
        return len(self.api.service.store.routines.list_runs(self.routine, limit=500))

    def runs(self) -> int:
        return len(self.api.service.store.listing.list_runs(limit=500).items)


def test_forged_replayed_or_oversized_webhooks_never_create_a_run(api: Api) -> None:
    hook = Hook(api)
    assert hook.deliver(b'{"n": 1}').status_code == 202
    assert (hook.routine_runs(), hook.runs()) == (1, 1)

    replay = hook.deliver(b'{"n": 1}')
    wrong = hook.deliver(b'{"n": 2}', secret="a-guessed-secret")
    big = b'{"n": "' + b"x" * (256 * 1024) + b'"}'
    oversized = hook.deliver(big)
    tampered_body = hook.deliver(b'{"n": 3}', sent=b'{"n": 30}')
    assert replay.status_code == 409
    assert (wrong.status_code, error_of(wrong)["field"]) == (401, "X-Signature-256")
    assert (oversized.status_code, error_of(oversized)["field"]) == (413, "body")
    assert tampered_body.status_code == 401
    assert (hook.routine_runs(), hook.runs()) == (1, 1), "nothing else was stored"


def test_the_webhook_route_is_rate_limited_per_url(api: Api) -> None:
    hook = Hook(api)
    other = Hook(api, "globex")
    now = [1000.0]
    limits: Limits = api.client.app.state.limits  # type: ignore[attr-defined]
    limits.webhook_burst, limits.webhook_per_second, limits.clock = 2, 0.5, lambda: now[0]

    assert [hook.deliver(f'{{"n": {n}}}'.encode()).status_code for n in range(2)] == [202, 202]
    limited = hook.deliver(b'{"n": 2}')
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "2"
    assert error_of(limited)["code"] == "rate_limited"
    forged = hook.deliver(b'{"n": 3}', secret="guess")
    assert forged.status_code == 429, "wrongly signed requests are limited too"
    assert other.deliver().status_code == 202, "each URL has its own bucket"
    now[0] += 2.0
    assert hook.deliver(b'{"n": 4}').status_code == 202
    assert hook.routine_runs() == 3


def test_secrets_are_never_returned(api: Api) -> None:
    hook = Hook(api)
    ws = api.ok("GET", "/api/v1/workspaces")["items"][0]
    assert ws["id"] == api.service.store.routines.get_routine(hook.routine).workspace_id
    assert ws["settings"]["executors"]["cli"]["env_keys"] == ["API_KEY"]
    reads = [
        "/api/v1/workspaces",
        f"/api/v1/workspaces/{ws['id']}",
        f"/api/v1/routines/{hook.routine}",
        f"/api/v1/routines/{hook.routine}/triggers",
        f"/api/v1/routines/{hook.routine}/runs",
        "/api/v1/tokens",
        "/api/v1/runs",
        "/api/v1/wakeups",
        f"/api/v1/workspaces/{ws['id']}/activity",
        "/openapi.json",
    ]
    for path in reads:
        text = api.request("GET", path).text
        for secret in ("s3cret", hook.secret, api.admin_token):
            assert secret not in text, (path, secret)
    patched = api.ok(
        "PATCH", f"/api/v1/workspaces/{ws['id']}",
        json={"settings": {"executors": {"cli": {"argv": ["agent-cli"]}}}},
    )  # fmt: skip
    assert "s3cret" not in json.dumps(patched)
    settings = api.service.store.office.get_workspace(ws["id"]).settings
    assert settings.executors["cli"].env == {"API_KEY": "s3cret"}, "kept, not shown"


def _admin(api: Api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.admin_token}", "Content-Type": "application/json"}
