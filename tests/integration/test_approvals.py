"""Approvals on both databases: the requires_approval gate, generic approvals, the inbox."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from helpers import Office
from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Task, WakeupRequest
from office_scheduler.domain.status import (
    ApprovalKind,
    ApprovalStatus,
    InboxKind,
    InboxStatus,
    TaskState,
    WakeSource,
)

HOLD = timedelta(seconds=5)


async def _drain(office: Office) -> None:
    office.clock.advance(HOLD)
    await office.service.run_until_idle()


def _wakeups(office: Office, agent_id: str) -> list[WakeupRequest]:
    items = office.store.listing.list_wakeups(agent_id=agent_id, limit=500).items
    return sorted(items, key=lambda request: request.id)


async def _gated(office: Office) -> tuple[Task, Task]:
    """A requires_approval spec for the worker and a build blocked by it for the other one."""
    svc = office.service.office
    spec = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Spec",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
        requires_approval=True,
    )
    build = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Build",
        project_id=office.project.id,
        assignee_agent_id=office.other_worker.id,
        blocked_by=[spec.id],
    )
    await _drain(office)
    office.clock.advance(timedelta(seconds=30))
    return spec, build


async def _finish(office: Office, task: Task) -> Task:
    return await office.service.office.update_task(
        task.id, {"state": TaskState.DONE}, actor_agent_id=office.worker.id
    )


async def test_the_agent_finishing_a_gated_task_puts_it_in_review(office: Office) -> None:
    spec, _build = await _gated(office)
    moved = await _finish(office, spec)

    assert moved.state is TaskState.IN_REVIEW
    (approval,) = office.store.approvals.list(office.workspace.id).items
    assert (approval.kind, approval.status) == (ApprovalKind.TASK_REVIEW, ApprovalStatus.PENDING)
    assert (approval.task_id, approval.requested_by_agent_id) == (spec.id, office.worker.id)
    (item,) = office.store.runlog.list_inbox(office.workspace.id)
    assert (item.kind, item.status) == (InboxKind.TASK_REVIEW, InboxStatus.OPEN)
    assert (item.approval_id, item.task_id, item.agent_id) == (
        approval.id,
        spec.id,
        office.worker.id,
    )
    again = await _finish(office, spec)
    assert again.state is TaskState.IN_REVIEW
    assert len(office.store.approvals.list(office.workspace.id).items) == 1, "no second gate"


async def test_approving_the_review_finishes_the_task_and_wakes_dependants(
    office: Office,
) -> None:
    spec, build = await _gated(office)
    await _finish(office, spec)
    await _drain(office)
    assert len(office.executor.launches) == 1, "build is still held; nobody else runs"
    (pending,) = office.store.approvals.list(office.workspace.id).items

    decided = await office.service.approvals.approve(
        pending.id, decided_by="user:ops", decision_note="ship it"
    )
    await _drain(office)

    assert (decided.status, decided.decided_by) == (ApprovalStatus.APPROVED, "user:ops")
    assert decided.decision_note == "ship it"
    assert office.store.office.get_task(spec.id).state is TaskState.DONE
    (item,) = office.store.runlog.list_inbox(office.workspace.id)
    assert item.status is InboxStatus.RESOLVED
    resolved = _wakeups(office, office.other_worker.id)[-1]
    assert resolved.source is WakeSource.TASK_BLOCKERS_RESOLVED
    assert resolved.payload == {"task_id": build.id, "resolved_blocker_ids": [spec.id]}
    assert [launch.task_id for launch in office.executor.launches] == [spec.id, build.id]
    assert _wakeups(office, office.worker.id)[-1].source is WakeSource.TASK_ASSIGNED
    with pytest.raises(ConflictError):
        await office.service.approvals.reject(pending.id, decided_by="user:ops")


async def test_rejecting_the_review_sends_the_task_back_with_the_note(office: Office) -> None:
    spec, _build = await _gated(office)
    await _finish(office, spec)
    (pending,) = office.store.approvals.list(office.workspace.id).items

    await office.service.approvals.reject(
        pending.id, decided_by="user:ops", decision_note="add the error cases"
    )
    await _drain(office)

    assert office.store.office.get_task(spec.id).state is TaskState.IN_PROGRESS
    (comment,) = office.store.office.list_comments(spec.id)
    assert "add the error cases" in comment.body
    worker_wakes = _wakeups(office, office.worker.id)
    assert [w.source for w in worker_wakes] == [WakeSource.TASK_ASSIGNED, WakeSource.COMMENT]
    assert worker_wakes[-1].payload == {
        "task_id": spec.id,
        "comment_id": comment.id,
        "rejection": {"note": "add the error cases", "by": "user:ops"},
    }
    assert len(office.executor.launches) == 2
    assert "add the error cases" in office.executor.launches[1].prompt
    assert _wakeups(office, office.other_worker.id)[-1].source is WakeSource.TASK_ASSIGNED

    office.clock.advance(timedelta(seconds=30))
    assert (await _finish(office, spec)).state is TaskState.IN_REVIEW
    statuses = [a.status for a in office.store.approvals.list(office.workspace.id).items]
    assert statuses == [ApprovalStatus.PENDING, ApprovalStatus.REJECTED]


async def test_a_person_finishing_a_gated_task_finishes_it(office: Office) -> None:
    spec, _build = await _gated(office)
    done = await office.service.office.update_task(spec.id, {"state": TaskState.DONE})
    assert done.state is TaskState.DONE
    assert office.store.approvals.list(office.workspace.id).items == []


async def test_generic_approval_wakes_the_requester_with_the_decision(office: Office) -> None:
    approvals = office.service.approvals
    approval = await approvals.request(
        workspace_id=office.workspace.id,
        title="May I delete the staging database?",
        body="it is 40 GB of test data",
        requested_by_agent_id=office.worker.id,
    )
    (item,) = office.store.runlog.list_inbox(office.workspace.id)
    assert (item.kind, item.approval_id, item.status) == (
        InboxKind.APPROVAL_REQUESTED,
        approval.id,
        InboxStatus.OPEN,
    )
    await approvals.reject(approval.id, decided_by="user:ops", decision_note="not yet")
    await _drain(office)

    (wake,) = _wakeups(office, office.worker.id)
    assert wake.source is WakeSource.APPROVAL_RESOLVED
    assert wake.task_id is None
    assert wake.payload == {
        "approval_id": approval.id,
        "status": "rejected",
        "decision_note": "not yet",
    }
    assert office.store.runlog.list_inbox(office.workspace.id)[0].status is InboxStatus.RESOLVED
    assert len(office.executor.launches) == 1
    assert "**approval_resolved**" in office.executor.launches[0].prompt
    with pytest.raises(ConflictError) as caught:
        await approvals.approve(approval.id, decided_by="user:ops")
    assert "already rejected" in caught.value.message
    kinds = [e.kind for e in office.store.runlog.list_activity(office.workspace.id).items]
    assert kinds[:2] == ["approval_rejected", "approval_requested"]


async def test_generic_approval_about_an_open_task_wakes_on_that_task(office: Office) -> None:
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="Migrate",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    approval = await office.service.approvals.request(
        workspace_id=office.workspace.id,
        title="Run the migration?",
        task_id=task.id,
        requested_by_agent_id=office.worker.id,
    )
    await office.service.approvals.approve(approval.id, decided_by="user:ops")
    wake = _wakeups(office, office.worker.id)[-1]
    assert (wake.source, wake.task_id) == (WakeSource.APPROVAL_RESOLVED, task.id)
    assert wake.payload == {"approval_id": approval.id, "status": "approved", "decision_note": None}


async def test_approval_input_errors_name_the_field(office: Office) -> None:
    approvals = office.service.approvals
    with pytest.raises(InvalidInputError) as blank:
        await approvals.request(workspace_id=office.workspace.id, title="  ")
    assert blank.value.field == "title"
    with pytest.raises(NotFoundError) as task:
        await approvals.request(workspace_id=office.workspace.id, title="x", task_id="nope")
    assert task.value.field == "task_id"
    with pytest.raises(NotFoundError) as missing:
        await approvals.approve("nope", decided_by="user:ops")
    assert missing.value.field == "approval_id"


async def test_approval_listing_pages_newest_first_and_filters(office: Office) -> None:
    ids = []
    for n in range(3):
        office.clock.advance(timedelta(seconds=1))
        approval = await office.service.approvals.request(
            workspace_id=office.workspace.id, title=f"question {n}"
        )
        ids.append(approval.id)
    await office.service.approvals.approve(ids[0], decided_by="user:ops")
    store = office.store.approvals
    first = store.list(office.workspace.id, limit=2)
    assert [a.id for a in first.items] == [ids[2], ids[1]]
    assert first.next_cursor is not None
    rest = store.list(office.workspace.id, limit=2, cursor=first.next_cursor)
    assert ([a.id for a in rest.items], rest.next_cursor) == ([ids[0]], None)
    pending = store.list(office.workspace.id, status=ApprovalStatus.PENDING).items
    assert [a.id for a in pending] == [ids[2], ids[1]]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (TaskState.DONE, ApprovalStatus.APPROVED),
        (TaskState.IN_PROGRESS, ApprovalStatus.REJECTED),
        (TaskState.CANCELLED, ApprovalStatus.REJECTED),
    ],
)
async def test_moving_a_task_out_of_review_by_hand_settles_its_pending_review(
    office: Office, target: TaskState, expected: ApprovalStatus
) -> None:
    """Regression: a drag out of IN_REVIEW left the review pending, and approving it later
    resolved the approval without touching the task."""
    spec, _build = await _gated(office)
    await _finish(office, spec)
    moved = await office.service.office.update_task(spec.id, {"state": target})
    assert moved.state is target

    (approval,) = office.store.approvals.list(office.workspace.id).items
    assert approval.status is expected
    assert approval.decided_by == "user"
    assert "outside the review" in (approval.decision_note or "")
    (item,) = office.store.runlog.list_inbox(office.workspace.id)
    assert item.status is InboxStatus.RESOLVED
    with pytest.raises(ConflictError):
        await office.service.approvals.approve(approval.id, decided_by="user:ops")
    assert office.store.office.get_task(spec.id).state is target


class _Crash(RuntimeError):
    """Stands in for the process dying right after a decision committed."""


def _crash_after_resolve(office: Office, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the decision's store call commit and then "crash" before anything else runs."""
    approvals = office.store.approvals
    real = approvals.resolve

    def resolve_then_crash(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise _Crash

    monkeypatch.setattr(approvals, "resolve", resolve_then_crash)


async def test_a_review_decision_and_its_task_move_commit_together(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 4 item 3): the move came after the decision's commit, so a crash
    in between left the task IN_REVIEW for good (deciding again is a 409)."""
    spec, _build = await _gated(office)
    await _finish(office, spec)
    (pending,) = office.store.approvals.list(office.workspace.id).items

    _crash_after_resolve(office, monkeypatch)
    with pytest.raises(_Crash):
        await office.service.approvals.reject(
            pending.id, decided_by="user:ops", decision_note="more tests"
        )
    assert office.store.office.get_task(spec.id).state is TaskState.IN_PROGRESS
    (comment,) = office.store.office.list_comments(spec.id)
    assert "more tests" in comment.body
    kinds = [e.kind for e in office.store.runlog.list_activity(office.workspace.id).items]
    assert "approval_rejected" in kinds


async def test_a_decision_does_not_overwrite_a_move_made_meanwhile(office: Office) -> None:
    """Item 9: the landing is conditional on the task still being IN_REVIEW."""
    spec, _build = await _gated(office)
    await _finish(office, spec)
    (pending,) = office.store.approvals.list(office.workspace.id).items
    # A person's move that committed between the decision's read and its write.
    office.store.office.update_task(
        spec.id, now=office.clock.now(), changes={"state": TaskState.CANCELLED}
    )
    decision = office.store.approvals.resolve(
        pending.id, status=ApprovalStatus.APPROVED, decided_by="user:ops", now=office.clock.now()
    )
    assert decision.after is not None
    assert decision.after.state is TaskState.CANCELLED
    assert office.store.office.get_task(spec.id).state is TaskState.CANCELLED


async def test_a_lost_approval_resolved_wake_is_redriven(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (item 3): a crash after the decision committed lost the requester's wake."""
    approval = await office.service.approvals.request(
        workspace_id=office.workspace.id, title="Deploy?", requested_by_agent_id=office.worker.id
    )
    _crash_after_resolve(office, monkeypatch)
    with pytest.raises(_Crash):
        await office.service.approvals.approve(approval.id, decided_by="user:ops")
    monkeypatch.undo()
    key = f"approval_resolved:{approval.id}"
    assert [w for w in _wakeups(office, office.worker.id) if w.idempotency_key == key] == []

    office.clock.advance(timedelta(hours=1))
    await office.service.maintenance.tick()  # the maintenance pass re-drives it
    (wake,) = [w for w in _wakeups(office, office.worker.id) if w.idempotency_key == key]
    assert wake.source is WakeSource.APPROVAL_RESOLVED
    assert wake.payload == {"approval_id": approval.id, "status": "approved", "decision_note": None}
    assert await office.service.approvals.redrive(office.clock.now()) == 0


async def test_start_redrives_a_lost_approval_resolved_wake(office: Office) -> None:
    approval = await office.service.approvals.request(
        workspace_id=office.workspace.id, title="Deploy?", requested_by_agent_id=office.worker.id
    )
    # The decision committed, then the process died before publishing anything.
    office.store.approvals.resolve(
        approval.id, status=ApprovalStatus.REJECTED, decided_by="user:ops", now=office.clock.now()
    )
    await office.service.start()
    wakes = [w for w in _wakeups(office, office.worker.id) if w.idempotency_key]
    assert [w.idempotency_key for w in wakes] == [f"approval_resolved:{approval.id}"]
    office.clock.advance(timedelta(hours=25))
    late = await office.service.approvals.request(
        workspace_id=office.workspace.id, title="Old", requested_by_agent_id=office.worker.id
    )
    assert await office.service.approvals.redrive(office.clock.now()) == 0
    assert late.status is ApprovalStatus.PENDING


def test_concurrent_opposite_blockers_store_one_link(office: Office) -> None:
    """Regression (item 2): on PostgreSQL both directions passed the cycle check."""
    store = office.store.office
    trials = 20
    for trial in range(trials):
        first = store.create_task(
            workspace_id=office.workspace.id, title=f"x{trial}", now=office.clock.now()
        )
        second = store.create_task(
            workspace_id=office.workspace.id, title=f"y{trial}", now=office.clock.now()
        )
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def link(
            task_id: str,
            blocker_id: str,
            barrier: threading.Barrier = barrier,
            outcomes: list[str] = outcomes,
        ) -> None:
            barrier.wait()
            try:
                store.add_blocker(task_id, blocker_id, now=office.clock.now())
                outcomes.append("ok")
            except InvalidInputError as exc:
                outcomes.append(f"422:{exc.field}")

        threads = [
            threading.Thread(target=link, args=(first.id, second.id)),
            threading.Thread(target=link, args=(second.id, first.id)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["422:blocker_task_id", "ok"], trial
        links = len(store.get_task(first.id).blocked_by) + len(store.get_task(second.id).blocked_by)
        assert links == 1, trial
