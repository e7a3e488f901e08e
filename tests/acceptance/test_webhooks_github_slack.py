"""GitHub and Slack webhook deliveries through the HTTP API, signed as those senders sign."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.domain.models import Comment
from office_scheduler.routines.inbound import InboundWebhooks, WebhookOutcome
from office_scheduler.store.engine import Database

FIXTURES = Path(__file__).parent.parent / "fixtures" / "github"
ISSUE_OPENED = (FIXTURES / "issues.opened.json").read_bytes()
PING = (FIXTURES / "ping.json").read_bytes()
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


class Office:
    """A workspace with one worker and a heavy routine fed by GitHub issues."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.ws = api.workspace("acme")["id"]
        self.agent = api.agent(self.ws, "triager")["id"]

    def routine(self, **fields: Any) -> dict[str, Any]:
        body = {
            "name": "GitHub issues",
            "assignee_agent_id": self.agent,
            "concurrency_policy": "always_enqueue",
            "task_template": {
                "title": "GH #{{payload.issue.number}}: {{payload.issue.title}}",
                "description": "{{payload.issue.html_url}}\n{{payload.issue.milestone.title}}",
            },
            **fields,
        }
        path = f"/api/v1/workspaces/{self.ws}/routines"
        result: dict[str, Any] = self.api.ok("POST", path, status=201, json=body)
        return result

    def trigger(self, routine_id: str, **fields: Any) -> dict[str, Any]:
        path = f"/api/v1/routines/{routine_id}/triggers"
        result: dict[str, Any] = self.api.ok("POST", path, status=201, json=fields)
        return result

    def routine_runs(self, routine_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api.ok("GET", f"/api/v1/routines/{routine_id}/runs")[
            "items"
        ]
        return items


@pytest.fixture
def office(api: Api) -> Office:
    return Office(api)


def github_delivery(
    api: Api,
    url_path: str,
    body: bytes,
    *,
    secret: str,
    event: str = "issues",
    delivery: str | None = None,
    signature: str | None = None,
) -> httpx2.Response:
    """POST as GitHub does: ``X-Hub-Signature-256`` over the raw body, event and delivery id."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/abc1234",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "512345678",
        "X-Hub-Signature-256": signature or f"sha256={digest}",
    }
    return api.client.post(url_path, content=body, headers=headers)


def test_an_issue_opened_delivery_fires_once_with_payload_paths(api: Api, office: Office) -> None:
    routine = office.routine(
        variables=[{"name": "issue_number", "type": "number", "path": "payload.issue.number"}]
    )
    trigger = office.trigger(
        routine["id"],
        kind="webhook",
        signing_mode="github",
        events={"issues": ["opened", "labeled"], "pull_request": ["opened"]},
    )
    assert trigger["events"] == {"issues": ["opened", "labeled"], "pull_request": ["opened"]}
    secret = trigger["secret"]
    delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

    first = github_delivery(
        api, trigger["url_path"], ISSUE_OPENED, secret=secret, delivery=delivery
    )
    assert first.status_code == 202, first.text
    fired = first.json()
    assert fired["deduplicated"] is False
    run = fired["routine_run"]
    assert run["status"] == "task_created"
    assert run["variables"]["issue_number"] == 42
    assert run["variables"]["github_event"] == "issues"
    assert run["warnings"] == ["payload.issue.milestone.title is missing from the delivery"]
    task = api.ok("GET", f"/api/v1/tasks/{run['linked_task_id']}")
    assert task["title"] == "GH #42: The greeting page has no dark mode"
    assert task["description"].startswith("https://github.com/acme/greeting-site/issues/42\n")

    api.clock.advance(timedelta(minutes=3))
    again = github_delivery(
        api, trigger["url_path"], ISSUE_OPENED, secret=secret, delivery=delivery
    )
    assert again.status_code == 202, again.text
    assert again.json()["deduplicated"] is True
    assert again.json()["routine_run"]["id"] == run["id"]
    assert len(office.routine_runs(routine["id"])) == 1


def test_github_signatures_filters_and_ping(api: Api, office: Office) -> None:
    routine = office.routine()
    trigger = office.trigger(
        routine["id"], kind="webhook", signing_mode="github", events={"issues": ["opened"]}
    )
    url, secret = trigger["url_path"], trigger["secret"]

    bad = github_delivery(api, url, ISSUE_OPENED, secret="not-the-secret")
    assert bad.status_code == 401
    assert error_of(bad)["field"] == "X-Hub-Signature-256"
    unsigned = api.client.post(url, content=ISSUE_OPENED, headers={"X-GitHub-Event": "issues"})
    assert unsigned.status_code == 401

    closed = json.loads(ISSUE_OPENED)
    closed["action"] = "closed"
    outside = github_delivery(api, url, json.dumps(closed).encode(), secret=secret)
    assert outside.status_code == 202, outside.text
    assert outside.json()["routine_run"] is None
    assert "issues.closed" in outside.json()["ignored"]
    push = github_delivery(api, url, b'{"ref": "refs/heads/main"}', secret=secret, event="push")
    assert push.status_code == 202
    assert push.json()["ignored"]

    ping = github_delivery(api, url, PING, secret=secret, event="ping")
    assert ping.status_code == 200, ping.text
    assert ping.json() == {"pong": True}
    assert office.routine_runs(routine["id"]) == []


def test_a_form_encoded_github_delivery_fires_like_a_json_one(api: Api, office: Office) -> None:
    # GitHub's hook form defaults to application/x-www-form-urlencoded: payload=<json>.
    routine = office.routine()
    trigger = office.trigger(routine["id"], kind="webhook", signing_mode="github")
    url, secret = trigger["url_path"], trigger["secret"]
    form = urlencode({"payload": ISSUE_OPENED.decode()}).encode()
    digest = hmac.new(secret.encode(), form, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "0f2b6a1e-cc78-11e3-81ab-4c9367dc0958",
        "X-Hub-Signature-256": f"sha256={digest}",
    }
    fired = api.client.post(url, content=form, headers=headers)
    assert fired.status_code == 202, fired.text
    run = fired.json()["routine_run"]
    task = api.ok("GET", f"/api/v1/tasks/{run['linked_task_id']}")
    assert (
        task["title"]
        == f"GH #{json.loads(ISSUE_OPENED)['issue']['number']}: "
        + json.loads(ISSUE_OPENED)["issue"]["title"]
    )

    for body in (b"payload=%ff", b"other=1", b"payload=%5B1%5D"):
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers |= {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Delivery": body.hex()}
        refused = api.client.post(url, content=body, headers=headers)
        assert refused.status_code == 422, (body, refused.text)
        assert error_of(refused)["field"] == "body"
    assert len(office.routine_runs(routine["id"])) == 1


def test_github_trigger_fields_are_checked(api: Api, office: Office) -> None:
    routine_id = office.routine()["id"]
    path = f"/api/v1/routines/{routine_id}/triggers"
    for body, field in (
        ({"kind": "webhook", "signing_mode": "github", "events": {"issues": "opened"}}, "events"),
        ({"kind": "webhook", "signing_mode": "hmac_sha256", "events": {}}, "events"),
        ({"kind": "webhook", "signing_mode": "bearer", "secret": "mine"}, "secret"),
        ({"kind": "webhook", "signing_mode": "slack", "task_id": "x"}, "secret"),
    ):
        response = api.request("POST", path, json=body)
        assert response.status_code in (404, 422), (body, response.text)
        assert field in error_of(response)["field"], (body, response.text)
    own = office.trigger(routine_id, kind="webhook", signing_mode="github", secret="from-github")
    assert own["secret"] is None  # the caller's own secret is not echoed
    good = github_delivery(api, own["url_path"], PING, secret="from-github", event="ping")
    assert good.status_code == 200


def slack_delivery(
    api: Api, url_path: str, body: bytes, *, timestamp: int | None = None
) -> httpx2.Response:
    """POST as Slack does: ``v0=`` HMAC of ``v0:<timestamp>:<body>``."""
    stamp = str(int(api.clock.now().timestamp()) if timestamp is None else timestamp)
    base = f"v0:{stamp}:".encode() + body
    signature = "v0=" + hmac.new(SLACK_SECRET.encode(), base, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
    }
    return api.client.post(url_path, content=body, headers=headers)


def _message(text: str, *, event_id: str = "Ev0PV52K21", **extra: Any) -> bytes:
    event = {"type": "message", "channel": "C0ACME42", "user": "U061F7AUR", "text": text}
    return json.dumps(
        {"type": "event_callback", "event_id": event_id, "event": {**event, **extra}}
    ).encode()


def test_slack_messages_become_comments_on_the_channel_task(api: Api, office: Office) -> None:
    channel_task = api.task(office.ws, title="#support", assignee_agent_id=office.agent)["id"]
    routine = office.routine(name="Slack support", task_template=None)
    trigger = office.trigger(
        routine["id"],
        kind="webhook",
        signing_mode="slack",
        secret=SLACK_SECRET,
        task_id=channel_task,
    )
    assert trigger["task_id"] == channel_task
    url = trigger["url_path"]

    challenge = json.dumps({"type": "url_verification", "challenge": "3eZbrw1aBm2r"}).encode()
    answered = slack_delivery(api, url, challenge)
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"challenge": "3eZbrw1aBm2r"}

    posted = slack_delivery(api, url, _message("The login page is down"))
    assert posted.status_code == 202, posted.text
    comment_id = posted.json()["comment_id"]
    comments = api.ok("GET", f"/api/v1/tasks/{channel_task}/comments")["items"]
    assert [(c["id"], c["body"], c["external_author"], c["channel"]) for c in comments] == [
        (comment_id, "The login page is down", "U061F7AUR", "slack:C0ACME42")
    ]

    retried = slack_delivery(api, url, _message("The login page is down"))
    assert retried.json()["deduplicated"] is True
    bot = slack_delivery(api, url, _message("echo", event_id="Ev2", bot_id="B123"))
    assert bot.json()["ignored"]
    stale = slack_delivery(
        api, url, _message("late", event_id="Ev3"), timestamp=int(api.clock.now().timestamp()) - 600
    )
    assert stale.status_code == 401
    assert error_of(stale)["field"] == "X-Slack-Request-Timestamp"
    assert len(api.ok("GET", f"/api/v1/tasks/{channel_task}/comments")["items"]) == 1


def test_a_slack_retry_during_a_slow_first_delivery_posts_one_comment(
    api: Api, office: Office
) -> None:
    # Slack retries (X-Slack-Retry-Num) a request it got no answer to within 3 s: the retry
    # can arrive while the first request is still posting its comment.
    channel_task = api.task(office.ws, title="#support", assignee_agent_id=office.agent)["id"]
    routine = office.routine(name="Slack support", task_template=None)
    trigger = office.trigger(
        routine["id"],
        kind="webhook",
        signing_mode="slack",
        secret=SLACK_SECRET,
        task_id=channel_task,
    )
    public_id = trigger["url_path"].rstrip("/").split("/")[-2]
    service = api.service
    calls: list[int] = []
    posting = asyncio.Event()
    go_on = asyncio.Event()

    async def slow_comment(*args: Any, **kwargs: Any) -> Comment:
        calls.append(1)
        posting.set()
        await go_on.wait()
        return await service.office.add_comment(*args, **kwargs)

    inbound = InboundWebhooks(
        service.store, service.clock, routines=service.routines, post_comment=slow_comment
    )
    body = _message("The login page is down")
    stamp = str(int(api.clock.now().timestamp()))
    signature = hmac.new(SLACK_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
    headers = {
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": "v0=" + signature.hexdigest(),
    }

    async def first_and_retry() -> list[WebhookOutcome]:
        first = asyncio.create_task(inbound.receive(public_id, headers, body))
        await posting.wait()
        retry = asyncio.create_task(
            inbound.receive(public_id, headers | {"x-slack-retry-num": "1"}, body)
        )

        async def retry_waits() -> None:
            # The retry is either posting a second comment or queued behind the first.
            while len(calls) < 2 and not any(
                users == 2 for _, users in getattr(inbound, "_slack_keys", {}).values()
            ):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(retry_waits(), timeout=60)
        go_on.set()
        return list(await asyncio.gather(first, retry))

    first, retry = api.call(first_and_retry)
    assert first.created
    assert first.comment_id is not None
    assert not retry.created
    comments = api.ok("GET", f"/api/v1/tasks/{channel_task}/comments")["items"]
    assert [c["id"] for c in comments] == [first.comment_id]
