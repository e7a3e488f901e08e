"""A broken agent is visible: `failing · auth` on its card, and no page scrolls sideways.

The broken agent's CLI replays a real captured Claude stream-json session (the fixtures
under ``tests/fixtures/agents/claude``) and ends with Claude's "Invalid API key" result,
exiting 1, as the real CLI does when its login is gone.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from browser.conftest import Screenshot, sign_in
from browser.harness import LiveOffice

CLAUDE = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "claude"
WIDTH = 1400


def _wait_for(check: Any, *, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _broken_cli(home: Path) -> Path:
    """A stand-in for `claude -p --output-format stream-json` whose login is gone."""
    script = home / "claude_without_login.py"
    captured = [CLAUDE / "success.jsonl", CLAUDE / "auth.jsonl"]
    script.write_text(
        "import sys\n"
        f"for path in {[str(p) for p in captured]!r}:\n"
        "    sys.stdout.write(open(path, encoding='utf-8').read())\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('Invalid API key · Please run /login\\n')\n"
        "sys.exit(1)\n"
    )
    return script


def test_an_agent_whose_cli_fails_auth_shows_failing_and_no_page_scrolls_sideways(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    script = _broken_cli(office.home)
    workspace = office.api("GET", f"/api/v1/workspaces/{office.workspace_id}")
    executors = {
        name: {k: v for k, v in config.items() if k not in ("name", "env_keys")}
        for name, config in workspace["settings"]["executors"].items()
    }
    executors["claude-no-login"] = {"kind": "command", "argv": [sys.executable, str(script)]}
    office.api(
        "PATCH",
        f"/api/v1/workspaces/{office.workspace_id}",
        json={"settings": {"executors": executors}},
    )
    agent = office.api(
        "POST",
        f"/api/v1/workspaces/{office.workspace_id}/agents",
        json={"name": "broken", "role": "worker", "executor": "claude-no-login", "cooldown_s": 0},
    )
    task = office.api(
        "POST",
        f"/api/v1/workspaces/{office.workspace_id}/tasks",
        json={"title": "Needs a login", "assignee_agent_id": agent["id"]},
    )

    def failed_run() -> dict[str, Any] | None:
        found = office.api("GET", "/api/v1/runs", params={"task_id": task["id"]})["items"]
        done = [run for run in found if run["status"] in ("scheduled_retry", "failed")]
        return done[0] if done else None

    run = _wait_for(failed_run)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    sign_in(page, office)

    card = page.locator(".agent-card[data-agent='broken']")
    expect(card.locator(".badge.failing")).to_have_text("failing · auth")
    expect(card).to_contain_text("Invalid API key · Please run /login")
    screenshot(page, "overview-failing")
    page.goto(f"/agents/{agent['id']}")
    expect(page.locator("#agent-failing")).to_contain_text("failing · auth")
    expect(page.locator("#agent-failing")).to_contain_text("1 run(s) in a row")
    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#run-error-family")).to_have_text("auth")
    expect(page.locator("#run-events")).to_contain_text('"type":"system"')

    for path in (
        "/",
        "/agents",
        f"/agents/{agent['id']}",
        f"/runs/{run['id']}",
        "/runs",
        "/inbox",
        "/activity",
        "/wakeups",
        f"/tasks/{task['id']}",
    ):
        page.goto(path)
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} scrolls {overflow} px sideways at {WIDTH} px"
    screenshot(page, "run-claude-stream-json")
