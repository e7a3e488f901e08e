"""Strangers cannot stall the server or block a webhook: large unauthenticated bodies are
refused before they are scanned, large scans leave the event loop, and wrongly signed
webhook posts spend their source's budget, not the URL's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

from api_harness import Api, error_of, open_api
from office_scheduler.api import limits as limits_module
from office_scheduler.api.limits import Limits
from office_scheduler.routines.webhooks import sign
from office_scheduler.store.engine import Database

MIB = 1024 * 1024


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


class Scans:
    """Counts depth scans; ``hold`` makes each wait until ``release`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, hold: bool = False) -> None:
        self.count = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []
        for name in ("json_depth", "json_depth_in_pieces"):
            monkeypatch.setattr(
                limits_module, name, self._counted(getattr(limits_module, name), hold)
            )

    def _counted(self, real: Callable[[bytes], int], hold: bool) -> Callable[[bytes], int]:
        def scan(body: bytes) -> int:
            self.count += 1
            self.threads.append(threading.get_ident())
            self.started.set()
            if hold:
                assert self.release.wait(30), "the test releases the scan"
            return real(body)

        return scan


def _chunks(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), 64 * 1024):
        yield body[start : start + 64 * 1024]


def test_an_unauthenticated_large_body_is_refused_before_it_is_scanned(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = Scans(monkeypatch)
    brackets = b"[" * (MIB - 1)
    for headers in ({}, {"Authorization": "Bearer osa_wrong"}):
        declared = api.client.post("/api/v1/workspaces", content=brackets, headers=headers)
        assert (declared.status_code, error_of(declared)["code"]) == (401, "unauthorized")
        assert declared.headers["WWW-Authenticate"] == "Bearer"
        streamed = api.client.post("/api/v1/workspaces", content=_chunks(brackets), headers=headers)
        assert streamed.status_code == 401
    assert scans.count == 0, "no byte of a stranger's large body was scanned"
    small = api.client.post("/api/v1/workspaces", content=b"[[[]]]")
    assert small.status_code == 401
    assert scans.count == 1, "small bodies are scanned on the loop as before"
    admin = {"Authorization": f"Bearer {api.admin_token}"}
    deep = api.client.post("/api/v1/workspaces", content=brackets, headers=admin)
    assert (deep.status_code, error_of(deep)["field"]) == (422, "body")
    assert scans.count == 2


def test_healthz_answers_while_a_large_body_is_scanned(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = Scans(monkeypatch, hold=True)
    admin = {"Authorization": f"Bearer {api.admin_token}"}
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(
            api.client.post, "/api/v1/workspaces", content=b"[" * (MIB // 2), headers=admin
        )
        try:
            assert scans.started.wait(30), "the scan started"
            # The scan is parked in its worker thread: the loop still answers.
            health = api.client.get("/healthz")
            assert health.status_code in (200, 503), health.text
            assert not pending.done()
        finally:
            scans.release.set()
        assert pending.result(30).status_code == 422
    assert scans.threads[0] != threading.get_ident()


def test_a_webhook_body_over_its_limit_is_refused_before_the_scan(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans = Scans(monkeypatch)
    big = b"[" * (300 * 1024)
    response = api.client.post("/api/routine-triggers/whatever/fire", content=big)
    assert (response.status_code, error_of(response)["field"]) == (413, "body")
    assert scans.count == 0


class Hook:
    """A routine with an hmac-signed webhook trigger."""

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

    def deliver(self, *, source: str, secret: str | None = None) -> Any:
        """Send a signed empty object from address ``source``."""
        stamp = int(self.api.clock.now().timestamp())
        body = b"{}"
        headers = {
            "Content-Type": "application/json",
            "X-Signature-Timestamp": str(stamp),
            "X-Signature-256": sign(secret or self.secret, stamp, body),
            "Idempotency-Key": f"{source}-{secret}-{id(body)}",
        }
        transport = cast(Any, self.api.client)._transport
        transport.client = (source, 40000)
        try:
            return self.api.client.post(self.url, content=body, headers=headers)
        finally:
            transport.client = ("testclient", 50000)


def test_badly_signed_posts_do_not_spend_the_urls_rate(api: Api) -> None:
    hook = Hook(api)
    limits: Limits = api.client.app.state.limits  # type: ignore[attr-defined]
    limits.clock = lambda: 1000.0  # no refill during the test
    attacker, sender = "203.0.113.9", "198.51.100.7"
    refused = [hook.deliver(source=attacker, secret="guess").status_code for _ in range(30)]
    assert refused == [401] * 30
    assert hook.deliver(source=sender).status_code == 202, "the real sender gets through"
    unknown = api.client.post("/api/routine-triggers/nope/fire", content=b"{}")
    assert unknown.status_code == 404
    blocked = hook.deliver(source=attacker, secret="guess")
    assert blocked.status_code == 429, "the attacker's address is out of failures"
    assert int(blocked.headers["Retry-After"]) >= 1
    assert hook.deliver(source=attacker).status_code == 429, "its address, whatever it sends"
    assert hook.deliver(source=sender).status_code == 202


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 70_000,
        b"[]" * 40_000,
        b'"a",' * 20_000 + b"[[",
        b'["' + b"x" * 200_000 + b'", [[]]]',
        b'"\\"\\"' * 1000 + b"[[",
        b'{"k": "[[[[", "b": [{}]}',
        b"]]][[",
        b"",
    ],
)
def test_the_threaded_scan_agrees_with_the_inline_one(body: bytes) -> None:
    assert limits_module.json_depth_in_pieces(body) == limits_module.json_depth(body)
