"""HTTP API on both databases: notification channels, deliveries and the test send."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.store.engine import Database


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def test_channels_are_admin_only_and_never_show_their_credentials(api: Api) -> None:
    ws = api.workspace()["id"]
    worker = api.agent(ws)["id"]
    path = f"/api/v1/workspaces/{ws}/notifications"
    body = {"kind": "webhook", "url": "http://127.0.0.1:9/secret-path?token=abc"}

    made = api.ok("PUT", f"{path}/ops", json=body)
    assert made["secret"].startswith("whsec_")
    assert made["host"] == "127.0.0.1"
    listed = api.ok("GET", path)["items"]
    assert listed == [{**made, "secret": None}]
    assert "secret-path" not in str(listed)

    again = api.ok("PUT", f"{path}/ops", json={**body, "secret": made["secret"]})
    assert again["secret"] is None  # a given secret is never echoed

    token, _run = api.run_token(ws, worker)
    for method, url in (("GET", path), ("PUT", f"{path}/ops"), ("DELETE", f"{path}/ops")):
        response = api.request(method, url, token=token, json=body)
        assert response.status_code == 403, (method, url)

    assert api.request("DELETE", f"{path}/ops").status_code == 204
    assert api.ok("GET", path)["items"] == []
    missing = api.request("DELETE", f"{path}/ops")
    assert missing.status_code == 404
    assert error_of(missing)["field"] == "name"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "sms", "url": "http://x"}, "kind"),
        ({"kind": "webhook", "url": "not a url"}, "url"),
        ({"kind": "webhook", "url": "http://x", "events": ["nope"]}, "events[0]"),
        ({"kind": "webhook", "url": "http://x", "colour": 1}, "colour"),
    ],
)
def test_bad_channels_are_422_naming_the_field(
    api: Api, body: dict[str, object], field: str
) -> None:
    ws = api.workspace()["id"]
    response = api.request("PUT", f"/api/v1/workspaces/{ws}/notifications/ops", json=body)
    assert response.status_code == 422
    assert error_of(response)["field"].endswith(field)


def test_deliveries_and_the_test_send(api: Api) -> None:
    ws = api.workspace()["id"]
    seen: list[httpx.Request] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    api.service.notifications._transport = httpx.MockTransport(receiver)
    path = f"/api/v1/workspaces/{ws}/notifications"
    api.ok("PUT", f"{path}/ops", json={"url": "http://127.0.0.1:9/", "events": ["task.done"]})

    result = api.ok("POST", f"{path}/ops/test")
    assert result["delivered"] is True
    assert result["status_code"] == 204
    assert seen[0].headers["webhook-id"] == result["delivery_id"]

    task = api.task(ws)["id"]
    api.ok("PATCH", f"/api/v1/tasks/{task}", json={"state": "DONE"})
    [pending] = api.ok("GET", f"/api/v1/workspaces/{ws}/notification-deliveries")["items"]
    assert (pending["event"], pending["status"], pending["channel"]) == (
        "task.done",
        "pending",
        "ops",
    )
    assert api.call(api.service.notifications.deliver_due) == 1
    [done] = api.ok(
        "GET", f"/api/v1/workspaces/{ws}/notification-deliveries", params={"status": "delivered"}
    )["items"]
    assert done["id"] == pending["id"] == seen[1].headers["webhook-id"]
