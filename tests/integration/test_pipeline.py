"""The processing pipeline on both databases: every skip/cancel reason, checkout, executors."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
import structlog

from helpers import Office
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.models import ExecutorConfig, Task, WakeRequest
from office_scheduler.domain.status import (
    AgentStatus,
    Classification,
    ErrorFamily,
    InboxKind,
    OutcomeStatus,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
    WorkflowKind,
)

HOLD = timedelta(seconds=5)


async def _assigned_task(office: Office, **fields: object) -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="Write the page",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
        **fields,  # type: ignore[arg-type]
    )


async def _drain(office: Office) -> None:
    office.clock.advance(HOLD)
    await office.service.run_until_idle()


def _only_run(office: Office, agent_id: str) -> tuple[RunStatus, RunReason | None]:
    page = office.store.listing.list_runs(agent_id=agent_id)
    assert len(page.items) == 1
    run = page.items[0]
    return run.status, run.reason


async def test_assigned_office_task_runs_to_completion(office: Office) -> None:
    task = await _assigned_task(office)
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.FINISHED, RunReason.COMPLETED)
    launch = office.executor.launches[0]
    assert launch.task_id == task.id
    assert launch.env["OFFICE_TASK_ID"] == task.id
    assert launch.env["OFFICE_TOKEN"].startswith("osr_")
    assert "Write the page" in launch.prompt
    assert "**task_assigned**" in launch.prompt
    run = office.store.listing.list_runs(agent_id=office.worker.id).items[0]
    kinds = [e.kind for e in office.store.runlog.list_run_events(run.id)]
    assert kinds[0] == "claimed"
    assert "launched" in kinds
    assert kinds[-1] == "run_finished"
    assert office.store.office.get_task(task.id).checkout_agent_id is None
    assert (
        office.store.tokens.find_active(_hash(launch.env["OFFICE_TOKEN"]), now=office.clock.now())
        is None
    )


def _hash(secret: str) -> str:
    from office_scheduler.auth import hash_token

    return hash_token(secret)


async def test_kanban_task_gets_no_autonomous_wake(office: Office) -> None:
    await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="plain card",
        workflow=WorkflowKind.KANBAN,
        assignee_agent_id=office.worker.id,
    )
    await _drain(office)
    assert office.store.listing.list_runs(agent_id=office.worker.id).items == []
    assert office.store.listing.list_wakeups(agent_id=office.worker.id).items == []


async def test_paused_agent_run_finishes_without_action(office: Office) -> None:
    await _assigned_task(office)
    office.clock.advance(HOLD)
    runs = office.store.queue.claim(
        now=office.clock.now(),
        node_id=office.service.settings.node_id,
        lease=timedelta(60),
        limit=1,
    )
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), status=AgentStatus.PAUSED
    )
    await office.service.runs._process(runs[0])
    assert _only_run(office, office.worker.id) == (RunStatus.FINISHED, RunReason.AGENT_PAUSED)
    assert office.executor.launches == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"state": TaskState.DONE}, RunReason.TASK_TERMINAL),
        ({"state": TaskState.CANCELLED}, RunReason.TASK_TERMINAL),
        ({"assignee_agent_id": "other"}, RunReason.ASSIGNEE_CHANGED),
        ({"assignee_agent_id": None}, RunReason.ASSIGNEE_CHANGED),
    ],
)
async def test_stale_task_runs_are_cancelled(
    office: Office, change: dict[str, object], reason: RunReason
) -> None:
    task = await _assigned_task(office)
    if change.get("assignee_agent_id") == "other":
        change = {"assignee_agent_id": office.other_worker.id}
    office.store.office.update_task(task.id, now=office.clock.now(), changes=change)
    office.clock.advance(HOLD)
    await office.service.run_until_idle()
    status, why = _only_run(office, office.worker.id)
    assert (status, why) == (RunStatus.CANCELLED, reason)
    assert office.executor.launches == [] or all(
        launch.agent_id != office.worker.id for launch in office.executor.launches
    )


async def test_archived_task_is_terminal(office: Office) -> None:
    task = await _assigned_task(office)
    office.store.office.archive_task(task.id, now=office.clock.now())
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.CANCELLED, RunReason.TASK_TERMINAL)


async def test_deleted_task_is_not_found(office: Office) -> None:
    result = await office.service.intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.worker.id,
            source=WakeSource.COMMENT,
            task_id="no-such-task",
            payload={"task_id": "no-such-task"},
        )
    )
    assert result.run is not None
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.CANCELLED, RunReason.TASK_NOT_FOUND)


async def test_reviewer_run_is_cancelled_when_the_reviewer_changes(office: Office) -> None:
    task = await _assigned_task(office, reviewers=[office.other_worker.id])
    office.store.office.update_task(
        task.id, now=office.clock.now(), changes={"state": TaskState.IN_REVIEW}
    )
    await office.service.intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.other_worker.id,
            source=WakeSource.USER,
            task_id=task.id,
            payload={"task_id": task.id, "role": "reviewer"},
        )
    )
    office.store.office.update_task(task.id, now=office.clock.now(), changes={"reviewers": []})
    await _drain(office)
    assert _only_run(office, office.other_worker.id) == (
        RunStatus.CANCELLED,
        RunReason.REVIEW_PARTICIPANT_CHANGED,
    )


async def _heartbeat(office: Office, agent_id: str) -> None:
    await office.service.intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=agent_id,
            source=WakeSource.ROUTINE,
            classification=Classification.PERIODIC,
            payload={"routine_id": "heartbeat"},
        )
    )


async def test_idle_worker_heartbeat_is_skipped_and_recorded(
    office: Office, caplog: pytest.LogCaptureFixture
) -> None:
    await _heartbeat(office, office.worker.id)
    await _drain(office)
    assert _only_run(office, office.worker.id) == (
        RunStatus.FINISHED,
        RunReason.NO_ACTIONABLE_TASKS,
    )
    assert office.executor.launches == []
    activity = office.store.runlog.list_activity(office.workspace.id).items
    assert [a.kind for a in activity] == ["wakeup_idle_skipped"]
    assert activity[0].agent_id == office.worker.id


async def test_the_idle_skip_logs_one_line_per_wake_naming_it(office: Office) -> None:
    await _heartbeat(office, office.worker.id)
    await _heartbeat(office, office.worker.id)  # coalesced into the same run
    wakeups = office.store.listing.list_wakeups(agent_id=office.worker.id).items
    with structlog.testing.capture_logs() as logs:
        await _drain(office)
    skipped = [entry for entry in logs if entry["event"] == "wakeup_idle_skipped"]
    assert sorted(entry["wakeup_id"] for entry in skipped) == sorted(w.id for w in wakeups)
    assert len(wakeups) == 2
    assert {entry["agent_instance_id"] for entry in skipped} == {office.worker.id}
    assert {entry["reason"] for entry in skipped} == {"no_actionable_tasks"}


async def test_idle_coordinator_heartbeat_still_runs(office: Office) -> None:
    await _heartbeat(office, office.coordinator.id)
    await _drain(office)
    assert _only_run(office, office.coordinator.id) == (RunStatus.FINISHED, RunReason.COMPLETED)


async def test_worker_heartbeat_with_actionable_work_runs(office: Office) -> None:
    await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="card",
        workflow=WorkflowKind.KANBAN,
        assignee_agent_id=office.worker.id,
    )
    await _heartbeat(office, office.worker.id)
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.FINISHED, RunReason.COMPLETED)


async def test_event_wake_merged_into_heartbeat_is_never_idle_skipped(office: Office) -> None:
    await _heartbeat(office, office.worker.id)
    await office.service.wake(office.worker.id, payload={"note": "look at this"})
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.FINISHED, RunReason.COMPLETED)


async def test_blocked_task_assignment_is_held(office: Office) -> None:
    blocker = await office.service.office.create_task(
        workspace_id=office.workspace.id, title="spec", project_id=office.project.id
    )
    await _assigned_task(office, blocked_by=[blocker.id])
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.FINISHED, RunReason.BLOCKED)
    assert office.executor.launches == []


async def test_checkout_conflict_finishes_without_retry(office: Office) -> None:
    task = await _assigned_task(office)
    assert office.store.queue.checkout_task(
        task.id, agent_id=office.other_worker.id, run_id=999, now=office.clock.now()
    )
    await _drain(office)
    assert _only_run(office, office.worker.id) == (RunStatus.FINISHED, RunReason.CHECKOUT_CONFLICT)
    assert office.executor.launches == []
    # Ending the run that lost the race leaves the holder's checkout alone.
    held = office.store.office.get_task(task.id)
    assert (held.checkout_agent_id, held.checkout_run_id) == (office.other_worker.id, 999)


def _executors(office: Office, *names: str) -> None:
    settings = replace(
        office.workspace.settings,
        executors={n: ExecutorConfig(name=n, argv=(n,)) for n in names},
        default_executor="ws-default",
    )
    office.store.office.update_workspace(
        office.workspace.id, now=office.clock.now(), settings=settings
    )


@pytest.mark.parametrize(
    ("task_exec", "agent_exec", "project_exec", "expected"),
    [
        ("t", "a", "p", "t"),
        (None, "a", "p", "a"),
        (None, None, "p", "p"),
        (None, None, None, "ws-default"),
    ],
)
async def test_executor_resolution_order(
    office: Office,
    task_exec: str | None,
    agent_exec: str | None,
    project_exec: str | None,
    expected: str,
) -> None:
    _executors(office, "t", "a", "p", "ws-default")
    now = office.clock.now()
    office.store.office.update_agent(office.worker.id, now=now, executor=agent_exec)
    office.store.office.update_project(office.project.id, now=now, executor=project_exec)
    await _assigned_task(office, executor=task_exec)
    await _drain(office)
    assert [launch.config.name for launch in office.executor.launches] == [expected]


async def test_missing_executor_fails_with_a_clear_error_and_an_inbox_item(
    office: Office,
) -> None:
    settings = replace(office.workspace.settings, default_executor=None, executors={})
    office.store.office.update_workspace(
        office.workspace.id, now=office.clock.now(), settings=settings
    )
    await _assigned_task(office)
    await _drain(office)
    run = office.store.listing.list_runs(agent_id=office.worker.id).items[0]
    assert run.status is RunStatus.FAILED
    assert run.reason is RunReason.EXECUTOR_MISSING
    assert run.error is not None
    assert "no executor configured" in run.error
    inbox = office.store.runlog.list_inbox(office.workspace.id)
    assert [i.kind for i in inbox] == [InboxKind.EXECUTOR_MISSING]
    assert (inbox[0].agent_id, inbox[0].task_id) == (office.worker.id, run.task_id)
    assert office.store.listing.list_runs(status=RunStatus.QUEUED).items == []


async def test_undefined_executor_name_is_a_configuration_error(office: Office) -> None:
    office.store.office.update_agent(office.worker.id, now=office.clock.now(), executor="ghost")
    await _assigned_task(office)
    await _drain(office)
    run = office.store.listing.list_runs(agent_id=office.worker.id).items[0]
    assert run.reason is RunReason.EXECUTOR_MISSING
    assert run.error is not None
    assert "'ghost' (from the agent)" in run.error


async def test_failed_session_records_its_message(office: Office) -> None:
    office.executor._outcomes.append(
        Outcome(
            status=OutcomeStatus.FAILED,
            error_family=ErrorFamily.CRASH,
            message="segfault",
            exit_code=139,
        )
    )
    await _assigned_task(office)
    await _drain(office)
    run = office.store.listing.list_runs(agent_id=office.worker.id).items[0]
    # A first failure is retried later (tests/integration/test_run_retries.py has the details).
    assert (run.status, run.reason, run.error, run.exit_code, run.retry_count) == (
        RunStatus.SCHEDULED_RETRY,
        RunReason.AGENT_FAILED,
        "segfault",
        139,
        1,
    )


async def test_comment_from_someone_else_wakes_the_assignee(office: Office) -> None:
    task = await _assigned_task(office)
    await _drain(office)
    office.clock.advance(timedelta(seconds=10))
    comment = await office.service.office.add_comment(task.id, "please also add a footer")
    await _drain(office)
    assert len(office.executor.launches) == 2
    assert f'"comment_id": "{comment.id}"' in office.executor.launches[1].prompt
    assert "please also add a footer" in office.executor.launches[1].prompt


async def test_assignees_own_comment_wakes_nobody(office: Office) -> None:
    from office_scheduler.domain.status import AuthorKind

    task = await _assigned_task(office)
    await _drain(office)
    office.clock.advance(timedelta(seconds=10))
    await office.service.office.add_comment(
        task.id, "done with it", author_kind=AuthorKind.AGENT, author_agent_id=office.worker.id
    )
    await _drain(office)
    assert len(office.executor.launches) == 1


async def test_blockers_resolved_and_children_completed_wake_their_agents(
    office: Office,
) -> None:
    svc = office.service
    parent = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="parent",
        project_id=office.project.id,
        assignee_agent_id=office.coordinator.id,
    )
    first = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="spec",
        parent_id=parent.id,
        assignee_agent_id=office.worker.id,
    )
    second = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="build",
        parent_id=parent.id,
        assignee_agent_id=office.other_worker.id,
        blocked_by=[first.id],
    )
    await _drain(office)
    assert _only_run(office, office.other_worker.id) == (RunStatus.FINISHED, RunReason.BLOCKED)
    office.clock.advance(timedelta(seconds=10))
    await svc.office.update_task(first.id, {"state": TaskState.DONE})
    await _drain(office)
    build_launches = [x for x in office.executor.launches if x.task_id == second.id]
    assert len(build_launches) == 1
    assert "**task_blockers_resolved**" in build_launches[0].prompt
    office.clock.advance(timedelta(seconds=10))
    await svc.office.update_task(second.id, {"state": TaskState.DONE})
    await _drain(office)
    parent_launches = [x for x in office.executor.launches if x.task_id == parent.id]
    assert len(parent_launches) == 2
    assert "**task_children_completed**" in parent_launches[1].prompt


async def test_removing_the_last_open_blocker_wakes_the_assignee(office: Office) -> None:
    svc = office.service
    blocker = await svc.office.create_task(
        workspace_id=office.workspace.id, title="spec", project_id=office.project.id
    )
    task = await _assigned_task(office, blocked_by=[blocker.id])
    await _drain(office)
    assert office.executor.launches == []
    office.clock.advance(timedelta(seconds=10))
    await svc.office.remove_blocker(task.id, blocker.id)
    await _drain(office)
    assert len(office.executor.launches) == 1
    assert "**task_blockers_resolved**" in office.executor.launches[0].prompt
