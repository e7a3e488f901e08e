"""Regressions found by a second hostile review of the security work: each test failed
before its fix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.api.limits import Limits
from office_scheduler.routines.webhooks import sign


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as harness:
        yield harness


class Hook:
    """A routine with an hmac-signed webhook trigger, posted to from chosen addresses."""

    def __init__(self, api: Api) -> None:
        self.api = api
        ws = api.workspace()["id"]
        agent = api.agent(ws)["id"]
        body = {"name": "deploy", "assignee_agent_id": agent}
        routine = api.ok("POST", f"/api/v1/workspaces/{ws}/routines", status=201, json=body)
        trigger = api.ok(
            "POST",
            f"/api/v1/routines/{routine['id']}/triggers",
            status=201,
            json={"kind": "webhook", "signing_mode": "hmac_sha256"},
        )
        self.url, self.secret = trigger["url_path"], trigger["secret"]
        self.sent = 0
        limits: Limits = api.client.app.state.limits  # type: ignore[attr-defined]
        limits.clock = lambda: 1000.0  # no refill during the test

    def post(self, source: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
        """Post ``body`` from address ``source``."""
        transport = cast(Any, self.api.client)._transport
        transport.client = (source, 40000)
        try:
            return self.api.client.post(self.url, content=body, headers=headers or {})
        finally:
            transport.client = ("testclient", 50000)

    def deliver(self, source: str) -> Any:
        """A correctly signed delivery of ``{}``."""
        self.sent += 1
        stamp = int(self.api.clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            "X-Signature-Timestamp": str(stamp),
            "X-Signature-256": sign(self.secret, stamp, b"{}"),
            "Idempotency-Key": f"real-{self.sent}",
        }
        return self.post(source, b"{}", headers)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"[" * 40, 422),  # too deep: refused by the middleware, before the route
        (b"x" * (300 * 1024), 413),  # too large: likewise
    ],
    ids=["too-deep", "too-large"],
)
def test_posts_refused_before_the_route_do_not_spend_the_urls_rate(
    api: Api, body: bytes, status: int
) -> None:
    # Only 401 and 404 were given back to the URL's bucket: 30 unsigned posts that the
    # limits middleware itself refused emptied it, and the real sender got 429.
    hook = Hook(api)
    attacker, sender = "203.0.113.9", "198.51.100.7"
    refused = [hook.post(attacker, body).status_code for _ in range(30)]
    assert refused == [status] * 30
    assert hook.deliver(sender).status_code == 202, "the real sender gets through"
    assert hook.post(attacker, body).status_code == 429, "the attacker's address is spent"


def test_an_ipv6_network_is_one_source_for_webhook_failures(api: Api) -> None:
    # Each address had its own failure bucket: a host holding a /64 (every IPv6 host
    # does) sent each badly signed post from a new address and was never slowed.
    hook = Hook(api)
    bad = {"X-Signature-Timestamp": "1", "X-Signature-256": "sha256=00"}
    refused = [hook.post(f"2001:db8::{n:x}", b"{}", bad).status_code for n in range(1, 31)]
    assert refused == [401] * 30
    assert hook.post("2001:db8::ffff:1", b"{}", bad).status_code == 429, "same /64"
    assert hook.post("::ffff:203.0.113.9", b"{}", bad).status_code == 401, "another source"
    assert hook.deliver("2001:db8:1::1").status_code == 202, "another /64 gets through"


def test_an_ipv6_network_is_one_source_for_sign_in_failures(api: Api) -> None:
    api.workspace()  # the dashboard needs one
    transport = cast(Any, api.client)._transport

    def sign_in(source: str) -> int:
        transport.client = (source, 40000)
        try:
            response = api.client.post(
                "/login",
                data={"token": "osa_wrong", "next": "/"},
                headers={"origin": "http://testserver"},
                follow_redirects=False,
            )
        finally:
            transport.client = ("testclient", 50000)
        return response.status_code

    assert [sign_in(f"2001:db8::{n}") for n in range(1, 6)] == [401] * 5
    assert sign_in("2001:db8::99") == 429, "the same /64 is the same client"
    assert sign_in("::ffff:198.51.100.7") == 401


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16", "utf-32-be"])
def test_a_body_in_utf16_or_utf32_cannot_hide_its_depth(api: Api, encoding: str) -> None:
    # The depth scan read bytes as UTF-8: in UTF-16 'Ģ' (U+0122) holds a quote byte, so
    # a string holding it seemed to run on over the brackets after it, and a run token's
    # wake payload nested 900 deep passed the 32-level check (a 500, its traceback
    # pretty-printed for minutes); 200 deep was stored.
    ws = api.workspace()["id"]
    agent = api.agent(ws)["id"]
    token, _run = api.run_token(ws, agent)
    nested = '{"a": ' * 200 + "1" + "}" * 200
    body = ('{"reason": "\u0122", "payload": ' + nested + "}").encode(encoding)
    response = api.client.post(
        f"/api/v1/agents/{agent}/wake",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text[:200]
    assert error_of(response)["field"] == "body"
    wakes = api.ok("GET", "/api/v1/wakeups", params={"agent_id": agent})["items"]
    assert all(wake["source"] != "self" for wake in wakes), "nothing was stored"
    plain = {"reason": "\u0122", "payload": {"a": 1}}
    utf8 = api.request("POST", f"/api/v1/agents/{agent}/wake", token=token, json=plain)
    assert utf8.status_code == 202, "UTF-8 (what every client sends) is unchanged"
