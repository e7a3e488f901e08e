"""A hot agent stays cheap: merging costs O(1), the prompt stays bounded, nothing is lost.

Thousands of wakes merge into one queued run (a burst from an integration while the agent
is busy or paused). Each merge writes its own request row and a counter; the prompt shows
the newest wakes and every decision-carrying one in full and summarises the rest per
source; every merged wake is still listed by the store, ``office wakeups list --run N``
and the run page, a page at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from cli_harness import CLEAN_ENV, serving_in_thread
from helpers import Office, dashboard_session
from office_scheduler.api import create_app
from office_scheduler.cli import office as office_cli
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import IntakeOutcome, RunReason, RunStatus, WakeSource

WAKES = 3000
#: Decision-carrying wakes sent early in the burst (never among the newest), by position.
DECISIONS: dict[int, tuple[WakeSource, dict[str, Any]]] = {
    10: (
        WakeSource.APPROVAL_RESOLVED,
        {"approval_id": "ap-1", "status": "rejected", "decision_note": "DECISION-APPROVAL"},
    ),
    500: (WakeSource.AGENT_ERROR, {"failed_agent_id": "ag-x", "error": "DECISION-ERROR"}),
    1000: (WakeSource.BUDGET_ALERT, {"agent_instance_id": "ag-x", "budget_pct": 93}),
    1500: (
        WakeSource.ROUTINE,
        {"routine_id": "rt-1", "missed_ticks": {"count": 7, "since": "DECISION-MISSED"}},
    ),
    2000: (WakeSource.USER, {"rejection": {"reason": "DECISION-REJECTION"}}),
}


def _wake(office: Office, index: int) -> WakeRequest:
    source, payload = DECISIONS.get(
        index, (WakeSource.USER, {"user_id": "u1", "reason": f"user wake {index:05d}"})
    )
    return WakeRequest(
        workspace_id=office.workspace.id,
        agent_id=office.worker.id,
        source=source,
        payload=payload,
        hold=False,
    )


async def _burst(office: Office, wakes: int = WAKES) -> int:
    """``wakes`` wakes for the worker, 50 per batch; returns the one run they all joined."""
    run_ids: set[int] = set()
    for start in range(0, wakes, 50):
        batch = [_wake(office, i) for i in range(start, min(start + 50, wakes))]
        results = await office.service.intake.enqueue_many(batch)
        run_ids |= {result.run.id for result in results if result.run is not None}
    assert len(run_ids) == 1
    return run_ids.pop()


def _listed_ids(office: Office, run_id: int) -> list[int]:
    ids: list[int] = []
    cursor = None
    while True:
        page = office.store.listing.list_wakeups(run_id=run_id, limit=500, cursor=cursor)
        ids += [request.id for request in page.items]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


# 3,000 wakes, then 30 pages of CLI listing and 60 run pages: about 30 s alone.
@pytest.mark.timeout(300)
async def test_three_thousand_merged_wakes_give_a_bounded_prompt_and_lose_nothing(
    office: Office, tmp_path: Path
) -> None:
    run_id = await _burst(office)
    run = office.store.queue.get_run(run_id)
    assert (run.status, run.coalesced_count, run.context_version) == (RunStatus.QUEUED, 3000, 3000)
    listed = _listed_ids(office, run_id)
    assert len(listed) == len(set(listed)) == WAKES

    await office.service.run_until_idle()
    [launch] = office.executor.launches
    prompt = launch.prompt
    assert len(prompt.encode("utf-8")) < 24_000
    users = WAKES - len(DECISIONS) + 1  # the rejection rides on a user wake
    assert (
        "3,000 wakes were merged into this run; by source: user "
        f"{users:,}, approval_resolved 1, agent_error 1, budget_alert 1, routine 1." in prompt
    )
    assert "(3000 wake(s) merged into run" in prompt
    assert f"user wake {WAKES - 1:05d}" in prompt  # the newest wake, quoted
    for marker in ("DECISION-APPROVAL", "DECISION-ERROR", "DECISION-MISSED", "DECISION-REJECTION"):
        assert marker in prompt
    assert "has used 93% of its budget" in prompt
    assert "user wake 00001" not in prompt  # an old plain wake is summarised, not quoted
    assert f"office wakeups list --run {run_id}" in prompt
    line = next(line for line in prompt.splitlines() if line.startswith("- user: "))
    assert re.match(
        r"- user: [\d,]+ more not shown \(2,996 in all, first at .+, last at .+\)", line
    )

    secret, _ = office.service.tokens.mint_admin(name="cli", now=office.clock.now())
    with serving_in_thread(create_app(office.service)) as url:
        env: dict[str, str | None] = dict(CLEAN_ENV) | {
            "OFFICE_HOME": str(tmp_path / "cli"),
            "OFFICE_TOKEN": secret,
        }
        result = CliRunner().invoke(
            office_cli,
            ["--api-url", url, "--json", "wakeups", "list", "--run", str(run_id)],
            env=env,
        )
        shown = CliRunner().invoke(
            office_cli, ["--api-url", url, "runs", "show", str(run_id), "--wakes", "5"], env=env
        )
        on_page = _run_page_ids(url, run_id, dashboard_session(office.service, secret))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert sorted(item["id"] for item in json.loads(result.stdout)) == sorted(listed)
    assert shown.exit_code == 0, (shown.stdout, shown.stderr)
    assert "Merged wakes (5 shown of 3000)" in shown.stdout
    assert f"office wakeups list --run {run_id}" in shown.stdout
    assert sorted(on_page) == sorted(listed)


def _run_page_ids(url: str, run_id: int, session_id: str) -> list[int]:
    """Every merged wake on the run page, following its "older" links page by page."""
    ids: list[int] = []
    params: dict[str, str] = {}
    while True:
        page = httpx.get(
            f"{url}/runs/{run_id}",
            params=params,
            cookies={"office_session": session_id},
            timeout=30,
        )
        assert page.status_code == 200, page.text
        rows = re.findall(r'<tr class="merged-wake"><td>#(\d+)</td>', page.text)
        assert 0 < len(rows) <= 50
        ids += [int(row) for row in rows]
        found = re.search(r'class="next-page" href="\?[^"]*cursor=([^"&]+)"', page.text)
        if found is None:
            return ids
        params = {"cursor": httpx.QueryParams(f"c={found.group(1)}")["c"]}


async def test_a_merge_writes_the_same_statements_however_many_wakes_the_run_has(
    office: Office,
) -> None:
    """Regression: each merge rewrote the run's whole context (O(N) per wake)."""
    database = office.store.db
    recorded: list[tuple[str, int]] = []

    def record(_c: object, _cur: object, statement: str, params: Any, *_rest: object) -> None:
        recorded.append((" ".join(statement.split())[:60], len(repr(params))))

    async def one_merge(index: int) -> list[tuple[str, int]]:
        recorded.clear()
        sa.event.listen(database.writer, "before_cursor_execute", record)
        try:
            result = await office.service.intake.enqueue(_wake(office, index))
        finally:
            sa.event.remove(database.writer, "before_cursor_execute", record)
        assert result.outcome is IntakeOutcome.COALESCED
        return list(recorded)

    await _burst(office, 2)
    small = await one_merge(20_000)
    await _burst(office, 500)
    large = await one_merge(30_000)
    assert [statement for statement, _ in large] == [statement for statement, _ in small]
    assert _largest(large) <= _largest(small) + 20  # no parameter grows with the run


def _largest(recorded: Sequence[tuple[str, int]]) -> int:
    return max(size for _, size in recorded)


async def test_the_wake_budget_follows_the_workspace_settings(office: Office) -> None:
    settings = replace(office.workspace.settings, prompt_max_wakes=3, prompt_max_wake_bytes=4000)
    office.store.office.update_workspace(
        office.workspace.id, now=office.clock.now(), settings=settings
    )
    run_id = await _burst(office, 40)
    await office.service.run_until_idle()
    [launch] = office.executor.launches
    section = launch.prompt.split("## Why you were woken", 1)[1].split("\n## ", 1)[0]
    assert "Shown in full: 3 of them" in section  # the newest, the approval, and one more
    assert "DECISION-APPROVAL" in section
    assert "user wake 00039" in section
    assert "user wake 00038" in section
    assert "user wake 00037" not in section
    assert "- user: 37 more not shown (39 in all" in section
    assert f"read them all with `office wakeups list --run {run_id}`." in section


async def test_a_merge_after_load_moves_to_the_next_run_with_only_the_later_wakes(
    office: Office,
) -> None:
    """The hand-over of a run that ends unlaunched moves the wakes merged after the
    version its pipeline read, by their order in the run (rows, not a document)."""
    run_id = await _burst(office, 30)
    queue = office.store.queue
    [claimed] = queue.claim(
        now=office.clock.now(), node_id="n1", lease=timedelta(minutes=5), limit=1
    )
    assert claimed.id == run_id
    for index in range(30, 35):  # merged into the claimed run after its pipeline read 30
        await office.service.intake.enqueue(_wake(office, index))
    ended = queue.finish_run(
        run_id,
        status=RunStatus.FINISHED,
        reason=RunReason.BLOCKED,
        now=office.clock.now(),
        seen_version=30,
    )
    assert ended is not None
    assert ended.context_version == 35
    assert queue.run_wakes(run_id, newest=100).total == 30
    [handed] = [
        r for r in office.store.listing.list_runs(agent_id=office.worker.id).items if r.id != run_id
    ]
    moved = queue.run_wakes(handed.id, newest=100)
    assert (handed.coalesced_count, handed.context_version, moved.total) == (5, 5, 5)
    assert [e.payload["reason"] for e in moved.entries] == [
        f"user wake {i:05d}" for i in range(30, 35)
    ]
