"""``office routine …``: client commands against a live HTTP server (on both databases).

The server is the harness's app served by uvicorn in a thread, so the test controls its
clock and can sign webhook deliveries with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from api_harness import Api, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.cli import office
from office_scheduler.routines.webhooks import sign
from office_scheduler.store.engine import Database


class Office:
    """A served API with one workspace and one worker; ``run`` invokes the CLI against it."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        self.api = api
        self.url = url
        self.home = home
        self.ws = api.workspace("acme")["id"]
        self.agent = api.agent(self.ws, "worker-1")["id"]

    def run(self, *args: str) -> Result:
        env: dict[str, str | None] = dict(CLEAN_ENV)
        env |= {"OFFICE_HOME": str(self.home), "OFFICE_TOKEN": self.api.admin_token}
        return CliRunner().invoke(office, ["--api-url", self.url, *args], env=env)

    def ok(self, *args: str) -> Result:
        result = self.run(*args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok("--json", *args).stdout)


@pytest.fixture
def served(tmp_path: Path, database: Database) -> Iterator[Office]:
    with (
        open_api(tmp_path, database=database) as api,
        serving_in_thread(api.client.app) as url,
    ):
        yield Office(api, url, tmp_path / "home")


def one_line_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("office: ")
    return lines[0]


def test_routine_commands_take_a_name_and_refuse_a_shared_or_unknown_one(
    served: Office,
) -> None:
    second = served.api.agent(served.ws, "worker-2")["id"]
    for assignee in ("worker-1", "worker-2"):
        served.ok(
            "routine", "create", "--workspace", served.ws, "--name", "Triage",
            "--assignee", assignee, "--cron", "0 9 * * *",
        )  # fmt: skip
    served.ok(
        "routine", "create", "--workspace", served.ws, "--name", "Nightly build",
        "--assignee", "worker-1", "--cron", "0 2 * * *",
    )  # fmt: skip
    by_name = {r["name"]: r for r in served.json("routine", "list", "--workspace", served.ws)}

    fired = served.json("routine", "fire", "Nightly build")
    assert fired["routine_id"] == by_name["Nightly build"]["id"]
    [trigger] = served.json("routine", "trigger", "list", "Nightly build")
    assert trigger["cron_expression"] == "0 2 * * *"
    assert "is paused" in served.ok("routine", "pause", "Nightly build").stdout

    shared = served.run("routine", "fire", "Triage")
    assert shared.exit_code == 1
    triage_ids = sorted(
        r["id"] for r in served.json("routine", "list", "--workspace", served.ws)
        if r["name"] == "Triage"
    )  # fmt: skip
    assert len(triage_ids) == 2
    message = one_line_error(shared)
    assert "2 routines are named 'Triage'" in message
    assert all(routine_id in message for routine_id in triage_ids)
    assert "(assignee worker-1)" in message
    assert "(assignee worker-2)" in message
    blank = served.run("routine", "show", " ")
    assert blank.exit_code == 2
    assert one_line_error(blank) == "office: the routine must be an id or a name, not blank"
    builtin = served.run("routine", "fire", "Nightly build", "--var", "date=2020-01-01")
    assert builtin.exit_code == 2
    assert one_line_error(builtin) == (
        "office: --var date: a built-in variable (the fire's own instant) cannot be set"
    )

    [seconds, firsts] = [
        [r["id"] for r in served.json("routine", "list", "--workspace", served.ws)
         if r["name"] == "Triage" and (r["assignee_agent_id"] == second) is mine]
        for mine in (True, False)
    ]  # fmt: skip
    served.ok("routine", "delete", seconds[0])
    archived = served.json(
        "routine", "create", "--workspace", served.ws, "--name", "Triage",
        "--assignee", "worker-2", "--cron", "0 9 * * *",
    )  # fmt: skip
    served.api.ok("PATCH", f"/api/v1/routines/{archived['id']}", json={"status": "archived"})
    live = served.json("routine", "show", "Triage")  # the archived namesake does not count
    assert live["id"] == firsts[0]

    unknown = served.run("routine", "show", "No such routine")
    assert unknown.exit_code == 1
    assert one_line_error(unknown) == (
        "office: routine 'No such routine' not found (give its id or name)"
    )


def test_create_list_show_fire_and_runs(served: Office) -> None:
    created = served.ok(
        "routine", "create", "--workspace", served.ws, "--name", "Daily report",
        "--assignee", "worker-1", "--cron", "0 9 * * 1-5", "--tz", "Europe/Paris",
        "--title", "Report {{date}} for {{team}}", "--variable", "team:text:core",
    )  # fmt: skip
    assert "created heavy routine" in created.stdout
    assert "next run: 2026-01-06T08:00:00Z" in created.stdout

    [routine] = served.json("routine", "list", "--workspace", served.ws)
    assert routine["name"] == "Daily report"
    assert routine["assignee_agent_id"] == served.agent
    assert routine["variables"][0] == {
        "name": "team", "type": "text", "default": "core", "required": False, "options": [],
        "path": None,
    }  # fmt: skip
    listed = served.ok("routine", "list", "--workspace", served.ws)
    assert "Daily report" in listed.stdout
    shown = served.ok("routine", "show", routine["id"])
    assert "0 9 * * 1-5" in shown.stdout
    assert "Europe/Paris" in shown.stdout
    assert "Report {{date}} for {{team}}" in shown.stdout

    fired = served.ok("routine", "fire", routine["id"], "--var", "team=ops")
    assert "task_created (task " in fired.stdout
    [run] = served.json("routine", "runs", routine["id"])
    assert run["source"] == "manual"
    task = served.api.ok("GET", f"/api/v1/tasks/{run['linked_task_id']}")
    assert task["title"] == "Report 2026-01-05 for ops"

    assert "is paused" in served.ok("routine", "pause", routine["id"]).stdout
    refused = served.run("routine", "fire", routine["id"])
    assert refused.exit_code == 1
    assert "only active routines fire" in one_line_error(refused)
    assert "is active" in served.ok("routine", "resume", routine["id"]).stdout
    updated = served.json(
        "routine", "update", routine["id"], "--concurrency", "always_enqueue",
        "--description", "Depth {{depth}}", "--variable", "depth!:number:2",
    )  # fmt: skip
    assert updated["concurrency_policy"] == "always_enqueue"
    assert updated["task_template"] == {
        "title": "Report {{date}} for {{team}}", "description": "Depth {{depth}}",
    }  # fmt: skip
    assert [(v["name"], v["type"], v["default"], v["required"]) for v in updated["variables"]] == [
        ("depth", "number", 2, True), ("team", "text", None, False),
    ]  # fmt: skip
    light = served.json("routine", "update", routine["id"], "--lightweight", "--unassign")
    assert (light["kind"], light["assignee_agent_id"]) == ("lightweight", None)
    assert "deleted" in served.ok("routine", "delete", routine["id"]).stdout
    assert served.json("routine", "list", "--workspace", served.ws) == []


def test_webhook_trigger_prints_its_secret_once(served: Office) -> None:
    routine = served.json(
        "routine", "create", "--workspace", served.ws, "--name", "On alert", "--assignee",
        served.agent,
    )  # fmt: skip
    assert routine["kind"] == "lightweight"

    added = served.ok("routine", "trigger", "add", routine["id"], "--kind", "webhook")
    lines = dict(line.split(": ", 1) for line in added.stdout.splitlines() if ": " in line)
    secret, url = lines["secret"], lines["url"]
    assert "shown only now" in added.stdout
    assert url.startswith(served.url + "/api/routine-triggers/")
    stamp = int(served.api.clock.now().timestamp())
    body = b'{"alert": "disk full"}'
    headers = {"X-Signature-256": sign(secret, stamp, body), "X-Signature-Timestamp": str(stamp)}
    delivered = httpx.post(url, content=body, headers=headers)
    assert delivered.status_code == 202, delivered.text
    assert delivered.json()["routine_run"]["status"] == "dispatched"

    [trigger] = served.json("routine", "trigger", "list", routine["id"])
    assert "secret" not in trigger
    listed = served.ok("routine", "trigger", "list", routine["id"])
    assert secret not in listed.stdout
    header, row = listed.stdout.splitlines()
    tz_cell = row[header.index("TZ") : header.index("NEXT RUN")]
    assert tz_cell.strip() == "-"  # a webhook has no time zone (the cell was blank)
    assert "disabled" in served.ok("routine", "trigger", "disable", trigger["id"]).stdout
    refused = httpx.post(url, content=body, headers=headers)
    assert refused.status_code == 409
    assert "enabled" in served.ok("routine", "trigger", "enable", trigger["id"]).stdout
    served.ok("routine", "trigger", "delete", trigger["id"])
    assert served.json("routine", "trigger", "list", routine["id"]) == []
    assert len(served.json("routine", "runs", routine["id"])) == 1


def test_bad_cron_exits_2_with_one_line_and_creates_nothing(served: Office) -> None:
    result = served.run(
        "routine", "create", "--workspace", served.ws, "--name", "Broken", "--cron", "61 * * * *"
    )

    assert result.exit_code == 2, result.output
    assert "cron_expression" in one_line_error(result)
    assert result.stdout == ""
    assert served.json("routine", "list", "--workspace", served.ws) == []


@pytest.mark.parametrize(
    "args",
    [
        ["routine", "create", "--name", "x", "--variable", "nameonly"],
        ["routine", "create", "--name", "x", "--variable", "n:float"],
        ["routine", "create", "--name", "x", "--description", "no title"],
        ["routine", "create", "--name", "x", "--tz", "UTC"],
        ["routine", "create", "--name", "x", "--concurrency", "sometimes"],
        ["routine", "fire", "r1", "--var", "novalue"],
        ["routine", "update", "r1"],
        ["routine", "trigger", "add", "r1", "--kind", "schedule"],
        ["routine", "trigger", "add", "r1", "--kind", "manual", "--signing", "bearer"],
        ["routine", "trigger", "add", "r1", "--kind", "hourly"],
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str]) -> None:
    env: dict[str, str | None] = dict(CLEAN_ENV)
    env["OFFICE_HOME"] = str(tmp_path)

    result = CliRunner().invoke(office, ["--api-url", "http://127.0.0.1:9", *args], env=env)

    assert result.exit_code == 2, result.output
    one_line_error(result)
    assert result.stdout == ""


def test_server_side_validation_exits_2(served: Office) -> None:
    routine = served.json("routine", "create", "--workspace", served.ws, "--name", "Tz")

    bad_zone = served.run(
        "routine", "trigger", "add", routine["id"], "--kind", "schedule", "--cron", "0 9 * * *",
        "--tz", "Mars/Olympus",
    )  # fmt: skip
    missing = served.run("routine", "show", "no-such-routine")

    assert bad_zone.exit_code == 2
    assert "timezone" in one_line_error(bad_zone)
    assert missing.exit_code == 1
    one_line_error(missing)
