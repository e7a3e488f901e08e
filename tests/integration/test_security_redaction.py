"""End to end through the pipeline: a real agent process sees none of the server's
secrets, and what it prints about its own secrets is masked in ``run_events``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.pipeline.redaction import MASK, Redactor
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

pytestmark = pytest.mark.timeout(30)

AGENT = """\
import json, os, sys
sys.stdin.read()
print("my key is " + os.environ.get("API_KEY", "?"))
print("my token is " + os.environ["OFFICE_TOKEN"], file=sys.stderr)
print("server admin: " + os.environ.get("OFFICE_ADMIN_TOKEN", "absent"))
print("server db: " + os.environ.get("OFFICE_DATABASE_URL", "absent"))
print(json.dumps({"type": "result", "subtype": "success",
                  "result": "done with " + os.environ["API_KEY"]}))
"""


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, Service, str]]:
    store = Store.open(f"sqlite:///{tmp_path}/t.db")
    migrate.upgrade(store.db)
    clock = FakeClock()
    settings = Settings(
        home=tmp_path,
        agent_base_env={
            "PATH": "/usr/bin:/bin",
            "OFFICE_ADMIN_TOKEN": "osa_the-server-admin-token",
            "OFFICE_DATABASE_URL": "postgresql://office:hunter2@db/office",
        },
    )
    service = Service(settings, clock=clock, executors={"command": CommandExecutor()}, store=store)
    admin, _ = service.tokens.mint_admin(name="t", now=clock.now())
    try:
        with TestClient(create_app(service)) as http:
            http.headers["Authorization"] = f"Bearer {admin}"
            try:
                yield http, service, admin
            finally:
                assert http.portal is not None
                http.portal.call(service.close)
    finally:
        store.close()


def test_agent_output_is_redacted_and_server_secrets_stay_out(
    client: tuple[TestClient, Service, str], tmp_path: Path
) -> None:
    http, service, admin = client
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    executors = {
        "cli": {
            "kind": "command",
            "argv": [sys.executable, str(script)],
            "env": {"API_KEY": "sk-live-0123456789"},
        }
    }
    ws = http.post("/api/v1/workspaces", json={"name": "acme", "settings": {
        "coalesce_window_s": 0, "default_executor": "cli", "executors": executors,
    }}).json()["id"]  # fmt: skip
    agent = http.post(f"/api/v1/workspaces/{ws}/agents", json={"name": "w", "cooldown_s": 0})
    run_id = http.post(f"/api/v1/agents/{agent.json()['id']}/wake", json={}).json()["run_id"]

    assert http.portal is not None
    http.portal.call(service.run_until_idle)

    run = http.get(f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "finished", run
    lines = [e["message"] for e in run["events"] if e["kind"].startswith("output.")]
    assert f"my key is {MASK}" in lines
    assert f"my token is {MASK}" in lines
    assert "server admin: absent" in lines
    assert "server db: absent" in lines
    text = json.dumps(run)
    assert "sk-live-0123456789" not in text
    assert "osr_" not in text
    assert admin not in text
    assert f"done with {MASK}" in json.dumps(run["result"]), "the stored result is masked too"


def test_short_values_are_not_treated_as_secrets() -> None:
    redactor = Redactor(["1", "", "abcdef-secret", "abcdef"])
    assert redactor.text("DEBUG=1 abcdef-secret abcdef") == f"DEBUG=1 {MASK} {MASK}"
    assert redactor.data({"abcdef": ["x abcdef-secret", 1]}) == {MASK: [f"x {MASK}", 1]}
    assert Redactor([]).text("abcdef") == "abcdef"
    # Text without a secret is only cleaned (the pattern is compiled on the first hit).
    assert redactor.text("plain\x00 text") == "plain text"


NUL_AGENT = """\
import os, sys
sys.stdin.read()
key = os.environ["API_KEY"]
print("narrow " + key, flush=True)
sys.stdout.buffer.write(("wide " + key + "\\n").encode("utf-16-le"))
"""


def test_secrets_split_by_nul_characters_are_masked_too(
    client: tuple[TestClient, Service, str], tmp_path: Path
) -> None:
    # Regression: secrets were masked before NULs were stripped for storage, so a UTF-16
    # dump of the environment ('s\\0k\\0-\\0…') was stored as the clear secret.
    http, service, _admin = client
    script = tmp_path / "agent.py"
    script.write_text(NUL_AGENT)
    executors = {
        "cli": {
            "kind": "command",
            "argv": [sys.executable, str(script)],
            "env": {"API_KEY": "sk-live-0123456789"},
        }
    }
    ws = http.post("/api/v1/workspaces", json={"name": "acme", "settings": {
        "coalesce_window_s": 0, "default_executor": "cli", "executors": executors,
    }}).json()["id"]  # fmt: skip
    agent = http.post(f"/api/v1/workspaces/{ws}/agents", json={"name": "w", "cooldown_s": 0})
    run_id = http.post(f"/api/v1/agents/{agent.json()['id']}/wake", json={}).json()["run_id"]
    assert http.portal is not None
    http.portal.call(service.run_until_idle)

    run = http.get(f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "finished", run
    lines = [e["message"] for e in run["events"] if e["kind"] == "output.stdout"]
    assert [line for line in lines if line] == [f"narrow {MASK}", f"wide {MASK}"]
    assert "sk-live-0123456789" not in json.dumps(run)
    assert Redactor(["abcdef-secret"]).text("a\x00bcdef-sec\ud800ret") == MASK
