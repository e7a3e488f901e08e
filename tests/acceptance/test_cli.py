"""The ``office`` command line: exit statuses, one-line errors, db/import/export, serve."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from cli_harness import CLEAN_ENV
from office_scheduler.cli import office
from office_scheduler.store import migrate
from office_scheduler.store.facade import Store
from server_harness import Server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo-office"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the demo office (importing creates its project directory)."""
    return Path(shutil.copytree(EXAMPLE, tmp_path / "demo-office"))


def run(home: Path, *args: str, input: str | None = None, **env: str) -> Result:
    runner = CliRunner()
    return runner.invoke(
        office, list(args), input=input, env={**CLEAN_ENV, "OFFICE_HOME": str(home), **env}
    )


def one_line_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("office: ")
    return lines[0]


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["task", "create"],
        ["task", "list", "--state", "SLEEPING"],
        ["runs", "list", "--limit", "0"],
        ["serve", "--port", "99999"],
        ["serve", "--no-api", "--no-scheduler"],
        ["task", "update", "abc"],
        ["--log-format", "xml", "db", "upgrade"],
    ],
)
def test_bad_usage_exits_2_with_one_line(home: Path, args: list[str]) -> None:
    result = run(home, *args)

    assert result.exit_code == 2, result.output
    one_line_error(result)
    assert result.stdout == ""


def test_wake_self_needs_the_agent_id(home: Path) -> None:
    result = run(home, "wake", "self", "--reason", "later")

    assert result.exit_code == 2
    assert "OFFICE_AGENT_ID" in one_line_error(result)


@pytest.mark.parametrize(
    "args",
    [
        ["task", "list", "--workspace", "w1"],
        ["--json", "task", "show", "t1"],
        ["task", "done", "t1"],
        ["comment", "add", "t1", "--body", "hi"],
        ["wake", "a1", "--reason", "go"],
        ["runs", "list"],
        ["wakeups", "list", "--json"],
    ],
)
def test_unreachable_server_exits_1_with_one_line(home: Path, args: list[str]) -> None:
    url = closed_port_url()

    result = run(home, "--api-url", url, *args)

    assert result.exit_code == 1, result.output
    assert one_line_error(result) == f"office: cannot reach the office server at {url}"


def test_a_database_file_that_cannot_be_opened_exits_2_with_one_line(home: Path) -> None:
    url = f"sqlite:///{home}/no-such-directory/office.db"

    result = run(home, "--db", url, "db", "upgrade")

    assert result.exit_code == 2, result.output
    assert one_line_error(result) == (
        "office: cannot open the database (unable to open database file): "
        "check --db / OFFICE_DATABASE_URL"
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("bogus://x", "unsupported database 'bogus'"),
        ("garbage", "not a database URL: 'garbage'"),
        ("postgresql+psycopg2://u@127.0.0.1:1/x", "unsupported database 'postgresql+psycopg2'"),
        ("sqlite://relative.db", "a SQLite URL names a file after three slashes"),
    ],
)
def test_a_database_url_of_the_wrong_form_exits_2_with_one_line(
    home: Path, url: str, message: str
) -> None:
    result = run(home, "--db", url, "db", "upgrade")

    assert result.exit_code == 2, result.output
    assert one_line_error(result).startswith(f"office: {message}")
    assert not (home / "relative.db").exists()


def test_a_database_server_that_refuses_exits_1_with_one_line(home: Path) -> None:
    port = closed_port_url().rsplit(":", 1)[1]

    result = run(home, "--db", f"postgresql://postgres@127.0.0.1:{port}/x", "db", "upgrade")

    assert result.exit_code == 1, result.output
    assert one_line_error(result).startswith("office: database error: connection failed: ")


def test_db_upgrade_creates_the_schema(home: Path) -> None:
    first = run(home, "db", "upgrade")
    again = run(home, "db", "upgrade")

    assert first.exit_code == 0, first.output
    assert again.exit_code == 0, again.output
    assert f"is at revision {migrate.head_revision()}" in first.stdout
    assert (home / "office.db").is_file()
    store = Store.open(f"sqlite:///{home / 'office.db'}")
    try:
        assert migrate.current_revision(store.db) == migrate.head_revision()
    finally:
        store.close()


def test_import_dry_run_shows_the_plan_and_changes_nothing(home: Path) -> None:
    result = run(home, "import", str(EXAMPLE), "--dry-run")

    assert result.exit_code == 0, result.output
    assert "Import plan for workspace 'Demo Office'" in result.stdout
    for line in ("workspace  Demo Office", "agent      coordinator", "project    greeting"):
        assert line in result.stdout
    assert result.stdout.count("create") == 8
    assert "Dry run: nothing was changed." in result.stdout
    listed = run(home, "--json", "import", str(EXAMPLE), "--dry-run")
    assert listed.exit_code == 0
    plan = json.loads(listed.stdout)
    assert plan["applied"] is False
    assert {c["action"] for c in plan["changes"]} == {"create"}
    # Regression: a dry run used to create (and migrate) the database file.
    assert not (home / "office.db").exists()


def test_import_applies_then_reports_nothing_to_change(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "office"
    (config / "agents").mkdir(parents=True)
    (config / "office.yml").write_text("workspace: {name: Small}\n")
    (config / "agents" / "solo.yml").write_text("role: worker\ncooldown_s: 2\n")

    refused = run(home, "import", str(config))
    applied = run(home, "import", str(config), "--yes")
    (config / "agents" / "solo.yml").write_text("role: worker\ncooldown_s: 5\n")
    planned = run(home, "--json", "import", str(config), "--dry-run")
    updated = run(home, "import", str(config), "-y")
    unchanged = run(home, "import", str(config), "-y")

    assert refused.exit_code == 2
    assert "--yes" in one_line_error(refused)
    assert applied.exit_code == 0, applied.output
    assert "Applied. Workspace id:" in applied.stdout
    changes = {c["name"]: c for c in json.loads(planned.stdout)["changes"]}
    assert changes["solo"]["action"] == "update"
    assert changes["solo"]["fields"] == ["cooldown_s"]
    assert changes["Small"]["action"] == "unchanged"
    assert updated.exit_code == 0
    assert "Nothing to change." in unchanged.stdout


def test_import_rejects_bad_config_with_the_field(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "office"
    (config / "agents").mkdir(parents=True)
    (config / "office.yml").write_text("workspace: {name: Bad}\n")
    (config / "agents" / "coder.yml").write_text("role: worker\nmax_concurrent_sessions: 0\n")

    result = run(home, "import", str(config), "--dry-run")

    assert result.exit_code == 2
    line = one_line_error(result)
    assert line.startswith("office: agents/coder.yml: max_concurrent_sessions")


def test_export_writes_what_import_reads(home: Path, tmp_path: Path, example: Path) -> None:
    assert run(home, "import", str(example), "--yes").exit_code == 0

    exported = run(home, "export", "--workspace", "Demo Office", str(tmp_path / "out"))
    missing = run(home, "export", "--workspace", "Nobody", str(tmp_path / "out2"))
    only = run(home, "export", str(tmp_path / "out3"))
    again = run(home, "--json", "import", str(tmp_path / "out"), "--dry-run")

    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "out" / "agents" / "coordinator.yml").is_file()
    assert missing.exit_code == 1
    assert "no workspace named 'Nobody'" in one_line_error(missing)
    assert {c["action"] for c in json.loads(again.stdout)["changes"]} == {"unchanged"}
    assert only.exit_code == 0
    assert (tmp_path / "out3" / "office.yml").read_text() == (
        tmp_path / "out" / "office.yml"
    ).read_text()


def test_export_needs_an_initialised_database(home: Path, tmp_path: Path) -> None:
    result = run(home, "export", "--workspace", "x", str(tmp_path / "out"))

    assert result.exit_code == 1
    assert "office db upgrade" in one_line_error(result)


def test_serve_answers_client_commands_and_stops_cleanly(home: Path, example: Path) -> None:
    assert run(home, "import", str(example), "--yes").exit_code == 0
    server = Server(home)
    try:
        token = (home / "admin_token").read_text().strip()

        def client(*args: str, input: str | None = None) -> Result:
            return run(home, "--api-url", server.url, *args, input=input)

        created = client("--json", "task", "create", "--title", "Plain job", "--kanban")
        task: dict[str, Any] = json.loads(created.stdout)
        updated = client("task", "update", task["id"], "--title", "Renamed", "--state", "in_review")
        commented = client("comment", "add", task["id"], "--body", "-", input="from stdin\n")
        done = client("task", "done", task["id"])
        shown = client("--json", "task", "show", task["id"])
        listed = client("task", "list", "--state", "DONE")
        agents = client("--json", "agent", "list")
        missing = client("task", "show", "no-such-task")
        invalid = client("task", "update", task["id"], "--assignee", "nobody")
        bad_title = client("task", "create", "--title", "x" * 501)
        bad_token = run(home, "--api-url", server.url, "--token", "osa_wrong", "runs", "list")
        runs = client("--json", "runs", "list")
        writer = next(a for a in json.loads(agents.stdout) if a["name"] == "writer")
        queued = client("--json", "runs", "queue", task["id"], "--agent", writer["id"])
        by_name = client("--json", "runs", "list", "--agent", "writer")
        by_unknown = client("runs", "list", "--agent", "nobody")
        run_table = client("runs", "list")
        reports = client("agent", "update", "writer", "--reports-to", "coordinator")
        agent_table = client("agent", "list")
        routine_table = client("routine", "list")
    finally:
        code, _out, err = server.stop()

    # stdout is a pipe here (as under a service manager): only the file's path is printed.
    assert f"Admin token saved to {home / 'admin_token'}" in server.token_line
    assert token not in server.token_line
    assert (home / "admin_token").stat().st_mode & 0o777 == 0o600
    assert created.exit_code == 0, created.output
    assert task["title"] == "Plain job"
    assert updated.exit_code == 0, updated.output
    assert commented.exit_code == 0, commented.output
    assert done.exit_code == 0
    assert json.loads(shown.stdout)["state"] == "DONE"
    assert json.loads(shown.stdout)["title"] == "Renamed"
    assert "Renamed" in listed.stdout
    assert {a["name"] for a in json.loads(agents.stdout)} == {"coordinator", "writer", "reviewer"}
    assert missing.exit_code == 1
    one_line_error(missing)
    assert invalid.exit_code == 1, "an agent name that matches nobody is not found"
    assert "no agent 'nobody'" in one_line_error(invalid)
    assert bad_title.exit_code == 2
    one_line_error(bad_title)
    assert bad_token.exit_code == 1
    one_line_error(bad_token)
    assert json.loads(runs.stdout) == []
    # Regression: --agent took ids only, so a name listed nothing and exited 0.
    assert [r["id"] for r in json.loads(by_name.stdout)] == [json.loads(queued.stdout)["run_id"]]
    assert by_unknown.exit_code == 1
    assert "no agent 'nobody'" in one_line_error(by_unknown)
    # Tables name agents (--json keeps the ids): the agent column, reports-to, assignees.
    agent_ids = {a["id"] for a in json.loads(agents.stdout)}
    for shown_table in (run_table, reports, agent_table, routine_table):
        assert shown_table.exit_code == 0, shown_table.output
    [run_row] = run_table.stdout.splitlines()[1:]
    assert run_row.split()[1] == "writer"
    assert "coordinator" in routine_table.stdout
    for shown_table in (run_table, routine_table):
        assert not agent_ids & set(shown_table.stdout.split()), shown_table.stdout
    [writer_line] = [line for line in agent_table.stdout.splitlines() if " writer " in line]
    assert "coordinator" in writer_line.split()[2:]
    agent_lines = agent_table.stdout.splitlines()[1:]
    assert not agent_ids & {word for line in agent_lines for word in line.split()[1:]}
    assert code == 0, err
    assert "Traceback" not in err


def test_an_api_url_without_a_scheme_exits_2_with_one_line(home: Path) -> None:
    result = run(home, "--api-url", "notaurl", "runs", "list")

    assert result.exit_code == 2
    assert one_line_error(result) == (
        "office: --api-url 'notaurl' is not a server URL: use http://HOST:PORT"
    )


def test_client_commands_name_the_fix_for_an_empty_server_and_an_api_url_with_the_api_path(
    home: Path,
) -> None:
    """README walk: an empty server said to name a workspace there was none of; an
    ``--api-url`` ending in ``/api/v1`` said only "Not Found"."""
    server = Server(home)
    try:
        empty = run(home, "--api-url", server.url, "task", "list")
        with_path = run(home, "--api-url", server.url + "/api/v1", "runs", "list")
    finally:
        server.stop()
    assert empty.exit_code == 2
    assert one_line_error(empty) == (
        "office: there is no workspace yet: create one with `office import DIR`"
    )
    assert with_path.exit_code == 2
    assert one_line_error(with_path) == (
        f"office: --api-url names the server, without /api/v1: {server.url}/api/v1"
    )


def test_a_scheduler_only_serve_mints_no_admin_token_and_warns_about_the_api_url(
    home: Path,
) -> None:
    """README walk: ``serve --no-api`` wrote the first admin token into its own home (no
    client looks there) and let agents call a default API address silently."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "office_scheduler", "serve", "--no-api"],
        env={**base, "OFFICE_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    serving = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert serving.startswith("office is serving (no API")
    assert err.splitlines()[0] == (
        "office serve --no-api: agents will call the API at http://127.0.0.1:8700; "
        "set OFFICE_API_URL to the address of a process that serves it"
    )
    assert not (home / "admin_token").exists()


@pytest.mark.postgres
def test_a_search_path_schema_that_does_not_exist_exits_2_naming_it(
    home: Path, pg_admin_engine: sa.Engine
) -> None:
    """README walk: it said "current transaction is aborted" (exit 1)."""
    url = pg_admin_engine.url.render_as_string(hide_password=False)
    schema = f"missing_{uuid.uuid4().hex[:12]}"
    result = run(home, "--db", f"{url}?options=-csearch_path%3D{schema}", "db", "upgrade")

    assert result.exit_code == 2
    assert one_line_error(result) == (
        f"office: no schema of the search_path exists ({schema}): "
        f"create it first, e.g. CREATE SCHEMA {schema}"
    )


def test_workspaces_projects_and_agents_are_taken_by_name_as_by_id(
    home: Path, example: Path
) -> None:
    """README walk: ``--project`` took only an id no command shows, ``runs queue --agent``
    and client commands' ``--workspace`` only ids."""
    assert run(home, "import", str(example), "--yes").exit_code == 0
    server = Server(home)
    try:

        def client(*args: str) -> Result:
            return run(home, "--api-url", server.url, "--json", *args)

        by_name = "--workspace", "Demo Office"
        created = client("task", "create", "--title", "Greet", *by_name, "--project", "greeting")
        task = json.loads(created.stdout)
        listed = client("task", "list", *by_name, "--project", "greeting")
        queued = client("runs", "queue", task["id"], "--agent", "writer")
        unknown = run(home, "--api-url", server.url, "task", "list", "--workspace", "Nope")
        no_project = run(
            home, "--api-url", server.url, "task", "create", "--title", "x", "--project", "nope"
        )
        other = json.loads(client("task", "create", "--title", "Other", *by_name).stdout)
        moved = client("task", "update", other["id"], "--project", "greeting")
        removed = client("task", "update", other["id"], "--no-project")
        blank = run(home, "--api-url", server.url, "task", "update", other["id"], "--project", "")
        blanks = [
            run(home, "--api-url", server.url, *args)
            for args in (
                ("task", "create", "--title", "x", *by_name, "--project", " "),
                ("task", "create", "--title", "x", *by_name, "--assignee", ""),
                ("task", "update", other["id"], "--assignee", "", "--title", "t"),
                ("task", "create", "--title", " ", *by_name),
                ("task", "update", other["id"], "--title", ""),
                ("task", "create", "--title", "x", *by_name, "--blocked-by", ""),
                ("task", "update", other["id"], "--blocked-by", " "),
            )
        ]
    finally:
        server.stop()
    assert queued.exit_code == 0, queued.output
    run_id = int(json.loads(queued.stdout)["run_id"])
    store = Store.open(f"sqlite:///{home}/office.db")
    try:
        [project] = store.office.list_projects(task["workspace_id"])
        agents = {a.id: a.name for a in store.office.list_agents(task["workspace_id"])}
        queued_for = agents[store.queue.get_run(run_id).agent_id]
    finally:
        store.close()
    assert task["project_id"] == project.id
    assert [t["id"] for t in json.loads(listed.stdout)] == [task["id"]]
    assert queued_for == "writer"
    assert unknown.exit_code == 1  # not found, as an unknown id
    assert one_line_error(unknown) == "office: no workspace 'Nope' (give its id or name)"
    assert no_project.exit_code == 1
    assert one_line_error(no_project).startswith("office: no project 'nope' in workspace ")
    assert json.loads(moved.stdout)["project_id"] == project.id
    assert json.loads(removed.stdout)["project_id"] is None
    assert blank.exit_code == 2
    assert one_line_error(blank) == (
        "office: --project needs a project id or name (--no-project removes it)"
    )
    assert [(b.exit_code, one_line_error(b)) for b in blanks] == [
        (2, "office: --project needs a project id or name (leave it out for none)"),
        (2, "office: --assignee needs an agent id or name (leave it out for none)"),
        (2, "office: --assignee needs an agent id or name (--unassign removes it)"),
        (2, "office: --title needs some text (every task has a title)"),
        (2, "office: --title needs some text (leave it out to keep the title)"),
        (2, "office: --blocked-by needs a task id (one per option)"),
        (2, "office: --blocked-by needs a task id (one per option)"),
    ]


def test_a_command_without_a_token_says_where_one_is_looked_for(home: Path, tmp_path: Path) -> None:
    """README walk: ``--home`` elsewhere gave only "missing bearer token"."""
    server = Server(home)
    elsewhere = tmp_path / "elsewhere"
    try:
        result = run(elsewhere, "--api-url", server.url, "runs", "list")
    finally:
        server.stop()
    assert result.exit_code == 1
    line = one_line_error(result)
    assert line.startswith("office: missing bearer token: no token was sent: set OFFICE_TOKEN")
    assert line.endswith(f"(there is no {elsewhere / 'admin_token'})")
