"""The summary store: one row per (agent, scope), activity counts, blockers, delta reads."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.models import Task
from office_scheduler.domain.status import (
    ErrorFamily,
    InboxKind,
    OutcomeStatus,
    RunStatus,
    TaskState,
    WakeSource,
)
from office_scheduler.store.schema import approvals


async def _task(office: Office, title: str, **fields: object) -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        **fields,  # type: ignore[arg-type]
    )


async def test_upsert_keeps_one_current_row(office: Office) -> None:
    store = office.store.summaries
    now = office.clock.now()
    agent_id = office.coordinator.id
    assert store.get_summary(agent_id, "agent") is None
    store.upsert_summary(
        agent_id=agent_id, scope="agent", content="one", content_tokens=1, run_id=1, now=now
    )
    later = now + timedelta(minutes=5)
    stored = store.upsert_summary(
        agent_id=agent_id, scope="agent", content="two", content_tokens=1, run_id=2, now=later
    )
    assert (stored.content, stored.updated_by_run_id, stored.updated_at) == ("two", 2, later)
    assert store.get_summary(agent_id, "agent") == stored
    other = store.upsert_summary(
        agent_id=agent_id, scope="routine:r1", content="r", content_tokens=1, run_id=3, now=now
    )
    assert store.get_summary(agent_id, "routine:r1") == other
    assert store.get_summary(office.worker.id, "agent") is None
    with office.store.db.read() as conn:
        count = conn.execute(sa.text("SELECT COUNT(*) FROM continuation_summaries")).scalar()
    assert count == 2


async def test_upsert_rejects_oversized_content_and_bad_scopes(office: Office) -> None:
    store = office.store.summaries
    now = office.clock.now()
    with pytest.raises(InvalidInputError) as too_big:
        store.upsert_summary(
            agent_id=office.worker.id,
            scope="agent",
            content="é" * 4097,
            content_tokens=0,
            run_id=None,
            now=now,
        )
    assert too_big.value.field == "content"
    with pytest.raises(InvalidInputError) as blank:
        store.upsert_summary(
            agent_id=office.worker.id, scope=" ", content="", content_tokens=0, run_id=None, now=now
        )
    assert blank.value.field == "scope"


async def test_activity_stats_count_the_window(office: Office) -> None:
    svc, runlog = office.service, office.store.runlog
    start = office.clock.now()
    office.clock.advance(timedelta(seconds=1))
    office.executor._outcomes.append(
        Outcome(status=OutcomeStatus.FAILED, error_family=ErrorFamily.CONFIG, message="bad cmd")
    )
    await svc.wake(office.other_worker.id, source=WakeSource.USER)
    await svc.run_until_idle()
    assert office.store.listing.list_runs(agent_id=office.other_worker.id).items[0].status is (
        RunStatus.FAILED
    )
    done = await _task(office, "done one")
    await svc.office.update_task(done.id, {"state": TaskState.DONE})
    cancelled = await _task(office, "dropped")
    await svc.office.update_task(cancelled.id, {"state": TaskState.CANCELLED})
    await _task(office, "open one")
    now = office.clock.now()
    for kind in (
        InboxKind.AGENT_ERROR,
        InboxKind.BUDGET_ALERT,
        InboxKind.BUDGET_EXCEEDED,
        InboxKind.EXECUTOR_MISSING,
    ):
        runlog.add_inbox_item(workspace_id=office.workspace.id, kind=kind, title="x", now=now)
    stats = office.store.summaries.activity_stats(office.workspace.id, since=start, until=now)
    # The failed run opened an agent.error item of its own, so two escalations are counted.
    assert (
        stats.completed_tasks,
        stats.failed_runs,
        stats.agent_error_escalations,
        stats.budget_signals,
        stats.open_tasks,
    ) == (1, 1, 2, 2, 1)
    empty = office.store.summaries.activity_stats(office.workspace.id, since=now, until=now)
    assert (empty.completed_tasks, empty.failed_runs, empty.budget_signals) == (0, 0, 0)
    assert empty.open_tasks == 1


async def test_active_blockers_of_the_agents_one_manages(office: Office) -> None:
    store = office.store
    store.office.update_agent(
        office.other_worker.id, now=office.clock.now(), reports_to=office.worker.id
    )
    open_blocker = await _task(office, "Write the spec")
    done_blocker = await _task(office, "Old spec", state=TaskState.DONE)
    waiting = await _task(
        office, "Deploy", assignee_agent_id=office.worker.id, blocked_by=[open_blocker.id]
    )
    await _task(
        office, "Unblocked", assignee_agent_id=office.worker.id, blocked_by=[done_blocker.id]
    )
    bobs = await _task(office, "Bob is stuck", assignee_agent_id=office.other_worker.id)
    await office.service.office.update_task(bobs.id, {"state": TaskState.BLOCKED})
    finished = await _task(
        office, "Finished anyway", assignee_agent_id=office.worker.id, blocked_by=[open_blocker.id]
    )
    await office.service.office.update_task(finished.id, {"state": TaskState.DONE})

    def titles(agent_id: str) -> list[str]:
        return [b.title for b in store.summaries.active_blockers(agent_id)]

    # The coordinator manages agents that report to nobody (ann), not bob (reports to ann).
    assert titles(office.coordinator.id) == ["Deploy"]
    assert sorted(titles(office.worker.id)) == ["Bob is stuck", "Deploy"]
    assert titles(office.other_worker.id) == ["Bob is stuck"]
    [deploy] = [b for b in store.summaries.active_blockers(office.worker.id) if b.title == "Deploy"]
    assert deploy.task_id == waiting.id
    assert deploy.waiting_on == ("Write the spec",)
    assert deploy.assignee_agent_id == office.worker.id
    assert store.summaries.active_blockers("no-such-agent") == []


async def test_prompt_snapshot_and_decided_approvals(office: Office) -> None:
    task = await _task(office, "Write the page", assignee_agent_id=office.worker.id)
    office.clock.advance(timedelta(seconds=5))
    await office.service.run_until_idle()
    [run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    snapshot = office.store.summaries.prompt_snapshot(run.id)
    assert snapshot is not None
    assert snapshot["state"] == "TODO"
    assert office.store.summaries.prompt_snapshot(run.id + 999) is None

    t0 = office.clock.now()
    with office.store.db.write() as conn:
        for ident, resolved in (
            ("ap-old", t0 - timedelta(hours=1)),
            ("ap-new", t0),
            ("ap-p", None),
        ):
            conn.execute(
                sa.insert(approvals).values(
                    id=ident,
                    workspace_id=office.workspace.id,
                    task_id=task.id,
                    status="pending" if resolved is None else "approved",
                    title=f"approval {ident}",
                    decision_note="fine" if resolved else None,
                    created_at=t0 - timedelta(hours=2),
                    resolved_at=resolved,
                )
            )
    decided = office.store.summaries.decided_approvals(task.id, since=t0 - timedelta(minutes=1))
    assert [(d.approval_id, d.status, d.decision_note) for d in decided] == [
        ("ap-new", "approved", "fine")
    ]
