"""``office approval …``: an agent requests with its run token, a person decides."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from api_harness import Api, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.cli import office
from office_scheduler.store.engine import Database


class Served:
    """The harness's app served by uvicorn in a thread; ``run`` invokes the CLI against it."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        self.api = api
        self.url = url
        self.home = home

    def run(self, *args: str, token: str | None = None) -> Result:
        env: dict[str, str | None] = dict(CLEAN_ENV)
        env |= {"OFFICE_HOME": str(self.home), "OFFICE_TOKEN": token or self.api.admin_token}
        return CliRunner().invoke(office, ["--api-url", self.url, *args], env=env)

    def json(self, *args: str, token: str | None = None) -> Any:
        result = self.run("--json", *args, token=token)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return json.loads(result.stdout)


@pytest.fixture
def served(tmp_path: Path, database: Database) -> Iterator[Served]:
    with (
        open_api(tmp_path, database=database) as api,
        serving_in_thread(api.client.app) as url,
    ):
        yield Served(api, url, tmp_path / "home")


def one_line_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_request_list_show_approve_reject(served: Served) -> None:
    ws = served.api.workspace("acme")["id"]
    worker = served.api.agent(ws)["id"]
    token, _run_id = served.api.run_token(ws, worker)

    asked = served.json(
        "approval", "request", "--title", "Deploy now?", "--workspace", ws, token=token
    )
    assert (asked["status"], asked["requested_by_agent_id"]) == ("pending", worker)
    other = served.json("approval", "request", "--title", "Buy a GPU?", "--workspace", ws)

    listed = served.run("approval", "list", "--workspace", ws, "--status", "PENDING")
    assert listed.exit_code == 0
    assert "Deploy now?" in listed.stdout
    assert "Buy a GPU?" in listed.stdout
    assert "Deploy now?" in served.run("approval", "show", asked["id"]).stdout

    refused = served.run("approval", "approve", asked["id"], token=token)
    assert refused.exit_code == 1
    assert "agents cannot approve or reject" in one_line_error(refused)

    approved = served.json("approval", "approve", asked["id"], "--note", "go")
    assert (approved["status"], approved["decision_note"]) == ("approved", "go")
    rejected = served.run("approval", "reject", other["id"])
    assert (rejected.exit_code, rejected.stdout.strip()) == (
        0,
        f"approval {other['id']} is rejected",
    )
    again = served.run("approval", "reject", asked["id"])
    assert again.exit_code == 1
    assert "already approved" in one_line_error(again)
    pending = served.json("approval", "list", "--workspace", ws, "--status", "pending")
    assert pending == []


def test_bad_input_exits_2(served: Served) -> None:
    ws = served.api.workspace("acme")["id"]
    blank = served.run("approval", "request", "--title", " ", "--workspace", ws)
    assert blank.exit_code == 2
    one_line_error(blank)
    status = served.run("approval", "list", "--workspace", ws, "--status", "maybe")
    assert status.exit_code == 2
    missing = served.run("approval", "show", "nope")
    assert missing.exit_code == 1
    assert "approval nope not found" in one_line_error(missing)
