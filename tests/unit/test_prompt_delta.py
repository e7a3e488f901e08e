"""The resume delta and the full-or-delta decision."""

from __future__ import annotations

from dataclasses import replace

import pytest

from office_scheduler.domain.models import RunWakes
from office_scheduler.domain.status import TaskState, WakeSource
from office_scheduler.domain.summaries import ApprovalDecision
from office_scheduler.prompts import (
    DeltaInput,
    PromptKind,
    TaskSnapshot,
    build_delta_prompt,
    choose_prompt_kind,
    executor_can_resume,
)
from office_scheduler.prompts.delta import new_comments
from prompt_samples import agent, at, comment, executor, session, task, wake

SPEC = task("tk0", title="Write the spec", state=TaskState.DONE, assignee_agent_id="ag-bob")
DESIGN = task("tk5", title="Design review", state=TaskState.TODO, assignee_agent_id="ag-bob")
OLD_COMMENTS = [comment("c1", "first remark", 1), comment("c2", "second remark", 2)]


def _previous() -> TaskSnapshot:
    return TaskSnapshot(
        state="TODO",
        blockers={"tk0": "IN_PROGRESS"},
        children={"tk2": "TODO"},
        comments_until=at(2),
        comment_ids_at_until=("c2",),
    )


def _delta(**fields: object) -> DeltaInput:
    values: dict[str, object] = {
        "agent": agent(instructions="SECRET STANDING INSTRUCTIONS"),
        "task": task(state=TaskState.IN_PROGRESS, description="LONG TASK DESCRIPTION"),
        "wakes": RunWakes.of(
            9, [wake(WakeSource.COMMENT, {"task_id": "tk1", "comment_id": "c3"}, 9)]
        ),
        "run_id": 9,
        "prior_run_id": 7,
        "since": at(2),
        "previous": _previous(),
        "comments": [
            *OLD_COMMENTS,
            comment("c3", "please add a footer", 10),
            comment("c4", "my own progress note", 11, by="ag-ann"),
        ],
        "blockers": [SPEC, DESIGN],
        "children": [
            task("tk2", title="Pricing table", state=TaskState.DONE, parent_id="tk1"),
            task("tk3", title="Hero image", state=TaskState.TODO, parent_id="tk1"),
        ],
        "decisions": [
            ApprovalDecision(
                approval_id="ap1",
                title="Ship the spec",
                status="approved",
                decision_note="Looks good",
                decided_by="user:alice",
                resolved_at=at(8),
            )
        ],
        "agent_names": {"ag-ann": "ann", "ag-bob": "bob"},
    }
    values.update(fields)
    return DeltaInput(**values)  # type: ignore[arg-type]


def test_delta_lists_only_what_is_new() -> None:
    text = build_delta_prompt(_delta())
    assert text.startswith("# Resumed session: what is new since run 7\n")
    for part in (
        "## Why you were woken (1 wake(s) merged into run 9)",
        "1. **comment**",
        "   Comment c3 is quoted with the comments below.",
        "## Task changes\n- State changed: TODO → IN_PROGRESS",
        "- Blocker resolved: [DONE] Write the spec (id tk0, assignee bob)",
        "- New blocker: [TODO] Design review (id tk5, assignee bob)",
        "- Subtask TODO → [DONE] Pricing table (id tk2, assignee ann)",
        "- New subtask: [TODO] Hero image (id tk3, assignee ann)",
        "## Decisions\n- 2026-11-29T12:08:00+00:00: approval ap1 (Ship the spec) was approved "
        "by user:alice.",
        "  ```text\n  Looks good\n  ```",
        "## New comments (1 of 1 new, oldest first)",
        "  ```text\n  please add a footer\n  ```",
    ):
        assert part in text, part
    assert text.count("please add a footer") == 1


def test_delta_leaves_out_instructions_context_and_seen_items() -> None:
    text = build_delta_prompt(_delta())
    for absent in (
        "SECRET STANDING INSTRUCTIONS",
        "LONG TASK DESCRIPTION",
        "## Your instructions",
        "## Workspace",
        "## Project",
        "## How to act",
        "first remark",
        "second remark",
        "my own progress note",
    ):
        assert absent not in text, absent


def test_unchanged_task_says_so_and_a_removed_blocker_is_named() -> None:
    data = _delta(
        task=task(state=TaskState.TODO),
        blockers=[],
        children=[task("tk2", title="Pricing table", state=TaskState.TODO, parent_id="tk1")],
        decisions=[],
        comments=OLD_COMMENTS,
    )
    text = build_delta_prompt(data)
    assert "- State: TODO (unchanged)" in text
    assert "- Blocker removed: task tk0" in text
    assert "Subtask" not in text
    assert "## Decisions" not in text
    assert "## New comments" not in text


def test_without_a_snapshot_comments_after_the_prior_start_are_new() -> None:
    data = _delta(previous=None, since=at(1))
    fresh = [c.id for c in new_comments(data)]
    assert fresh == ["c2", "c3"]
    text = build_delta_prompt(data)
    assert "- State: IN_PROGRESS\n" in text
    assert "- Blocker resolved: [DONE] Write the spec" in text
    assert "New blocker" not in text
    assert "- Subtask finished: [DONE] Pricing table" in text


def test_snapshot_tells_comments_at_the_same_instant_apart() -> None:
    same_instant = comment("c2b", "arrived in the same millisecond", 2)
    data = _delta(comments=[*OLD_COMMENTS, same_instant])
    assert [c.id for c in new_comments(data)] == ["c2b"]


def test_snapshot_round_trips_through_json() -> None:
    snap = TaskSnapshot.of(
        task(state=TaskState.BLOCKED), [SPEC], [task("tk2", parent_id="tk1")], OLD_COMMENTS
    )
    assert snap.comments_until == at(2)
    assert snap.comment_ids_at_until == ("c2",)
    assert TaskSnapshot.from_json(snap.to_json()) == snap
    assert TaskSnapshot.from_json({"nope": 1}) is None
    assert TaskSnapshot.from_json({"state": "TODO", "comments_until": "garbage"}) is None


def test_delta_is_deterministic() -> None:
    assert build_delta_prompt(_delta()) == build_delta_prompt(_delta())


ACP = executor()
CLAUDE_PRESET = executor(kind="command", argv=(), preset="claude")
PLAIN_COMMAND = executor(kind="command", argv=("my-agent", "{prompt_file}"))
CODEX_PRESET = executor(kind="command", argv=(), preset="codex")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (ACP, True),
        (CLAUDE_PRESET, True),
        (replace(CLAUDE_PRESET, preset="unknown"), False),
        (replace(CLAUDE_PRESET, argv=("claude", "-p")), False),
        (PLAIN_COMMAND, False),
        (CODEX_PRESET, True),
        (executor(kind="other"), False),
        (None, False),
    ],
)
def test_executor_can_resume(config: object, expected: bool) -> None:
    assert executor_can_resume(config) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("task_id", "prior", "config", "expected"),
    [
        ("tk1", session(), ACP, PromptKind.DELTA),
        ("tk1", session(), CODEX_PRESET, PromptKind.DELTA),
        (None, session(), ACP, PromptKind.FULL),  # taskless runs never resume
        ("tk1", None, ACP, PromptKind.FULL),  # nothing to resume
        ("tk1", session(external_session_id=None), ACP, PromptKind.FULL),
        ("tk1", session(task_id="tk9"), ACP, PromptKind.FULL),
        ("tk1", session(executor="codex"), ACP, PromptKind.FULL),  # executor changed
        ("tk1", session(), PLAIN_COMMAND, PromptKind.FULL),  # cannot resume
        ("tk1", session(), None, PromptKind.FULL),  # no executor resolves
    ],
)
def test_choose_prompt_kind(
    task_id: str | None, prior: object, config: object, expected: PromptKind
) -> None:
    kind = choose_prompt_kind(task_id=task_id, prior=prior, config=config)  # type: ignore[arg-type]
    assert kind is expected
