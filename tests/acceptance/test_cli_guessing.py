"""A CLI agents can guess: aliases, suggestions, config-key options, id prefixes, JSON and
import errors, and help that imports no server code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from api_harness import Api, open_api
from cli_harness import CLEAN_ENV, ServedCli, serving_in_thread
from office_scheduler.cli import office
from office_scheduler.cli.id_prefix import expand, expand_fields, expand_path
from office_scheduler.cli.init import scaffold
from office_scheduler.cli.main import ALIASES, COMMANDS, SHORT_HELP
from office_scheduler.cli.state import CliError
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.files import load_config
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import workspaces


class Served(ServedCli):
    def __init__(self, api: Api, url: str, home: Path) -> None:
        super().__init__(api, url, home)
        self.ws = api.workspace("acme")["id"]
        self.worker = api.agent(self.ws, "worker-1")["id"]


@pytest.fixture
def served(tmp_path: Path, database: Database) -> Iterator[Served]:
    with (
        open_api(tmp_path, database=database) as api,
        serving_in_thread(api.client.app) as url,
    ):
        yield Served(api, url, tmp_path / "home")


def local(*args: str, home: Path | None = None) -> Result:
    env: dict[str, str | None] = dict(CLEAN_ENV)
    if home is not None:
        env["OFFICE_HOME"] = str(home)
    return CliRunner().invoke(office, list(args), env=env)


# -- aliases and suggestions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("run", "runs"),
        ("runs", "runs"),
        ("agent", "agent"),
        ("agents", "agent"),
        ("task", "task"),
        ("tasks", "task"),
        ("wakeup", "wakeups"),
        ("wakeups", "wakeups"),
        ("routine", "routine"),
        ("routines", "routine"),
    ],
)
def test_plural_and_singular_groups_both_work(alias: str, canonical: str) -> None:
    result = local(alias, "--help")
    expected = local(canonical, "--help")

    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n", 1)[1] == expected.stdout.split("\n", 1)[1]
    assert "list" in result.stdout


def test_every_alias_names_a_command() -> None:
    assert set(ALIASES.values()) <= set(COMMANDS)


def test_aliases_reach_the_server(served: Served) -> None:
    agents = served.json("agents", "list")
    runs = served.json("run", "list")

    assert [agent["name"] for agent in agents] == ["worker-1"]
    assert runs == []


@pytest.mark.parametrize(
    ("args", "suggested"),
    [
        (("agnt", "list"), "Did you mean 'agent'?"),
        (("runz",), "Did you mean 'runs'?"),
        (("tsks",), "Did you mean 'task'?"),
        (("run", "lst"), "Did you mean 'list'?"),
        (("agents", "shw"), "Did you mean 'show'?"),
        (("imprt",), "Did you mean 'import'?"),
    ],
)
def test_unknown_commands_suggest_the_closest(args: tuple[str, ...], suggested: str) -> None:
    result = local(*args)

    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("office: No such command")
    assert suggested in line


# -- options named like the config keys ---------------------------------------------------


def test_agent_update_options_answer_to_the_config_key_names(served: Served) -> None:
    changed = served.json(
        "agent",
        "update",
        "worker-1",
        "--cooldown-s",
        "7",
        "--max-concurrent-sessions",
        "3",
        "--no-skip-idle-wakeups",
    )
    short = served.json("agent", "update", "worker-1", "--cooldown", "8", "--max-sessions", "2")

    assert (changed["cooldown_s"], changed["max_concurrent_sessions"]) == (7, 3)
    assert changed["skip_idle_wakeups"] is False
    assert (short["cooldown_s"], short["max_concurrent_sessions"]) == (8, 2)


@pytest.mark.parametrize(
    ("group", "command", "names"),
    [
        ("routine", "create", ["--timezone", "--concurrency-policy", "--catch-up-policy"]),
        ("routine", "update", ["--concurrency-policy", "--catch-up-policy"]),
    ],
)
def test_routine_options_answer_to_the_config_key_names(
    group: str, command: str, names: list[str]
) -> None:
    text = local(group, command, "--help").stdout
    for name in names:
        assert name in text


def test_trigger_options_answer_to_the_config_key_names() -> None:
    text = local("routine", "trigger", "add", "--help").stdout

    assert "--timezone" in text
    assert "--signing-mode" in text


# -- id prefixes ---------------------------------------------------------------------------


def test_a_unique_id_prefix_works_where_an_id_does(served: Served) -> None:
    task = served.api.task(served.ws, "Prefixed", assignee_agent_id=served.worker)
    short = task["id"][:8]

    shown = served.json("task", "show", short)
    by_six = served.json("tasks", "show", task["id"][:6])
    commented = served.run("comment", "add", short, "--body", "hello")
    agent = served.json("agent", "show", served.worker[:8])
    woken = served.json("wake", served.worker[:8], "--task", short)
    listed = served.json("runs", "list", "--task", short)

    assert shown["id"] == by_six["id"] == task["id"]
    assert commented.exit_code == 0, commented.stderr
    assert agent["id"] == served.worker
    assert woken["wakeup"]["task_id"] == task["id"]
    assert [run["task_id"] for run in listed] == [task["id"]]


def test_an_ambiguous_prefix_exits_2_listing_the_matches(served: Served) -> None:
    ids = ["abcdef01" + "0" * 24, "abcdef02" + "0" * 24]
    now = served.api.clock.now()
    with served.api.service.store.db.write() as conn:
        for number, new in enumerate(ids):
            conn.execute(
                sa.insert(workspaces).values(
                    id=new,
                    name=f"bare-{number}",
                    office_workflow_id="w",
                    routine_workflow_id="w",
                    kanban_workflow_id="w",
                    created_at=now,
                )
            )

    ambiguous = served.run("agent", "list", "--workspace", "abcdef")
    unique = served.api.client.get(
        "/api/v1/ids/workspaces/abcdef01",
        headers={"Authorization": f"Bearer {served.api.admin_token}"},
    )

    assert ambiguous.exit_code == 2
    (line,) = ambiguous.stderr.strip().splitlines()
    assert "ambiguous" in line
    assert ids[0] in line
    assert ids[1] in line
    assert unique.json()["ids"] == [ids[0]]


def test_a_run_token_expands_prefixes_of_its_own_workspace_only(served: Served) -> None:
    other = served.api.workspace("other")["id"]
    foreign = served.api.task(other, "Not yours")
    mine = served.api.task(served.ws, "Yours")
    token, _run_id = served.api.run_token(served.ws, served.worker)
    headers = {"Authorization": f"Bearer {token}"}

    own = served.api.client.get(f"/api/v1/ids/tasks/{mine['id'][:8]}", headers=headers)
    theirs = served.api.client.get(f"/api/v1/ids/tasks/{foreign['id'][:8]}", headers=headers)

    assert own.json()["ids"] == [mine["id"]]
    assert theirs.json()["ids"] == []


def test_prefix_expansion_rules() -> None:
    calls: list[tuple[str, str]] = []

    def lookup(kind: str, prefix: str) -> list[str]:
        calls.append((kind, prefix))
        return {"abcdef": ["abcdef" + "1" * 26], "aaaaaa": ["a" * 32, "aaaaaa" + "b" * 26]}.get(
            prefix, []
        )

    assert expand_path("/tasks/abcdef/comments", lookup) == f"/tasks/abcdef{'1' * 26}/comments"
    assert expand_path("/tasks/abcde/comments", lookup) == "/tasks/abcde/comments"  # too short
    assert expand_path("/agents/writer/wake", lookup) == "/agents/writer/wake"  # a name
    assert expand_path("/tasks/123456", lookup) == "/tasks/123456"  # no match: sent as is
    assert expand_fields({"task_id": "abcdef", "reason": "abcdef"}, lookup) == {
        "task_id": "abcdef" + "1" * 26,
        "reason": "abcdef",
    }
    with pytest.raises(CliError, match="ambiguous: 2 agents match") as raised:
        expand("agents", "aaaaaa", lookup)
    assert raised.value.exit_code == 2
    assert ("tasks", "abcde") not in calls


def test_the_ids_endpoint_refuses_a_short_prefix_and_an_unknown_kind(served: Served) -> None:
    short = served.api.client.get(
        "/api/v1/ids/tasks/abc", headers={"Authorization": f"Bearer {served.api.admin_token}"}
    )
    kind = served.api.client.get(
        "/api/v1/ids/cats/abcdef", headers={"Authorization": f"Bearer {served.api.admin_token}"}
    )

    assert short.status_code == 422
    assert short.json()["error"]["field"] == "prefix"
    assert kind.status_code == 422
    assert kind.json()["error"]["field"] == "kind"


# -- bad JSON and import errors ------------------------------------------------------------


def test_a_bad_payload_says_not_valid_json(tmp_path: Path) -> None:
    result = local("wake", "someone", "--payload", "{bad", home=tmp_path)

    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "--payload is not valid JSON" in line


def write_config(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


OFFICE_YML = """\
workspace: {name: Guess}
executors:
  sample: {kind: command, argv: ["true"]}
"""


def test_an_unknown_key_suggests_the_closest_known_key(tmp_path: Path) -> None:
    root = write_config(
        tmp_path / "o",
        {"office.yml": OFFICE_YML, "agents/a.yml": "name: a\nrole: worker\ncooldown: 5\n"},
    )

    with pytest.raises(InvalidInputError) as raised:
        load_config(root)

    assert raised.value.message == (
        "agents/a.yml: cooldown: unknown key (did you mean 'cooldown_s'?)"
    )


def test_all_errors_of_an_import_are_reported_at_once(tmp_path: Path) -> None:
    agents = {
        f"agents/a{i}.yml": f"name: a{i}\nrole: worker\nmax_concurrent_sessions: 0\n"
        for i in range(3)
    }
    root = write_config(
        tmp_path / "o",
        {
            "office.yml": OFFICE_YML + "settings: {coalesce_window: 1}\n",
            **agents,
            "agents/b.yml": "name: b\nrole: worker\nexecutor: nope\nmax_sessions: 2\n",
            "projects/p.yml": "name: p\nrepos: 5\n",
        },
    )

    result = local("import", str(root), "--dry-run", home=tmp_path / "home")

    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith("office: ") for line in lines)
    text = "\n".join(lines)
    assert "settings.coalesce_window: unknown key (did you mean 'coalesce_window_s'?)" in text
    for i in range(3):
        assert f"agents/a{i}.yml: max_concurrent_sessions: must be an integer in 1..100" in text
    assert "agents/b.yml: max_sessions: unknown key" in text
    assert "projects/p.yml: repos" in text
    assert len(lines) == 6


def test_errors_beyond_twenty_are_counted(tmp_path: Path) -> None:
    agents = {
        f"agents/a{i:02}.yml": f"name: a{i}\nrole: worker\ncooldown_s: -1\n" for i in range(25)
    }
    root = write_config(tmp_path / "o", {"office.yml": OFFICE_YML, **agents})

    with pytest.raises(InvalidInputError) as raised:
        load_config(root)

    lines = raised.value.message.splitlines()
    assert len(lines) == 21
    assert lines[-1] == "... and 5 more errors"


# -- help imports no server code -----------------------------------------------------------

SERVER_MODULES = ("fastapi", "sqlalchemy", "uvicorn", "alembic", "starlette", "psycopg")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["task", "--help"],
        ["runs", "--help"],
        ["db", "--help"],
        ["serve", "--help"],
        ["import", "--help"],
        ["demo", "--help"],
    ],
)
def test_help_imports_no_server_code(args: list[str]) -> None:
    script = (
        "import sys\n"
        f"sys.argv = ['office', *{args!r}]\n"
        "from office_scheduler.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(SERVER_MODULES)!r}),"
        " file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )

    assert "Usage: office" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_the_help_table_matches_each_commands_own_help() -> None:
    ctx = click.Context(office)
    for name in COMMANDS:
        command = office.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(limit=300) == SHORT_HELP[name], name


# -- office init ---------------------------------------------------------------------------


def test_init_makes_one_executor_per_cli_found(tmp_path: Path) -> None:
    found = scaffold(tmp_path / "o", which=lambda name: f"/bin/{name}" if name != "codex" else None)
    config = load_config(tmp_path / "o")

    assert found == ["claude", "gemini"]
    assert set(config.settings.executors) == {"claude", "gemini"}
    assert config.settings.executors["claude"].preset == "claude"
    assert config.settings.default_executor == "claude"
    assert [(a.name, a.role.value, a.reports_to) for a in config.agents] == [
        ("coordinator", "coordinator", None),
        ("worker", "worker", "coordinator"),
    ]
    assert [p.name for p in config.projects] == ["main"]
    assert [r.name for r in config.routines] == ["Coordinator heartbeat"]


def test_init_uses_the_sample_agent_when_no_cli_is_found(tmp_path: Path) -> None:
    home = tmp_path / "home"
    scaffolded = local("init", str(tmp_path / "o"), home=home)
    imported = local("import", str(tmp_path / "o"), "--yes", home=home)
    again = local("init", str(tmp_path / "o"), home=home)

    assert scaffolded.exit_code == 0, scaffolded.output
    assert f"office import {tmp_path / 'o'} --yes" in scaffolded.stdout
    assert "office serve" in scaffolded.stdout
    assert (tmp_path / "o" / "sample_agent.py").is_file()
    assert imported.exit_code == 0, imported.output
    assert again.exit_code == 2
    assert "not an empty directory" in again.stderr
