"""Admin tokens over HTTP and ``office token``: shown once, stored hashed, listed without
secrets, revoked at once; run tokens are listed too and can be cut off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from api_harness import Api, error_of, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.auth import hash_token
from office_scheduler.cli import office
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import api_tokens


@pytest.fixture
def api(tmp_path: Path, database: Database) -> Iterator[Api]:
    with open_api(tmp_path, database=database) as harness:
        yield harness


def test_admin_tokens_are_shown_once_stored_hashed_and_revocable(api: Api) -> None:
    api.clock.advance(1)
    created = api.ok("POST", "/api/v1/tokens", status=201, json={"name": "ci bot"})
    secret = created["secret"]
    assert secret.startswith("osa_")
    assert len(secret) > 40
    assert (created["kind"], created["name"], created["active"]) == ("admin", "ci bot", True)
    assert api.ok("GET", "/api/v1/workspaces", token=secret)["items"] == []

    listed = api.request("GET", "/api/v1/tokens", params={"kind": "admin"})
    assert [t["name"] for t in listed.json()["items"]] == ["ci bot", "test"]
    assert secret not in listed.text
    assert hash_token(secret) not in listed.text
    assert "secret" not in listed.json()["items"][0]
    with api.service.store.db.read() as conn:
        stored = conn.execute(sa.select(api_tokens.c.token_hash)).scalars().all()
    assert hash_token(secret) in stored
    assert secret not in stored

    revoked = api.ok("POST", f"/api/v1/tokens/{created['id']}/revoke")
    assert (revoked["active"], revoked["revoked_at"] is not None) == (False, True)
    again = api.ok("POST", f"/api/v1/tokens/{created['id']}/revoke")
    assert again["revoked_at"] == revoked["revoked_at"], "idempotent"
    assert api.request("GET", "/api/v1/workspaces", token=secret).status_code == 401
    active = api.ok("GET", "/api/v1/tokens", params={"kind": "admin", "active": True})
    assert [t["name"] for t in active["items"]] == ["test"]
    missing = api.request("POST", "/api/v1/tokens/nope/revoke")
    assert (missing.status_code, error_of(missing)["field"]) == (404, "token_id")
    blank = api.request("POST", "/api/v1/tokens", json={"name": ""})
    assert (blank.status_code, error_of(blank)["field"]) == (422, "name")


def test_a_leaked_run_token_is_cut_off_by_revocation(api: Api) -> None:
    ws = api.workspace()["id"]
    agent = api.agent(ws)["id"]
    token, run_id = api.run_token(ws, agent)
    assert api.request("GET", f"/api/v1/agents/{agent}", token=token).status_code == 200
    runs = api.ok("GET", "/api/v1/tokens", params={"kind": "run"})["items"]
    assert [(t["run_id"], t["workspace_id"], t["agent_id"]) for t in runs] == [(run_id, ws, agent)]
    assert runs[0]["expires_at"] is not None
    assert api.request("GET", "/api/v1/tokens", token=token).status_code == 403
    assert api.request("POST", "/api/v1/tokens", token=token, json={"name": "x"}).status_code == 403
    api.ok("POST", f"/api/v1/tokens/{runs[0]['id']}/revoke")
    assert api.request("GET", f"/api/v1/agents/{agent}", token=token).status_code == 401


def test_token_pages_are_capped(api: Api) -> None:
    for n in range(3):
        api.clock.advance(1)
        api.ok("POST", "/api/v1/tokens", status=201, json={"name": f"t{n}"})
    first = api.ok("GET", "/api/v1/tokens", params={"limit": 2})
    second = api.ok("GET", "/api/v1/tokens", params={"limit": 2, "cursor": first["next_cursor"]})
    names = [t["name"] for t in first["items"] + second["items"]]
    assert names == ["t2", "t1", "t0", "test"]
    too_many = api.request("GET", "/api/v1/tokens", params={"limit": 501})
    assert (too_many.status_code, error_of(too_many)["field"]) == (422, "limit")


def _office(url: str, home: Path, token: str, *args: str) -> Result:
    env: dict[str, str | None] = dict(CLEAN_ENV)
    env |= {"OFFICE_HOME": str(home), "OFFICE_TOKEN": token}
    return CliRunner().invoke(office, ["--api-url", url, *args], env=env)


def test_office_token_commands(api: Api, tmp_path: Path) -> None:
    api.clock.advance(1)
    with serving_in_thread(api.client.app) as url:
        created = _office(url, tmp_path, api.admin_token, "token", "create", "--name", "laptop")
        assert created.exit_code == 0, created.stderr
        secret = created.stdout.split("secret (shown once; store it now): ")[1].strip()
        assert secret.startswith("osa_")

        listed = _office(url, tmp_path, secret, "--json", "token", "list", "--kind", "admin")
        assert listed.exit_code == 0, listed.stderr
        tokens = json.loads(listed.stdout)
        assert [t["name"] for t in tokens] == ["laptop", "test"]
        assert secret not in listed.stdout

        laptop = tokens[0]["id"]
        revoked = _office(url, tmp_path, api.admin_token, "token", "revoke", laptop)
        assert revoked.exit_code == 0, revoked.stderr
        assert ["active", "false"] in [line.split() for line in revoked.stdout.splitlines()]
        refused = _office(url, tmp_path, secret, "token", "list")
        assert refused.exit_code == 1
        assert "revoked or expired" in refused.stderr
        unknown = _office(url, tmp_path, api.admin_token, "token", "revoke", "nope")
        assert (unknown.exit_code, unknown.stderr.strip()) == (
            1,
            "office: token nope not found (field token_id)",
        )
        everything = _office(url, tmp_path, api.admin_token, "--json", "token", "list", "--all")
        assert {t["name"] for t in json.loads(everything.stdout)} == {"laptop", "test"}
