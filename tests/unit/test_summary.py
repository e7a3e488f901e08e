"""The continuation summary builder: golden files, determinism, caps, fallbacks, next action.

Regenerate the golden files after an intended change with ``UPDATE_GOLDEN=1 pytest
tests/unit/test_summary.py`` and review the diff.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.domain.status import WakeSource
from office_scheduler.domain.summaries import ActiveBlocker, ActivityStats
from office_scheduler.prompts import summary_slice
from office_scheduler.summary import (
    DEFAULT_NEXT_ACTION,
    MAX_SUMMARY_BYTES,
    SECTIONS,
    SummaryInput,
    build_summary,
    infer_next_action,
    previous_decisions,
    result_text,
    summary_scope,
)
from prompt_samples import T0, at, wake

GOLDEN = Path(__file__).parent / "golden"

QUIET = ActivityStats(since=T0 - timedelta(hours=24), until=T0, open_tasks=3)
BUSY = ActivityStats(
    since=at(-5),
    until=at(0),
    completed_tasks=2,
    failed_runs=1,
    agent_error_escalations=0,
    budget_signals=0,
    open_tasks=4,
)
STUCK = ActiveBlocker(
    task_id="tk7",
    title="Deploy the site",
    state="TODO",
    assignee_agent_id="ag-bob",
    waiting_on=("Write the spec", "Buy the domain"),
    since=at(-90),
)
BARE_BLOCKED = ActiveBlocker(
    task_id="tk8",
    title="Fix the footer",
    state="BLOCKED",
    assignee_agent_id=None,
    waiting_on=(),
    since=at(-30),
)


def _input(**fields: Any) -> SummaryInput:
    values: dict[str, Any] = {
        "agent_name": "boss",
        "scope": "routine:rt1",
        "scope_label": "routine Coordinator heartbeat",
        "run_id": 11,
        "finished_at": at(0),
        "result": {"status": "ok", "summary": "Assigned the landing page to ann."},
        "stats": BUSY,
        "blockers": [STUCK, BARE_BLOCKED],
        "previous": "",
        "agent_names": {"ag-bob": "bob"},
    }
    values.update(fields)
    return SummaryInput(**values)


def _golden(name: str, content: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_bytes(content.encode("utf-8"))
    assert content.encode("utf-8") == path.read_bytes()


def test_first_summary_matches_golden() -> None:
    built = build_summary(_input())
    _golden("summary_first.md", built.content)
    assert built.content_tokens == (len(built.content.encode()) + 3) // 4


def test_continued_summary_matches_golden_and_keeps_five_decisions() -> None:
    previous = (GOLDEN / "summary_previous.md").read_text(encoding="utf-8")
    assert len(previous_decisions(previous)) == 5
    built = build_summary(
        _input(
            run_id=12,
            finished_at=at(5),
            previous=previous,
            result={"result": "Reviewed the spec; asked bob for the domain."},
            blockers=[STUCK],
            stats=replace(BUSY, failed_runs=0, completed_tasks=0),
        )
    )
    _golden("summary_continued.md", built.content)
    decisions = previous_decisions(built.content)
    assert len(decisions) == 5
    assert decisions[0] == ("2026-11-29 12:05Z", 12, "Reviewed the spec; asked bob for the domain.")
    # The oldest of the previous five fell off; the newest four follow the new one.
    assert [d[1] for d in decisions[1:]] == [r for _, r, _ in previous_decisions(previous)[:4]]


def test_same_inputs_give_the_same_bytes_and_rebuilding_is_idempotent() -> None:
    data = _input()
    first = build_summary(data)
    assert build_summary(data) == first
    assert build_summary(replace(data, blockers=list(data.blockers))).content == first.content
    # Re-applying the same run over its own output does not repeat its decision.
    again = build_summary(replace(data, previous=first.content))
    assert again.content == first.content


def test_exactly_four_sections_in_order() -> None:
    content = build_summary(_input(result=None, blockers=[])).content
    headings = [line for line in content.splitlines() if line.startswith("## ")]
    assert headings == list(SECTIONS)
    assert "## Open blockers\n- None.\n" in content
    assert "## Recent decisions\n- None yet.\n" in content


def test_eight_kb_cap_cuts_whole_bullets_and_never_splits_utf8() -> None:
    many = [
        replace(STUCK, task_id=f"tk{n:03}", title="Déploiement 🚀 " * 20, waiting_on=("é" * 300,))
        for n in range(40)
    ]
    long_text = "Résumé ✓ " * 400
    previous = "## Recent decisions\n" + "".join(
        f"- 2026-11-2{n} 10:00Z (run {n}): {'décision ' * 80}\n" for n in range(1, 6)
    )
    built = build_summary(_input(blockers=many, result={"summary": long_text}, previous=previous))
    raw = built.content.encode("utf-8")
    assert len(raw) <= MAX_SUMMARY_BYTES
    raw.decode("utf-8")  # whole characters only
    bullets = [line for line in built.content.splitlines() if line.startswith("- ")]
    for bullet in bullets:
        assert bullet.startswith(("- Déploiement", "- 2026-11-2", "- … and"))
    assert "- … and " in built.content
    assert built.content.endswith("\n")
    headings = [line for line in built.content.splitlines() if line.startswith("## ")]
    assert headings == list(SECTIONS)


def test_slice_of_a_capped_summary_is_at_most_1500_characters() -> None:
    many = [replace(STUCK, task_id=f"tk{n:03}") for n in range(40)]
    content = build_summary(_input(blockers=many)).content
    assert len(content) > 1500
    sliced = summary_slice(content)
    assert len(sliced) <= 1500
    assert sliced.startswith("## Active focus\n")
    assert content.startswith(sliced.removesuffix("\n…(summary continues)"))


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"summary": "S", "result": "R", "message": "M", "error": "E"}, "S"),
        ({"summary": "", "result": "R", "message": "M"}, "R"),
        ({"summary": None, "result": None, "message": "M", "error": "E"}, "M"),
        ({"error": "E"}, "E"),
        ({"result": {"files": 2, "ok": True}}, '{"files": 2, "ok": true}'),
        ({"summary": "  many\n\nlines\there  "}, "many lines here"),
        ({"status": "ok"}, None),
        (None, None),
        ({}, None),
    ],
)
def test_result_fallback_chain(result: dict[str, Any] | None, expected: str | None) -> None:
    assert result_text(result) == expected


@pytest.mark.parametrize(
    ("stats", "blockers", "result", "starts"),
    [
        (BUSY, [STUCK], {"status": "error", "summary": "x"}, "Investigate the error"),
        (QUIET, [], {"error": "crashed"}, "Investigate the error"),
        (QUIET, [], {"status": "blocked"}, "Resolve what blocked"),
        (replace(QUIET, agent_error_escalations=2), [STUCK], None, "Review the 2 escalated"),
        (replace(QUIET, budget_signals=1), [STUCK], None, "Check budget usage"),
        (QUIET, [STUCK], None, "Unblock task Deploy the site (waiting on Write the spec)."),
        (QUIET, [BARE_BLOCKED], None, "Unblock task Fix the footer."),
        (replace(QUIET, failed_runs=1), [], None, "Look into the 1 failed run since"),
        (replace(QUIET, open_tasks=0, completed_tasks=3), [], None, "Plan the next piece"),
        (replace(QUIET, open_tasks=0), [], None, DEFAULT_NEXT_ACTION),
        (QUIET, [], {"status": "ok", "summary": "fine"}, DEFAULT_NEXT_ACTION),
    ],
)
def test_next_action_decision_table(
    stats: ActivityStats,
    blockers: list[ActiveBlocker],
    result: dict[str, Any] | None,
    starts: str,
) -> None:
    action = infer_next_action(stats, blockers, result)
    assert action.startswith(starts)
    assert action.endswith(".")


def test_a_run_without_result_text_keeps_the_previous_decisions() -> None:
    previous = (GOLDEN / "summary_previous.md").read_text(encoding="utf-8")
    built = build_summary(_input(result=None, previous=previous))
    assert previous_decisions(built.content) == previous_decisions(previous)
    assert "Last run 11 (2026-11-29 12:00Z) succeeded." in built.content


def test_summary_scope_from_the_merged_wakes() -> None:
    routine = wake(WakeSource.ROUTINE, {"routine_id": "rt9", "variables": {}}, 2)
    error = wake(WakeSource.AGENT_ERROR, {"failed_agent_id": "x"}, 1)
    assert summary_scope([error, routine]) == "routine:rt9"
    assert summary_scope([error]) == "agent"
    assert summary_scope([]) == "agent"
    assert summary_scope([wake(WakeSource.ROUTINE, {"routine_id": 5})]) == "agent"
