"""Two ``office serve`` processes on PostgreSQL deliver each notification exactly once."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from server_harness import Server

pytestmark = pytest.mark.postgres

SECRET = "whsec_" + base64.b64encode(b"two-nodes-share-one-outbox-key!!").decode()
APPROVALS = 40


class Receiver(BaseHTTPRequestHandler):
    """Records each POST's ``webhook-id`` and whether its signature verifies."""

    seen: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        msg_id = self.headers.get("webhook-id", "")
        stamp = self.headers.get("webhook-timestamp", "")
        key = base64.b64decode(SECRET.removeprefix("whsec_"))
        digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
        valid = self.headers.get("webhook-signature") == "v1," + base64.b64encode(digest).decode()
        with self.lock:
            self.seen.append((msg_id, valid))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test's output quiet."""


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()
        server.server_close()


def test_two_nodes_send_each_delivery_once(tmp_path: Path, pg_url: str, receiver: str) -> None:
    env = {"OFFICE_DATABASE_URL": pg_url}
    first = Server(tmp_path / "a", env=env)
    second = Server(tmp_path / "b", env=env)
    try:
        token = (tmp_path / "a" / "admin_token").read_text().strip()
        with httpx.Client(
            base_url=first.url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        ) as http:
            ws = http.post("/workspaces", json={"name": "acme"}).json()["id"]
            channel = {"kind": "webhook", "url": receiver, "secret": SECRET}
            assert http.put(f"/workspaces/{ws}/notifications/ops", json=channel).status_code == 200
            for index in range(APPROVALS):
                answer = http.post(
                    f"/workspaces/{ws}/approvals", json={"title": f"approval {index}"}
                )
                assert answer.status_code == 201, answer.text

            deadline = time.monotonic() + 120
            while True:
                delivered = http.get(
                    f"/workspaces/{ws}/notification-deliveries",
                    params={"status": "delivered", "limit": 500},
                ).json()["items"]
                if len(delivered) == APPROVALS:
                    break
                assert time.monotonic() < deadline, f"{len(delivered)} of {APPROVALS} delivered"
                time.sleep(0.5)
    finally:
        codes = [server.stop()[0] for server in (first, second)]
    assert codes == [0, 0]
    counts = Counter(msg_id for msg_id, _ in Receiver.seen)
    assert len(counts) == APPROVALS
    assert set(counts.values()) == {1}, "a delivery was sent twice"
    assert all(valid for _, valid in Receiver.seen)
    assert set(counts) == {item["id"] for item in delivered}
