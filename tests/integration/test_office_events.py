"""Office events on both databases: the event bus, every kanban move, the children hold.

Approval flows are in ``test_approvals.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from helpers import Office
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.events import TaskMoved, TaskUpdated
from office_scheduler.domain.models import Task, WakeupRequest
from office_scheduler.domain.status import (
    AuthorKind,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
    WorkflowKind,
)

HOLD = timedelta(seconds=5)


async def _drain(office: Office) -> None:
    office.clock.advance(HOLD)
    await office.service.run_until_idle()


async def _task(office: Office, *, assignee: str | None = None, **fields: object) -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=str(fields.pop("title", "Write the page")),
        project_id=office.project.id,
        assignee_agent_id=assignee,
        **fields,  # type: ignore[arg-type]
    )


async def _started(office: Office, **fields: object) -> Task:
    """An Office task assigned to the worker whose first run already ran."""
    task = await _task(office, assignee=office.worker.id, **fields)
    await _drain(office)
    office.clock.advance(timedelta(seconds=30))
    return task


def _wakeups(office: Office, agent_id: str) -> list[WakeupRequest]:
    items = office.store.listing.list_wakeups(agent_id=agent_id, limit=500).items
    return sorted(items, key=lambda request: request.id)


async def test_a_failing_subscriber_leaves_the_write_committed(office: Office) -> None:
    seen: list[str] = []

    async def broken(_event: TaskUpdated) -> None:
        raise RuntimeError("subscriber bug")

    async def watcher(event: TaskMoved) -> None:
        seen.append(event.after.state.value)

    office.service.bus.subscribe(broken, TaskUpdated)
    office.service.bus.subscribe(watcher, TaskMoved)
    task = await _started(office)
    moved = await office.service.office.update_task(task.id, {"state": TaskState.IN_PROGRESS})

    assert moved.state is TaskState.IN_PROGRESS
    assert office.store.office.get_task(task.id).state is TaskState.IN_PROGRESS
    assert seen == ["IN_PROGRESS"], "the handlers after the broken one still ran"
    sources = [w.source for w in _wakeups(office, office.worker.id)]
    assert sources == [WakeSource.TASK_ASSIGNED, WakeSource.TASK_ASSIGNED]


async def test_move_to_in_progress_wakes_the_assignee(office: Office) -> None:
    task = await _started(office)
    await office.service.office.update_task(task.id, {"state": TaskState.IN_PROGRESS})
    await _drain(office)
    wakeups = _wakeups(office, office.worker.id)
    assert [(w.source, w.payload) for w in wakeups[1:]] == [
        (WakeSource.TASK_ASSIGNED, {"task_id": task.id})
    ]
    assert len(office.executor.launches) == 2
    assert "**task_assigned**" in office.executor.launches[1].prompt


async def test_the_assignee_moving_its_own_task_wakes_nobody(office: Office) -> None:
    task = await _started(office)
    await office.service.office.update_task(
        task.id, {"state": TaskState.IN_PROGRESS}, actor_agent_id=office.worker.id
    )
    await _drain(office)
    assert len(_wakeups(office, office.worker.id)) == 1
    assert len(office.executor.launches) == 1


async def test_assigning_and_starting_in_one_change_queues_one_wake(office: Office) -> None:
    task = await _task(office)
    await office.service.office.update_task(
        task.id, {"assignee_agent_id": office.worker.id, "state": TaskState.IN_PROGRESS}
    )
    await _drain(office)
    assert [w.source for w in _wakeups(office, office.worker.id)] == [WakeSource.TASK_ASSIGNED]
    assert len(office.executor.launches) == 1


@pytest.mark.parametrize("state", [TaskState.DONE, TaskState.CANCELLED])
async def test_move_to_an_end_state_resolves_blockers(office: Office, state: TaskState) -> None:
    blocker = await _task(office, title="spec")
    task = await _started(office, blocked_by=[blocker.id])
    assert office.executor.launches == [], "held while the blocker is open"
    await office.service.office.update_task(blocker.id, {"state": state})
    await _drain(office)
    resolved = _wakeups(office, office.worker.id)[-1]
    assert resolved.source is WakeSource.TASK_BLOCKERS_RESOLVED
    assert resolved.payload == {"task_id": task.id, "resolved_blocker_ids": [blocker.id]}
    assert len(office.executor.launches) == 1


async def test_move_to_in_review_wakes_each_reviewer_once_per_move(office: Office) -> None:
    task = await _started(office, reviewers=[office.other_worker.id, office.coordinator.id])
    await office.service.office.update_task(
        task.id, {"state": TaskState.IN_REVIEW}, actor_agent_id=office.worker.id
    )
    await _drain(office)
    for reviewer in (office.other_worker, office.coordinator):
        (wake,) = _wakeups(office, reviewer.id)
        assert wake.source is WakeSource.TASK_ASSIGNED
        assert wake.payload == {"task_id": task.id, "role": "reviewer"}
        (run,) = office.store.listing.list_runs(agent_id=reviewer.id).items
        assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert len(_wakeups(office, office.worker.id)) == 1, "the assignee is not woken"

    office.clock.advance(timedelta(seconds=30))
    await office.service.office.update_task(
        task.id, {"state": TaskState.IN_PROGRESS}, actor_agent_id=office.worker.id
    )
    office.clock.advance(timedelta(seconds=1))
    await office.service.office.update_task(
        task.id, {"state": TaskState.IN_REVIEW}, actor_agent_id=office.worker.id
    )
    await _drain(office)
    assert len(_wakeups(office, office.other_worker.id)) == 2


async def test_a_reviewer_moving_to_review_does_not_wake_itself(office: Office) -> None:
    task = await _started(office, reviewers=[office.other_worker.id])
    await office.service.office.update_task(
        task.id, {"state": TaskState.IN_REVIEW}, actor_agent_id=office.other_worker.id
    )
    assert _wakeups(office, office.other_worker.id) == []


async def test_back_from_review_to_in_progress_is_a_rejection_comment_wake(
    office: Office,
) -> None:
    task = await _started(office)
    await office.service.office.update_task(
        task.id, {"state": TaskState.IN_REVIEW}, actor_agent_id=office.worker.id
    )
    office.clock.advance(timedelta(seconds=1))
    await office.service.office.update_task(task.id, {"state": TaskState.IN_PROGRESS})
    await _drain(office)
    wake = _wakeups(office, office.worker.id)[-1]
    assert wake.source is WakeSource.COMMENT
    assert wake.payload == {"task_id": task.id, "rejection": {"note": "", "by": "user"}}
    assert len(office.executor.launches) == 2
    assert '"rejection"' in office.executor.launches[1].prompt


async def test_self_comment_wakes_nobody_and_other_comments_do(office: Office) -> None:
    task = await _started(office)
    await office.service.office.add_comment(
        task.id, "my notes", author_kind=AuthorKind.AGENT, author_agent_id=office.worker.id
    )
    assert len(_wakeups(office, office.worker.id)) == 1
    comment = await office.service.office.add_comment(
        task.id, "a note", author_kind=AuthorKind.AGENT, author_agent_id=office.coordinator.id
    )
    wake = _wakeups(office, office.worker.id)[-1]
    assert (wake.source, wake.idempotency_key) == (WakeSource.COMMENT, f"comment:{comment.id}")


async def test_a_persons_mention_wakes_the_mentioned_agent(office: Office) -> None:
    task = await _started(office)
    comment = await office.service.office.add_comment(
        task.id, "@bob could you check the numbers? (mail: ops@boss)", user_id="ops"
    )
    [wake] = _wakeups(office, office.other_worker.id)
    assert (wake.source, wake.task_id) == (WakeSource.USER, None)
    assert wake.payload == {
        "user_id": "ops",
        "context": {"task_id": task.id, "comment_id": comment.id},
    }
    assert wake.idempotency_key == f"comment:{comment.id}:{office.other_worker.id}"
    assert _wakeups(office, office.coordinator.id) == [], "an e-mail address mentions nobody"
    await _drain(office)
    assert office.other_worker.id in [launch.agent_id for launch in office.executor.launches]


async def test_mentioning_the_assignee_joins_its_comment_wake(office: Office) -> None:
    task = await _started(office)
    comment = await office.service.office.add_comment(task.id, "@ANN please", user_id="ops")
    comment_wake, mention = _wakeups(office, office.worker.id)[-2:]
    assert (comment_wake.source, mention.source) == (WakeSource.COMMENT, WakeSource.USER)
    assert mention.task_id == task.id
    assert mention.run_id == comment_wake.run_id, "one run for the comment and the mention"
    assert mention.idempotency_key == f"comment:{comment.id}:{office.worker.id}"


async def test_an_agents_mention_wakes_nobody(office: Office) -> None:
    task = await _started(office)
    await office.service.office.add_comment(
        task.id,
        "@bob @boss over to you",
        author_kind=AuthorKind.AGENT,
        author_agent_id=office.worker.id,
    )
    assert _wakeups(office, office.other_worker.id) == []
    assert _wakeups(office, office.coordinator.id) == []


async def test_ordinary_kanban_task_wakes_nobody_whatever_happens(office: Office) -> None:
    svc = office.service.office
    task = await svc.create_task(
        workspace_id=office.workspace.id,
        title="plain card",
        workflow=WorkflowKind.KANBAN,
        assignee_agent_id=office.worker.id,
        reviewers=[office.other_worker.id],
    )
    await svc.update_task(task.id, {"assignee_agent_id": office.other_worker.id})
    await svc.update_task(task.id, {"assignee_agent_id": office.worker.id})
    for state in (TaskState.IN_PROGRESS, TaskState.IN_REVIEW, TaskState.IN_PROGRESS):
        office.clock.advance(timedelta(seconds=1))
        await svc.update_task(task.id, {"state": state})
    await svc.add_comment(task.id, "hello")
    await svc.update_task(task.id, {"state": TaskState.DONE})
    await _drain(office)
    assert office.store.listing.list_wakeups(workspace_id=office.workspace.id).items == []
    assert office.executor.launches == []


async def test_children_finishing_together_wake_the_parent_once(office: Office) -> None:
    svc = office.service.office
    parent = await _task(office, title="parent", assignee=office.coordinator.id)
    children = [await _task(office, title=f"child {n}", parent_id=parent.id) for n in range(4)]
    await _drain(office)
    office.clock.advance(timedelta(seconds=30))
    for child in children:
        await svc.update_task(child.id, {"state": TaskState.DONE})
        office.clock.advance(timedelta(milliseconds=900))
    await _drain(office)
    runs = office.store.listing.list_runs(agent_id=office.coordinator.id).items
    latest = runs[0]
    assert latest.source is WakeSource.TASK_CHILDREN_COMPLETED
    assert latest.coalesced_count == 4
    assert (latest.status, latest.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert len(runs) == 2
    assert [launch.task_id for launch in office.executor.launches] == [parent.id, parent.id]


async def test_children_ending_apart_launch_the_parent_only_at_the_last(office: Office) -> None:
    svc = office.service.office
    parent = await _task(office, title="parent", assignee=office.coordinator.id)
    first = await _task(office, title="first", parent_id=parent.id)
    second = await _task(office, title="second", parent_id=parent.id)
    await _drain(office)
    for child in (first, second):
        office.clock.advance(timedelta(minutes=1))
        await svc.update_task(child.id, {"state": TaskState.CANCELLED})
        await _drain(office)
    runs = office.store.listing.list_runs(agent_id=office.coordinator.id).items
    assert [(r.source, r.reason) for r in runs[:2]] == [
        (WakeSource.TASK_CHILDREN_COMPLETED, RunReason.COMPLETED),
        (WakeSource.TASK_CHILDREN_COMPLETED, RunReason.CHILDREN_PENDING),
    ]
    assert len(office.executor.launches) == 2, "the first assignment and the last child"


async def test_archiving_the_last_open_blocker_resolves_it(office: Office) -> None:
    blocker = await _task(office, title="spec")
    task = await _started(office, blocked_by=[blocker.id])
    assert office.executor.launches == [], "held while the blocker is open"
    await office.service.office.archive_task(blocker.id)
    assert office.store.office.open_blocker_ids(task.id) == []
    await _drain(office)
    resolved = _wakeups(office, office.worker.id)[-1]
    assert resolved.source is WakeSource.TASK_BLOCKERS_RESOLVED
    assert resolved.payload == {"task_id": task.id, "resolved_blocker_ids": [blocker.id]}
    assert [launch.task_id for launch in office.executor.launches] == [task.id]


async def test_archiving_the_last_open_child_wakes_the_parent(office: Office) -> None:
    svc = office.service.office
    parent = await _task(office, title="parent", assignee=office.coordinator.id)
    first = await _task(office, title="first", parent_id=parent.id)
    second = await _task(office, title="second", parent_id=parent.id)
    await _drain(office)
    office.clock.advance(timedelta(minutes=1))
    await svc.update_task(first.id, {"state": TaskState.DONE})
    await _drain(office)
    office.clock.advance(timedelta(minutes=1))
    await svc.archive_task(second.id)
    await _drain(office)
    runs = office.store.listing.list_runs(agent_id=office.coordinator.id).items
    assert [(r.source, r.reason) for r in runs[:2]] == [
        (WakeSource.TASK_CHILDREN_COMPLETED, RunReason.COMPLETED),
        (WakeSource.TASK_CHILDREN_COMPLETED, RunReason.CHILDREN_PENDING),
    ]
    assert len(office.executor.launches) == 2, "the first assignment and the archived child"


async def test_archiving_a_finished_child_does_not_wake_the_parent_again(office: Office) -> None:
    svc = office.service.office
    parent = await _task(office, title="parent", assignee=office.coordinator.id)
    child = await _task(office, title="child", parent_id=parent.id)
    await _drain(office)
    office.clock.advance(timedelta(minutes=1))
    await svc.update_task(child.id, {"state": TaskState.DONE})
    await _drain(office)
    before = _wakeups(office, office.coordinator.id)
    office.clock.advance(timedelta(minutes=1))
    await svc.archive_task(child.id)
    await _drain(office)
    assert _wakeups(office, office.coordinator.id) == before


async def test_blocker_cycles_are_rejected(office: Office) -> None:
    first = await _task(office, title="first")
    second = await _task(office, title="second", blocked_by=[first.id])
    third = await _task(office, title="third", blocked_by=[second.id])
    with pytest.raises(InvalidInputError) as caught:
        await office.service.office.add_blocker(first.id, third.id)
    assert caught.value.field == "blocker_task_id"
    with pytest.raises(InvalidInputError):
        await office.service.office.add_blocker(first.id, first.id)
    assert office.store.office.get_task(first.id).blocked_by == ()
