"""``office notify …`` and GitHub/Slack trigger options against a live HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api_harness import Api, open_api
from cli_harness import ServedCli, serving_in_thread
from office_scheduler.store.engine import Database


class Served(ServedCli):
    """A served API with one workspace; ``run`` invokes the CLI."""

    def __init__(self, api: Api, url: str, home: Path) -> None:
        super().__init__(api, url, home)
        self.ws = api.workspace("acme")["id"]
        self.agent = api.agent(self.ws, "triager")["id"]


@pytest.fixture
def served(tmp_path: Path, database: Database) -> Iterator[Served]:
    with (
        open_api(tmp_path, database=database) as api,
        serving_in_thread(api.client.app) as url,
    ):
        yield Served(api, url, tmp_path / "home")


def test_notify_set_list_test_deliveries_remove(served: Served) -> None:
    answers = [500, 200]

    def receiver(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answers.pop(0))

    served.api.service.notifications._transport = httpx.MockTransport(receiver)
    made = served.json(
        "notify", "set", "ops", "--url", "http://127.0.0.1:9/h", "--event", "task.done"
    )
    assert made["secret"].startswith("whsec_")
    assert made["events"] == ["task.done"]
    listed = served.run("notify", "list")
    assert listed.exit_code == 0
    assert "ops" in listed.stdout
    assert "127.0.0.1" in listed.stdout
    assert made["secret"] not in listed.stdout

    refused = served.run("notify", "test", "ops")
    assert refused.exit_code == 1
    assert "HTTP 500" in refused.stderr
    assert served.json("notify", "test", "ops")["delivered"] is True
    assert served.json("notify", "deliveries") == []

    bad = served.run("notify", "set", "ops", "--url", "http://x", "--event", "nope")
    assert bad.exit_code == 2
    missing = served.run("notify", "test", "ghost")
    assert missing.exit_code == 1
    assert served.run("notify", "remove", "ops").exit_code == 0
    assert served.json("notify", "list") == []


def test_trigger_add_takes_github_and_slack_options(served: Served) -> None:
    routine = served.json("routine", "create", "--name", "GitHub issues", "--assignee", "triager")
    github = served.json(
        "routine", "trigger", "add", routine["id"], "--kind", "webhook", "--signing", "github",
        "--event", "issues:opened,labeled", "--event", "pull_request",
    )  # fmt: skip
    assert github["events"] == {"issues": ["opened", "labeled"], "pull_request": []}
    assert github["secret"]
    task = served.api.task(served.ws, title="#support")["id"]
    slack = served.json(
        "routine", "trigger", "add", routine["id"], "--kind", "webhook", "--signing", "slack",
        "--secret", "s3cret", "--task", task,
    )  # fmt: skip
    assert slack["task_id"] == task
    no_secret = served.run(
        "routine", "trigger", "add", routine["id"], "--kind", "webhook", "--signing", "slack",
        "--task", task,
    )  # fmt: skip
    assert no_secret.exit_code == 2
    assert "signing secret" in no_secret.stderr
