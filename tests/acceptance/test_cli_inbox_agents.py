"""``office agent|inbox|activity …`` against a live HTTP server (on both databases)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from api_harness import Api, open_api
from cli_harness import CLEAN_ENV, ServedCli, serving_in_thread
from office_scheduler.cli import office
from office_scheduler.domain.status import InboxKind
from office_scheduler.store.engine import Database


class Served(ServedCli):
    """A served API with a workspace, a coordinator and a worker; ``run`` invokes the CLI."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        super().__init__(api, url, home)
        self.ws = api.workspace("acme")["id"]
        self.lead = api.agent(self.ws, "lead", role="coordinator")["id"]
        self.worker = api.agent(self.ws, "worker-1")["id"]


@pytest.fixture
def served(tmp_path: Path, database: Database) -> Iterator[Served]:
    with (
        open_api(tmp_path, database=database) as api,
        serving_in_thread(api.client.app) as url,
    ):
        yield Served(api, url, tmp_path / "home")


def _one_line_error(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("office: "), result.stderr
    return lines[0]


def test_agent_update_show_pause_resume_stop(served: Served) -> None:
    changed = served.json(
        "agent",
        "update",
        "worker-1",
        "--reports-to",
        "lead",
        "--max-sessions",
        "2",
        "--cooldown",
        "3",
        "--no-skip-idle",
        "--permission-policy",
        "allow_listed:bash,read",
    )
    assert changed["reports_to"] == served.lead
    assert (changed["max_concurrent_sessions"], changed["cooldown_s"]) == (2, 3.0)
    assert changed["skip_idle_wakeups"] is False
    assert changed["permission_policy"] == {"mode": "allow_listed", "tools": ["bash", "read"]}
    shown = served.run("agent", "show", served.worker)
    assert "reports_to" in shown.stdout
    assert served.lead in shown.stdout

    assert "worker-1: paused (manual)" in served.run("agent", "pause", "worker-1").stdout
    assert served.json("agent", "resume", "worker-1")["status"] == "idle"
    assert served.json("agent", "stop", served.worker)["status"] == "stopped"
    listed = served.run("agent", "list")
    assert "stopped" in listed.stdout
    cleared = served.json("agent", "update", "worker-1", "--reports-to", "none")
    assert cleared["reports_to"] is None


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--max-sessions", "0"], "--max-sessions"),
        (["--permission-policy", "sometimes"], "--permission-policy"),
        (["--permission-policy", "{bad json"], "--permission-policy"),
        (["--reports-to", "worker-1"], "report to itself"),
        (["--permission-policy", '{"mode": "deny", "tools": ["x"]}'], "permission_policy.tools"),
        ([], "nothing to change"),
    ],
)
def test_agent_update_bad_values_exit_2(served: Served, args: list[str], words: str) -> None:
    result = served.run("agent", "update", "worker-1", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert words in _one_line_error(result)


def test_inbox_and_activity_commands(served: Served) -> None:
    runlog, now = served.api.service.store.runlog, served.api.clock.now()
    item = runlog.add_inbox_item(
        workspace_id=served.ws, kind=InboxKind.AGENT_ERROR, title="it broke", now=now
    )
    listed = served.json("inbox", "list", "--status", "open", "--kind", "agent.error")
    assert [i["id"] for i in listed] == [item.id]
    assert "it broke" in served.run("inbox", "list").stdout
    assert served.json("inbox", "resolve", str(item.id))["status"] == "resolved"
    refused = served.run("inbox", "dismiss", str(item.id))
    assert refused.exit_code == 1
    assert "already resolved" in _one_line_error(refused)
    assert served.json("inbox", "list", "--status", "open") == []

    served.run("agent", "pause", "worker-1")
    served.run("agent", "resume", "worker-1")
    entries = served.json("activity", "list", "--actor", "user", "--agent", "worker-1")
    assert [e["kind"] for e in entries] == ["agent_resumed", "agent_paused"]
    paused = served.json("activity", "list", "--action", "agent_paused")
    assert [e["agent_id"] for e in paused] == [served.worker]
    assert served.json("activity", "list", "--since", "2999-01-01T00:00:00Z") == []
    assert served.json("activity", "list", "--run", "1", "--task", "nope") == []
    bad = served.run("activity", "list", "--since", "yesterday")
    assert bad.exit_code == 2
    assert "--since" in _one_line_error(bad)
    text = served.run("activity", "list")
    assert "agent_resumed" in text.stdout
    assert "ACTOR" in text.stdout


def test_wake_takes_an_agent_name_or_id(served: Served) -> None:
    by_name = served.json("wake", "worker-1", "--reason", "go")
    assert by_name["wakeup"]["agent_id"] == served.worker
    by_id = served.json("wake", served.lead, "--reason", "go")
    assert by_id["wakeup"]["agent_id"] == served.lead
    missing = served.run("wake", "nobody", "--reason", "go")
    assert missing.exit_code == 1
    assert "no agent 'nobody'" in _one_line_error(missing)


def test_wake_by_name_takes_the_workspace_when_there_are_several(served: Served) -> None:
    other = served.api.workspace("elsewhere")["id"]
    their_worker = served.api.agent(other, "worker-1")["id"]
    ambiguous = served.run("wake", "worker-1")
    assert ambiguous.exit_code == 2
    assert "several workspaces" in _one_line_error(ambiguous)
    named = served.json("wake", "worker-1", "--workspace", other)
    assert named["wakeup"]["agent_id"] == their_worker
    result = CliRunner().invoke(
        office,
        ["--api-url", served.url, "--json", "wake", "worker-1"],
        env={
            **CLEAN_ENV,
            "OFFICE_HOME": str(served.home),
            "OFFICE_TOKEN": served.api.admin_token,
            "OFFICE_WORKSPACE_ID": served.ws,
        },
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["wakeup"]["agent_id"] == served.worker
