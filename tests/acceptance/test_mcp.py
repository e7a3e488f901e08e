"""``office mcp`` over stdio, driven by the ``mcp`` package's client, against ``office serve``.

The server runs without its scheduler, so the run whose token the MCP server carries stays
queued (a run token works only while its run is live). Effects are checked through the API.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from office_scheduler.agent_tools.server import TOOL_NAMES
from office_scheduler.auth import TokenService
from office_scheduler.store.facade import Store
from server_harness import Server


class Office:
    """A served office with one workspace, one agent, one task and a queued run of it."""

    def __init__(self, home: Path, server: Server) -> None:
        admin = (home / "admin_token").read_text().strip()
        self.http = httpx.Client(
            base_url=server.url + "/api/v1", headers={"Authorization": f"Bearer {admin}"}
        )
        self.url = server.url
        settings = {
            "coalesce_window_s": 0,
            "default_executor": "cli",
            "executors": {"cli": {"kind": "command", "argv": ["agent-cli"]}},
        }
        self.ws = self.ok("POST", "/workspaces", json={"name": "acme", "settings": settings})["id"]
        body = {"name": "worker-1", "role": "worker", "cooldown_s": 0}
        self.agent = self.ok("POST", f"/workspaces/{self.ws}/agents", json=body)["id"]
        task = {"title": "Ship the release", "assignee_agent_id": self.agent}
        self.task = self.ok("POST", f"/workspaces/{self.ws}/tasks", json=task)["id"]
        self.run_id = self.ok("POST", f"/agents/{self.agent}/wake", json={"task_id": self.task})[
            "run_id"
        ]
        store = Store.open(f"sqlite:///{home / 'office.db'}")
        try:
            self.token = TokenService(store).mint_run(
                workspace_id=self.ws,
                agent_id=self.agent,
                run_id=self.run_id,
                attempt=0,
                now=datetime.now(UTC),
                ttl=timedelta(hours=1),
            )
        finally:
            store.close()

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        assert response.status_code < 300, response.text
        return response.json()


@pytest.fixture
def office(tmp_path: Path) -> Iterator[Office]:
    home = tmp_path / "home"
    server = Server(home, "--no-scheduler")
    try:
        served = Office(home, server)
        yield served
        served.http.close()
    finally:
        server.stop()


def server_params(
    office: Office, token_file: Path, *, scoped: bool = True
) -> StdioServerParameters:
    """``office mcp`` for the office's run; ``scoped=False`` leaves out the run's identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    identity = [
        "--workspace",
        office.ws,
        "--agent",
        office.agent,
        "--task",
        office.task,
        "--run",
        str(office.run_id),
    ]
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "office_scheduler",
            "--api-url",
            office.url,
            "mcp",
            "--token-file",
            str(token_file),
            *(identity if scoped else []),
        ],
        env=env,
    )


def payload(result: CallToolResult) -> Any:
    assert result.content, result
    text = getattr(result.content[0], "text", "")
    return json.loads(text) if not result.is_error else text


async def test_agent_tools_over_stdio(office: Office, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(office.token)

    async with Client(server_params(office, token_file)) as client:
        listed = await client.list_tools()
        first = await client.call_tool("create_subtask", {"title": "Write the migration"})
        blocker = payload(first)
        second = await client.call_tool(
            "create_subtask",
            {"title": "Deploy", "assignee": "worker-1", "blocked_by": [blocker["id"]]},
        )
        comment = await client.call_tool("add_comment", {"body": "Split into two subtasks."})
        woken = await client.call_tool("wake_self", {"reason": "check the deploy later"})
        missing = await client.call_tool("add_comment", {"body": "x", "task_id": "tk_missing"})
        read = await client.call_tool("read_task", {})
        approval = await client.call_tool("request_approval", {"title": "Release to production?"})
        inbox = await client.call_tool("read_inbox", {})

    assert [tool.name for tool in listed.tools] == list(TOOL_NAMES)
    assert not first.is_error
    deploy = payload(second)
    assert deploy["parent_id"] == office.task
    assert deploy["blocked_by"] == [blocker["id"]]
    assert deploy["assignee_agent_id"] == office.agent
    assert payload(comment)["author_agent_id"] == office.agent
    assert missing.is_error
    assert "tk_missing" in payload(missing) or "not found" in payload(missing).lower()
    task = payload(read)
    assert {child["id"] for child in task["children"]} == {blocker["id"], deploy["id"]}
    assert [c["body"] for c in task["comments"]] == ["Split into two subtasks."]

    children = office.ok("GET", f"/tasks/{office.task}/subtasks")["items"]
    assert {child["title"] for child in children} == {"Write the migration", "Deploy"}
    comments = office.ok("GET", f"/tasks/{office.task}/comments")["items"]
    assert [(c["body"], c["author_agent_id"]) for c in comments] == [
        ("Split into two subtasks.", office.agent)
    ]
    approvals = office.ok("GET", f"/workspaces/{office.ws}/approvals")["items"]
    assert [(a["id"], a["title"], a["task_id"]) for a in approvals] == [
        (payload(approval)["id"], "Release to production?", office.task)
    ]
    assert isinstance(payload(inbox)["items"], list)
    wakeup = office.ok("GET", f"/wakeups/{payload(woken)['wakeup']['id']}")
    assert wakeup["agent_id"] == office.agent
    assert wakeup["task_id"] == office.task


async def test_bad_token_comes_back_as_a_tool_error(office: Office, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("osr_not_a_token")

    async with Client(server_params(office, token_file)) as client:
        result = await client.call_tool("read_task", {})

    assert result.is_error
    assert "token" in payload(result)


async def test_read_inbox_without_a_workspace_uses_the_only_one(
    office: Office, tmp_path: Path
) -> None:
    """Regression: without --workspace read_inbox failed although one workspace exists."""
    token_file = tmp_path / "token"
    token_file.write_text(office.token)
    office.ok("POST", f"/workspaces/{office.ws}/approvals", json={"title": "Ship it?"})

    async with Client(server_params(office, token_file, scoped=False)) as client:
        inbox = await client.call_tool("read_inbox", {})

    assert not inbox.is_error, payload(inbox)
    assert [item["title"] for item in payload(inbox)["items"]] == ["Ship it?"]
