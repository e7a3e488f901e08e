"""The dashboard in a real browser (Debian's Chromium through Playwright) over a live office.

Each test also saves a screenshot of the page it exercised (under ``docs/screenshots/`` when
``OFFICE_SCREENSHOTS=1``, else in the test's temporary directory).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from browser.conftest import Screenshot, sign_in
from browser.harness import LiveOffice
from office_scheduler.cli.demo import STARTER_DESCRIPTION, STARTER_TITLE


def _wait_for(check: Any, *, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _project_id(office: LiveOffice) -> str:
    projects = office.api("GET", f"/api/v1/workspaces/{office.workspace_id}/projects")
    return str(projects["items"][0]["id"])


def test_no_page_without_a_session_and_sign_in(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    for path in ("/runs", "/board", "/inbox", "/routines/new"):
        response = httpx.get(office.url + path, follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login?next=")
    assert httpx.get(office.url + "/events").status_code == 401
    signed_in = httpx.post(
        office.url + "/login",
        data={"token": office.token, "next": "/"},
        headers={"origin": office.url},
        follow_redirects=False,
    )
    assert signed_in.status_code == 303
    session = signed_in.cookies["office_session"]
    assert office.token not in session, "the cookie holds a session id, never the token"
    forged = httpx.post(
        office.url + "/tasks/x/move",
        data={"state": "DONE"},
        cookies={"office_session": session},
        headers={"origin": "https://evil.example"},
    )
    assert forged.status_code == 403
    assert "another site" in forged.text

    page.goto("/runs")
    page.fill("input[name=token]", "osa_not-a-token")
    page.click("button[type=submit]")
    expect(page.locator(".error-message")).to_contain_text("invalid, revoked or expired token")
    screenshot(page, "login")
    page.fill("input[name=token]", office.token)
    page.click("button[type=submit]")
    expect(page).to_have_url(office.url + "/runs")
    expect(page.locator("h1")).to_have_text("Runs")

    page.goto("/runs?status=bogus")
    expect(page.locator(".error-message")).to_contain_text("status must be one of")


def test_demo_task_goes_from_todo_to_done_live(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    sign_in(page, office)
    coordinator = office.agents["coordinator"]
    page.goto(f"/agents/{coordinator}")
    page.click("button:has-text('Pause')")
    expect(page.locator("#flash")).to_contain_text("coordinator paused")

    page.goto("/board")
    page.evaluate("window.__notReloaded = true")
    expect(page.locator("body[data-live=on]")).to_have_count(1)
    task = office.api(
        "POST",
        f"/api/v1/workspaces/{office.workspace_id}/tasks",
        json={
            "title": STARTER_TITLE,
            "description": STARTER_DESCRIPTION,
            "project_id": _project_id(office),
            "assignee_agent_id": coordinator,
        },
    )
    card = f"[data-task-id='{task['id']}']"
    expect(page.locator(f"[data-state=TODO] {card}")).to_be_visible()
    screenshot(page, "board")

    office.api("POST", f"/api/v1/agents/{coordinator}/resume")
    expect(page.locator(f"[data-state=DONE] {card}")).to_be_visible(timeout=60_000)
    assert page.evaluate("window.__notReloaded") is True
    # The subtasks the coordinator filed went through the board too.
    expect(page.locator("[data-state=DONE] .task-card")).to_have_count(4)

    page.goto("/")
    expect(page.locator(".agent-card")).to_have_count(3)
    expect(page.locator("svg.chart rect[data-outcome=completed]")).not_to_have_count(0)
    screenshot(page, "overview")
    page.goto(f"/tasks/{task['id']}")
    expect(page.locator("h1")).to_contain_text("DONE")
    screenshot(page, "task")
    for name in ("runs", "wakeups", "activity", "agents"):
        page.goto(f"/{name}")
        screenshot(page, name)
    page.goto(f"/agents/{coordinator}")
    screenshot(page, "agent")


def test_drag_to_in_review_wakes_the_reviewer(page: Page, office: LiveOffice) -> None:
    reviewer = office.agents["reviewer"]
    task = office.api(
        "POST",
        f"/api/v1/workspaces/{office.workspace_id}/tasks",
        json={"title": "Proofread the page", "workflow": "office", "reviewers": [reviewer]},
    )
    sign_in(page, office)
    page.goto("/board")
    card = page.locator(f"[data-task-id='{task['id']}']")
    expect(page.locator(f"[data-state=TODO] [data-task-id='{task['id']}']")).to_be_visible()
    card.drag_to(page.locator("[data-state=IN_REVIEW]"))
    expect(page.locator("#flash")).to_contain_text("Moved to IN_REVIEW")
    expect(page.locator(f"[data-state=IN_REVIEW] [data-task-id='{task['id']}']")).to_be_visible()

    page.goto(f"/wakeups?agent={reviewer}")
    row = page.locator("tr", has_text="task_assigned").first
    expect(row).to_be_visible()
    page.goto(f"/tasks/{task['id']}")
    expect(page.locator("#task-runs")).to_contain_text("reviewer")
    expect(page.locator("#task-runs")).to_contain_text("task_assigned")


def test_approve_an_inbox_item_and_reject_needs_a_note(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    writer = office.agents["writer"]
    url = f"/api/v1/workspaces/{office.workspace_id}/approvals"
    first = office.api(
        "POST", url, json={"title": "Publish the page?", "requested_by_agent_id": writer}
    )
    second = office.api(
        "POST", url, json={"title": "Delete old drafts?", "requested_by_agent_id": writer}
    )
    sign_in(page, office)
    page.goto("/inbox")
    screenshot(page, "inbox")
    item = page.locator(".inbox-item", has_text="Delete old drafts?")
    item.locator("button:has-text('Reject')").click()
    expect(page.locator(".error-message")).to_contain_text("note is required")

    page.goto("/inbox")
    page.locator(".inbox-item", has_text="Publish the page?").locator(
        "button:has-text('Approve')"
    ).click()
    expect(page.locator("#flash")).to_contain_text("Approved “Publish the page?”")
    assert office.api("GET", f"/api/v1/approvals/{first['id']}")["status"] == "approved"
    assert office.api("GET", f"/api/v1/approvals/{second['id']}")["status"] == "pending"


def test_fire_a_routine_and_open_its_run(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    sign_in(page, office)
    page.goto("/routines")
    expect(page.locator(".routine-row")).to_have_count(3)
    screenshot(page, "routines")
    page.locator(".routine-row", has_text="Deploy hook").locator(
        "button:has-text('Fire now')"
    ).click()
    expect(page.locator("#flash")).to_contain_text("Fired “Deploy hook”")
    link = page.locator("#routine-runs a.linked-run").first
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("#merged-sources")).to_contain_text("routine")
    expect(page.locator("h1")).to_contain_text("Run #")


def test_routine_editor_previews_dst_and_rejects_bad_cron(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    sign_in(page, office)
    page.goto("/routines/new")
    page.fill("input[name=name]", "Early report")
    page.fill("input[name=timezone]", "America/New_York")
    page.fill("input[name=cron_expression]", "30 2 * * *")
    expect(page.locator("#cron-preview .dst-skipped").first).to_contain_text("does not exist")
    expect(page.locator("#cron-preview tr")).to_have_count(6)
    screenshot(page, "routine-editor")
    page.fill("input[name=cron_expression]", "0 0 30 2 *")
    expect(page.locator("#cron-preview .error-message")).to_be_visible()
    page.click("button:has-text('Save')")
    expect(page.locator(".error-message").first).to_contain_text("cron_expression")
    routines = office.api("GET", f"/api/v1/workspaces/{office.workspace_id}/routines")
    assert "Early report" not in [r["name"] for r in routines["items"]]


def test_run_detail_shows_merged_sources_and_skip_reason(
    page: Page, office: LiveOffice, screenshot: Screenshot
) -> None:
    writer = office.agents["writer"]
    tasks = f"/api/v1/workspaces/{office.workspace_id}/tasks"
    # The writer is paused, so its run waits while a comment merges into it and the task is
    # cancelled; on resume the pipeline skips the run because the task is finished.
    office.api("POST", f"/api/v1/agents/{writer}/pause")
    held = office.api(
        "POST",
        tasks,
        json={
            "title": "Use the font",
            "project_id": _project_id(office),
            "assignee_agent_id": writer,
        },
    )
    office.api("POST", f"/api/v1/tasks/{held['id']}/comments", json={"body": "Any serif."})
    office.api("PATCH", f"/api/v1/tasks/{held['id']}", json={"state": "CANCELLED"})
    office.api("POST", f"/api/v1/agents/{writer}/resume")

    def ended_run() -> dict[str, Any] | None:
        found = office.api("GET", "/api/v1/runs", params={"task_id": held["id"]})["items"]
        done = [run for run in found if run["status"] in ("finished", "cancelled")]
        return done[0] if done else None

    run = _wait_for(ended_run)
    assert (run["status"], run["reason"]) == ("cancelled", "task_terminal")
    sign_in(page, office)
    page.goto(f"/runs/{run['id']}")
    sources = page.locator("#merged-sources")
    expect(sources).to_contain_text("task_assigned")
    expect(sources).to_contain_text("comment")
    expect(page.locator("#run-reason")).to_have_text("task_terminal")
    expect(page.locator("#run-events")).to_contain_text("task_terminal")
    screenshot(page, "run")
