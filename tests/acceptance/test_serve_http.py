"""``office serve``'s uvicorn settings against hostile clients (issue 7 review).

Slowloris: a connection that never sent (or never finished) its request head stayed open
forever. Access log: uvicorn wrote webhook URLs, the only credential of ``none``-mode
triggers, to the log.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from api_harness import open_api
from office_scheduler.cli.http_server import masked_path, server_config
from office_scheduler.cli.logs import configure_logging
from office_scheduler.cli.runtime import bind

DEADLINE_S = 0.5


@contextmanager
def serving(app: ASGIApp, header_timeout_s: float = DEADLINE_S) -> Iterator[tuple[str, int]]:
    """Serve ``app`` with ``office serve``'s uvicorn config in a thread; yields host, port."""
    sock, _url = bind("127.0.0.1", 0)
    server = uvicorn.Server(server_config(app, header_timeout_s=header_timeout_s))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "uvicorn stopped during startup"
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield sock.getsockname()[:2]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


async def _slow(_request: Request) -> PlainTextResponse:
    await asyncio.sleep(DEADLINE_S * 2)
    return PlainTextResponse("slow but fine")


async def _fast(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


@pytest.fixture
def address() -> Iterator[tuple[str, int]]:
    app = Starlette(routes=[Route("/slow", _slow), Route("/fast", _fast)])
    with serving(app) as served:
        yield served


def _closed_after(conn: socket.socket, trickle: bytes = b"") -> float:
    """Seconds until the server closes ``conn`` (sending ``trickle`` a byte at a time)."""
    started = time.monotonic()
    conn.settimeout(0.1)
    while time.monotonic() - started < 3:
        try:
            if conn.recv(1024) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        except ConnectionResetError:
            return time.monotonic() - started
        if trickle:
            conn.sendall(trickle[:1])
            trickle = trickle[1:]
    raise AssertionError("the server kept the connection open for 3 s")


def test_a_connection_that_sends_nothing_is_closed(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as conn:
        assert DEADLINE_S * 0.8 <= _closed_after(conn) < DEADLINE_S + 1.0


def test_a_request_head_trickled_forever_is_closed(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as conn:
        conn.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n")
        # A byte every 0.1 s: each byte reset uvicorn's keep-alive timer, never the deadline.
        assert _closed_after(conn, trickle=b"X-Slow: " + b"a" * 40) < DEADLINE_S + 1.0


def test_a_slow_second_request_head_is_closed_too(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as conn:
        conn.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET /fast HTTP/1.1\r\n")
        assert _closed_after(conn, trickle=b"Host: " + b"x" * 40) < DEADLINE_S + 1.0


def test_prompt_requests_and_slow_responses_are_not_cut(address: tuple[str, int]) -> None:
    host, port = address
    with httpx.Client(base_url=f"http://{host}:{port}") as client:
        # The handler takes twice the deadline: the deadline covers the head, not the answer.
        assert client.get("/slow").text == "slow but fine"
        time.sleep(DEADLINE_S / 2)
        assert client.get("/fast").text == "ok", "a kept-alive connection serves again"


def test_masked_path_hides_only_the_webhook_id() -> None:
    assert masked_path("/api/routine-triggers/whk_s3cr3t/fire") == "/api/routine-triggers/***/fire"
    assert masked_path("/api/routine-triggers/whk_s3cr3t/fir") == "/api/routine-triggers/***/fir"
    assert masked_path("/api/v1/routine-triggers/12") == "/api/v1/routine-triggers/12"
    assert masked_path("/api/v1/tasks/t1") == "/api/v1/tasks/t1"


def test_the_access_log_never_holds_a_webhook_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_api(tmp_path) as api:
        ws = api.workspace()["id"]
        agent = api.agent(ws)["id"]
        body = {"name": "On push", "assignee_agent_id": agent}
        routine = api.ok("POST", f"/api/v1/workspaces/{ws}/routines", status=201, json=body)
        trigger = api.ok(
            "POST",
            f"/api/v1/routines/{routine['id']}/triggers",
            status=201,
            json={"kind": "webhook", "signing_mode": "none"},
        )
        public_id = trigger["url_path"].split("/")[3]
        configure_logging(2, "json")  # office -vv --log-format json: the access log shows
        try:
            with serving(api.client.app, header_timeout_s=10) as (host, port):
                # http.client: httpx would log the URL itself, on the client's side.
                sender = http.client.HTTPConnection(host, port, timeout=10)
                headers = {"Content-Type": "application/json"}
                sender.request("POST", trigger["url_path"], body=b"{}", headers=headers)
                status = sender.getresponse().status
                sender.close()
        finally:
            configure_logging(0)
    assert status == 202

    err = capsys.readouterr().err
    assert public_id not in err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line["event"] == "http_request"]
    assert [(r["method"], r["path"], r["status"]) for r in requests] == [
        ("POST", "/api/routine-triggers/***/fire", 202)
    ]
    assert requests[0]["level"] == "debug"
    assert requests[0]["duration_ms"] >= 0
