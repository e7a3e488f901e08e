"""Inbox and activity log on both databases: filters, paging, resolve/dismiss, and the
activity written for every skip, cancel and coalesce."""

from __future__ import annotations

from datetime import timedelta

import pytest

from helpers import Office
from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import ActivityEntry, Task, WakeRequest
from office_scheduler.domain.status import (
    AgentStatus,
    InboxKind,
    InboxStatus,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
)
from office_scheduler.store.activity import ActivityFilter

HOLD = timedelta(seconds=5)


async def _assigned_task(office: Office, title: str = "Write the page") -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )


def _activity(office: Office, **filters: object) -> list[ActivityEntry]:
    where = ActivityFilter(**filters)  # type: ignore[arg-type]
    return office.store.runlog.list_activity(office.workspace.id, where=where, limit=500).items


def test_inbox_filters_pages_and_closes(office: Office) -> None:
    runlog, now, ws = office.store.runlog, office.clock.now(), office.workspace.id
    items = [
        runlog.add_inbox_item(
            workspace_id=ws,
            kind=InboxKind.AGENT_ERROR if i % 2 else InboxKind.TASK_REVIEW,
            title=f"item {i}",
            now=now + timedelta(seconds=i),
            agent_id=office.worker.id,
        )
        for i in range(5)
    ]
    newest_first = [item.id for item in reversed(items)]

    first = runlog.inbox_page(ws, limit=2)
    second = runlog.inbox_page(ws, limit=2, cursor=first.next_cursor)
    third = runlog.inbox_page(ws, limit=2, cursor=second.next_cursor)
    assert [i.id for i in first.items + second.items + third.items] == newest_first
    assert third.next_cursor is None
    errors = runlog.inbox_page(ws, kind=InboxKind.AGENT_ERROR).items
    assert [i.title for i in errors] == ["item 3", "item 1"]

    later = now + timedelta(minutes=5)
    resolved = runlog.resolve_inbox_item(items[0].id, now=later)
    assert (resolved.status, resolved.resolved_at) == (InboxStatus.RESOLVED, later)
    again = runlog.resolve_inbox_item(items[0].id, now=later + timedelta(minutes=1))
    assert again.resolved_at == later, "resolving twice keeps the first resolved_at"
    dismissed = runlog.dismiss_inbox_item(items[1].id, now=later)
    assert (dismissed.status, dismissed.resolved_at) == (InboxStatus.DISMISSED, later)
    assert runlog.dismiss_inbox_item(items[1].id, now=later + timedelta(hours=1)) == dismissed

    with pytest.raises(ConflictError) as caught:
        runlog.resolve_inbox_item(items[1].id, now=later)
    assert caught.value.field == "status"
    with pytest.raises(ConflictError):
        runlog.dismiss_inbox_item(items[0].id, now=later)
    assert runlog.get_inbox_item(items[1].id).status is InboxStatus.DISMISSED
    with pytest.raises(NotFoundError):
        runlog.dismiss_inbox_item(items[-1].id + 100, now=later)

    open_items = runlog.inbox_page(ws, status=InboxStatus.OPEN).items
    assert [i.id for i in open_items] == newest_first[:3]
    assert [i.id for i in runlog.list_inbox(ws, status=InboxStatus.DISMISSED)] == [items[1].id]


def test_activity_filters_by_actor_action_target_and_time(office: Office) -> None:
    runlog, now, ws = office.store.runlog, office.clock.now(), office.workspace.id
    worker, other = office.worker.id, office.other_worker.id
    rows = [
        ("task_moved", "user", worker, "t1", None, 0),
        ("comment_added", f"agent:{worker}", worker, "t1", None, 10),
        ("run_skipped", "system", other, "t2", 7, 20),
        ("run_skipped", "system", worker, "t1", 8, 30),
        ("approval_resolved", "user", None, None, None, 40),
    ]
    for kind, actor, agent, task, run, offset in rows:
        runlog.add_activity(
            workspace_id=ws,
            kind=kind,
            message=kind,
            now=now + timedelta(seconds=offset),
            actor=actor,
            agent_id=agent,
            task_id=task,
            run_id=run,
        )

    def kinds(**filters: object) -> list[str]:
        return [entry.kind for entry in _activity(office, **filters)]

    assert kinds(actor="user") == ["approval_resolved", "task_moved"]
    assert kinds(actor=f"agent:{worker}") == ["comment_added"]
    assert kinds(kind="run_skipped") == ["run_skipped", "run_skipped"]
    assert kinds(agent_id=other) == ["run_skipped"]
    assert kinds(task_id="t1") == ["run_skipped", "comment_added", "task_moved"]
    assert [e.run_id for e in _activity(office, run_id=8)] == [8]
    assert kinds(since=now + timedelta(seconds=10), until=now + timedelta(seconds=30)) == [
        "run_skipped",
        "comment_added",
    ]
    assert kinds(kind="run_skipped", agent_id=worker, actor="system") == ["run_skipped"]
    assert kinds(actor="nobody") == []

    page = runlog.list_activity(ws, where=ActivityFilter(actor="user"), limit=1)
    rest = runlog.list_activity(ws, where=ActivityFilter(actor="user"), cursor=page.next_cursor)
    assert [e.kind for e in page.items + rest.items] == ["approval_resolved", "task_moved"]
    assert rest.next_cursor is None

    with pytest.raises(InvalidInputError) as caught:
        _activity(office, since=now.replace(tzinfo=None))
    assert caught.value.field == "since"
    with pytest.raises(InvalidInputError):
        _activity(office, since=now, until=now - timedelta(seconds=1))


async def test_coalesced_wake_is_logged_in_the_intake_transaction(office: Office) -> None:
    task = await _assigned_task(office)
    comment = await office.service.office.add_comment(task.id, "also check the footer")

    [entry] = _activity(office, kind="wakeup_coalesced")
    [run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert (entry.actor, entry.agent_id, entry.task_id, entry.run_id) == (
        "system",
        office.worker.id,
        task.id,
        run.id,
    )
    assert entry.data["source"] == "comment"
    assert entry.data["coalesced_count"] == run.coalesced_count == 2
    wakeup = office.store.queue.get_wakeup(entry.data["wakeup_id"])
    assert wakeup.idempotency_key == f"comment:{comment.id}"


async def test_created_runs_are_not_logged_as_coalesced(office: Office) -> None:
    await _assigned_task(office)
    assert _activity(office, kind="wakeup_coalesced") == []


async def test_guard_skips_and_cancels_are_logged(office: Office) -> None:
    done = await _assigned_task(office, "finished before its run")
    await office.service.office.update_task(done.id, {"state": TaskState.DONE})
    blocker = await office.service.office.create_task(
        workspace_id=office.workspace.id, title="blocker", project_id=office.project.id
    )
    held = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="held",
        project_id=office.project.id,
        assignee_agent_id=office.other_worker.id,
        blocked_by=[blocker.id],
    )
    office.clock.advance(HOLD)
    await office.service.run_until_idle()

    [cancelled] = _activity(office, kind="run_cancelled")
    assert (cancelled.task_id, cancelled.actor) == (done.id, "system")
    assert cancelled.data["reason"] == RunReason.TASK_TERMINAL.value
    assert cancelled.data["status"] == RunStatus.CANCELLED.value
    [skipped] = _activity(office, kind="run_skipped")
    assert (skipped.task_id, skipped.agent_id) == (held.id, office.other_worker.id)
    assert skipped.data["reason"] == RunReason.BLOCKED.value
    assert skipped.data["wakeup_ids"], "the merged wakeups are named"
    assert office.executor.launches == []


async def test_completed_runs_add_no_skip_entries(office: Office) -> None:
    await _assigned_task(office)
    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    assert _activity(office, kind="run_skipped") == []
    assert _activity(office, kind="run_cancelled") == []


async def test_paused_agents_claimed_run_is_skipped_and_logged(office: Office) -> None:
    await _assigned_task(office)
    office.clock.advance(HOLD)
    [run] = office.store.queue.claim(
        now=office.clock.now(),
        node_id=office.service.settings.node_id,
        lease=timedelta(minutes=1),
        limit=1,
    )
    await office.service.agents.pause(office.worker.id, actor="user")
    await office.service.runs._process(run)

    ended = office.store.queue.get_run(run.id)
    assert (ended.status, ended.reason) == (RunStatus.FINISHED, RunReason.AGENT_PAUSED)
    assert office.executor.launches == []
    [skipped] = _activity(office, kind="run_skipped")
    assert skipped.run_id == run.id
    [paused] = _activity(office, kind="agent_paused")
    assert (paused.actor, paused.agent_id) == ("user", office.worker.id)


async def test_stop_cancels_queued_runs_and_resume_lets_new_work_run(office: Office) -> None:
    first = await _assigned_task(office, "one")
    await office.service.wake(office.worker.id, payload={"reason": "go"})
    agent = await office.service.agents.stop(office.worker.id, actor="user")
    assert agent.status is AgentStatus.STOPPED

    runs = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert {(r.status, r.reason) for r in runs} == {(RunStatus.CANCELLED, RunReason.AGENT_PAUSED)}
    assert len(runs) == 2
    cancelled = _activity(office, kind="run_cancelled")
    assert {e.run_id for e in cancelled} == {r.id for r in runs}
    [stopped] = _activity(office, kind="agent_stopped")
    assert sorted(stopped.data["cancelled"]) == sorted(r.id for r in runs)

    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    assert office.executor.launches == []

    resumed = await office.service.agents.resume(office.worker.id, actor="user")
    assert (resumed.status, resumed.paused_reason) == (AgentStatus.IDLE, None)
    await office.service.office.add_comment(first.id, "please continue")
    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    assert len(office.executor.launches) == 1
    assert [e.kind for e in _activity(office, agent_id=office.worker.id, actor="user")] == [
        "comment_added",
        "agent_resumed",
        "agent_stopped",
        "task_created",
    ]


async def test_paused_agents_queued_runs_wait_and_run_after_resume(office: Office) -> None:
    paused = await office.service.agents.pause(office.worker.id)
    assert (paused.status, paused.paused_reason) == (AgentStatus.PAUSED, "manual")
    await _assigned_task(office)
    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    assert office.executor.launches == []

    await office.service.agents.resume(office.worker.id)
    await office.service.run_until_idle()
    assert len(office.executor.launches) == 1


async def test_budget_paused_agent_resumes_only_when_no_policy_blocks(office: Office) -> None:
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), status="paused", paused_reason="budget_exceeded"
    )
    blocking: list[object] = ["policy-1"]

    async def check(agent_id: str) -> object | None:
        assert agent_id == office.worker.id
        return blocking[0] if blocking else None

    with pytest.raises(ConflictError) as caught:
        await office.service.agents.resume(office.worker.id, budget_check=check)
    assert "policy-1" in caught.value.message
    # Pausing again by hand keeps the budget reason, so the check still applies.
    again = await office.service.agents.pause(office.worker.id)
    assert again.paused_reason == "budget_exceeded"
    blocking.clear()
    resumed = await office.service.agents.resume(office.worker.id, budget_check=check)
    assert (resumed.status, resumed.paused_reason) == (AgentStatus.IDLE, None)


async def test_retry_cancelled_by_maintenance_is_logged(office: Office) -> None:
    task = await _assigned_task(office)
    run = (
        await office.service.intake.enqueue(
            WakeRequest(
                workspace_id=office.workspace.id,
                agent_id=office.worker.id,
                source=WakeSource.USER,
                task_id=task.id,
                hold=False,
            )
        )
    ).run
    assert run is not None
    [claimed] = office.store.queue.claim(
        now=office.clock.now(), node_id="n", lease=timedelta(minutes=1), limit=1
    )
    office.store.queue.schedule_retry(
        claimed.id,
        retry_at=office.clock.now() + timedelta(minutes=2),
        reason=RunReason.AGENT_FAILED,
        error="boom",
        now=office.clock.now(),
    )
    await office.service.office.update_task(task.id, {"state": TaskState.CANCELLED})
    office.clock.advance(timedelta(minutes=3))
    await office.service.maintenance.promote_due_retries()

    entries = [e for e in _activity(office, kind="run_cancelled") if e.run_id == claimed.id]
    assert [e.data["reason"] for e in entries] == [RunReason.RETRY_TASK_CANCELLED.value]
