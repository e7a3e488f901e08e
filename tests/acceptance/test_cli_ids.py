"""Ids and tokens given to client commands cannot reach another route or crash the CLI.

Regressions of the hostile review (issue 7): ids were pasted into URL paths as they came, so
``'../agents/ID/pause?'`` named another route, and a token that cannot be sent in a header
ended as ``unexpected error`` (exit 1) instead of a usage error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from api_harness import Api, open_api
from cli_harness import CLEAN_ENV, serving_in_thread
from office_scheduler.cli import office
from office_scheduler.cli.client import api_path


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as harness:
        yield harness


@pytest.fixture
def url(api: Api) -> Iterator[str]:
    with serving_in_thread(api.client.app) as served:
        yield served


def _office(url: str, home: Path, token: str | None, *args: str) -> Result:
    env: dict[str, str | None] = dict(CLEAN_ENV)
    env |= {"OFFICE_HOME": str(home), "OFFICE_TOKEN": token}
    return CliRunner().invoke(office, ["--api-url", url, *args], env=env)


#: Commands whose id argument lands in the request path; ``ID`` is replaced by a value
#: that (unquoted) named ``/agents/<agent>/pause``, or ``/agents/<agent>`` with the query
#: swallowing the rest (``routine pause`` PATCHes ``{"status": "paused"}``).
HIJACKS = [
    (("approval", "approve", "ID"), "../agents/{agent}/pause?"),
    (("approval", "reject", "ID"), "../agents/{agent}/pause?"),
    (("routine", "fire", "ID"), "../agents/{agent}/pause?"),
    (("comment", "add", "ID", "--body", "hi"), "../agents/{agent}/pause?"),
    (("routine", "pause", "ID"), "../agents/{agent}?"),
    (("routine", "trigger", "add", "ID", "--kind", "webhook"), "../agents/{agent}/pause?"),
]


def test_api_path_quotes_each_id_as_one_segment() -> None:
    assert api_path("tasks", "../agents/a1/pause?", "comments") == (
        "/tasks/..%2Fagents%2Fa1%2Fpause%3F/comments"
    )
    assert api_path("runs", "a b#c%") == "/runs/a%20b%23c%25"
    assert api_path("agents", "ünï") == "/agents/%C3%BCn%C3%AF"


@pytest.mark.parametrize(
    ("command", "hostile"), HIJACKS, ids=[" ".join(command[:2]) for command, _ in HIJACKS]
)
def test_an_id_cannot_name_another_route(
    api: Api, url: str, tmp_path: Path, command: tuple[str, ...], hostile: str
) -> None:
    agent = api.agent(api.workspace()["id"])["id"]
    args = [hostile.format(agent=agent) if part == "ID" else part for part in command]

    result = _office(url, tmp_path, api.admin_token, *args)

    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "not found" in result.stderr.lower()
    assert api.ok("GET", f"/api/v1/agents/{agent}")["status"] == "idle"


def test_delete_removes_only_the_record_named(api: Api, url: str, tmp_path: Path) -> None:
    ws = api.workspace()["id"]
    agent = api.agent(ws)["id"]
    body = {"name": "Nightly", "assignee_agent_id": agent}
    routine = api.ok("POST", f"/api/v1/workspaces/{ws}/routines", status=201, json=body)["id"]

    # Unquoted, 'budget delete ../routines/ID?' sent DELETE /api/v1/routines/ID.
    result = _office(url, tmp_path, api.admin_token, "budget", "delete", f"../routines/{routine}?")

    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert api.ok("GET", f"/api/v1/routines/{routine}")["name"] == "Nightly"


def test_show_commands_read_only_the_record_named(api: Api, url: str, tmp_path: Path) -> None:
    ws = api.workspace()["id"]
    task = api.task(ws)["id"]
    # '../tasks/ID?' used to read the task through 'office runs show' and 'approval show'.
    for group in ("runs", "approval", "routine", "budget", "wakeups"):
        shown = _office(url, tmp_path, api.admin_token, group, "show", f"../tasks/{task}?")
        assert task not in shown.stdout
        if group in ("runs", "wakeups"):  # numeric ids: refused before any request
            assert shown.exit_code == 2, (group, shown.stdout)
            assert "is not an id (a whole number of at least 1)" in shown.stderr
        else:
            assert shown.exit_code == 1, (group, shown.stdout)
            assert "not found" in shown.stderr.lower()


@pytest.mark.parametrize("bad", ["", "a\x00b", "\udcff"], ids=["empty", "nul", "surrogate"])
@pytest.mark.parametrize(
    "command",
    [("task", "show"), ("approval", "approve"), ("agent", "pause")],
    ids=" ".join,
)
def test_an_unusable_id_is_a_usage_error(
    api: Api, url: str, tmp_path: Path, command: tuple[str, ...], bad: str
) -> None:
    api.workspace()
    result = _office(url, tmp_path, api.admin_token, *command, bad)

    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("office: the id ")
    assert result.stderr.count("\n") == 1
    assert "unexpected error" not in result.stderr


@pytest.mark.parametrize(
    "token",
    ["tökén", "osa_abc\nInjected: 1", "osa_abc\r", "osa_\x01abc", "osa abc", "\udcff"],
    ids=["non-ascii", "newline", "carriage-return", "control", "space", "surrogate"],
)
def test_an_unusable_office_token_is_a_usage_error(url: str, tmp_path: Path, token: str) -> None:
    result = _office(url, tmp_path, token, "task", "list")

    assert result.exit_code == 2, result.stderr
    assert result.stderr == (
        "office: OFFICE_TOKEN must be printable ASCII without spaces or control characters\n"
    )


def test_an_unusable_saved_token_names_its_file(url: str, tmp_path: Path) -> None:
    (tmp_path / "admin_token").write_text("osa_\x07bell\n", encoding="utf-8")

    result = _office(url, tmp_path, None, "task", "list")

    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"office: the token in {tmp_path / 'admin_token'} must be")
    assert result.stderr.count("\n") == 1


def test_a_good_token_still_works(api: Api, url: str, tmp_path: Path) -> None:
    ws = api.workspace()["id"]
    task = api.task(ws, "Ship it")["id"]

    result = _office(url, tmp_path, api.admin_token, "--json", "task", "show", task)

    assert result.exit_code == 0, result.stderr
    assert '"title": "Ship it"' in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("inbox", "resolve", "nope"),
        ("inbox", "dismiss", "0"),
        ("activity", "list", "--run", "-3"),
        ("wakeups", "list", "--run", "1.5"),
        ("runs", "show", "abc"),
        ("wakeups", "show", ""),
        ("inbox", "resolve", "\u00b2"),  # a digit to str.isdigit, not to int()
        ("inbox", "resolve", "\u2460"),
    ],
)
def test_a_numeric_id_that_is_not_one_is_a_usage_error_saying_what_an_id_is(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    env: dict[str, str | None] = dict(CLEAN_ENV) | {"OFFICE_HOME": str(tmp_path)}
    result = CliRunner().invoke(office, list(args), env=env)
    assert result.exit_code == 2, result.output
    assert "is not an id (a whole number of at least 1)" in result.output
    assert "integer range" not in result.output


@pytest.mark.parametrize(
    "args", [("task", "list"), ("routine", "list"), ("inbox", "list"), ("agent", "list")]
)
def test_a_blank_workspace_is_a_usage_error_not_the_only_workspace(
    api: Api, url: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    api.workspace()  # the only one: a blank --workspace used to fall back to it
    result = _office(url, tmp_path, api.admin_token, *args, "--workspace", " ")
    assert result.exit_code == 2, result.output
    assert result.stderr == "office: --workspace needs a workspace id or name\n"


def test_an_id_with_a_slash_says_what_was_not_found(api: Api, url: str, tmp_path: Path) -> None:
    """Review: ``runs queue bad/../id`` printed the router's bare "Not Found"."""
    api.workspace()
    result = _office(url, tmp_path, api.admin_token, "runs", "queue", "bad/../id", "--agent", "x")
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        "office: not found: /tasks/bad/../id (no such record; check the id, and that"
        f" --api-url {url} is the office server)\n"
    )


def test_runs_and_wakeups_show_take_their_numeric_ids(api: Api, url: str, tmp_path: Path) -> None:
    ws = api.workspace()["id"]
    agent = api.agent(ws)["id"]
    woken = api.ok("POST", f"/api/v1/agents/{agent}/wake", status=202, json={})
    run = _office(url, tmp_path, api.admin_token, "--json", "runs", "show", str(woken["run_id"]))
    wakeup = _office(
        url, tmp_path, api.admin_token, "--json", "wakeups", "show", str(woken["wakeup"]["id"])
    )
    assert run.exit_code == 0, run.stderr
    assert wakeup.exit_code == 0, wakeup.stderr
    assert json.loads(run.stdout)["agent_id"] == agent
    assert json.loads(wakeup.stdout)["run_id"] == woken["run_id"]
