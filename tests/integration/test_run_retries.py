"""Failed runs on both databases: scheduled retries, promotion, cancellation, escalation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from helpers import Office
from office_scheduler.domain.events import RunEnded
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import Run, Task, WakeupRequest
from office_scheduler.domain.status import (
    AgentStatus,
    ErrorFamily,
    InboxKind,
    OutcomeStatus,
    RunReason,
    RunStatus,
    TaskState,
    WakeSource,
)
from office_scheduler.service import Service

HOLD = timedelta(seconds=5)
#: Longer than the longest jittered backoff (2 h + 25 %).
PAST_ANY_BACKOFF = timedelta(hours=3)


@pytest.fixture(autouse=True)
def _no_heartbeat(office: Office) -> None:
    """Remove the coordinator's heartbeat routine: these tests move the clock by hours."""
    for routine in office.store.routines.list_routines(office.workspace.id):
        office.store.routines.delete_routine(routine.id)


def _fail(message: str = "boom", **fields: object) -> Outcome:
    return Outcome(status=OutcomeStatus.FAILED, message=message, **fields)  # type: ignore[arg-type]


def _worker_fails(office: Office, message: str = "boom") -> None:
    """Every session of the worker fails with ``message``; everyone else succeeds."""
    worker_id = office.worker.id

    def outcome(launch: Launch) -> Outcome:
        if launch.agent_id == worker_id:
            return _fail(message)
        return Outcome(status=OutcomeStatus.SUCCEEDED)

    office.executor._default = outcome


async def _assigned_task(office: Office, title: str = "Write the page") -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )


async def _drain(office: Office) -> None:
    office.clock.advance(HOLD)
    await office.service.run_until_idle()


def _runs(office: Office, agent_id: str) -> list[Run]:
    return sorted(office.store.listing.list_runs(agent_id=agent_id).items, key=lambda r: r.id)


def _run_of(office: Office, task: Task) -> Run:
    [run] = office.store.listing.list_runs(task_id=task.id, agent_id=office.worker.id).items
    return run


def _event(office: Office, run_id: int, kind: str) -> dict[str, object]:
    found = [e for e in office.store.runlog.list_run_events(run_id) if e.kind == kind]
    assert found, f"no {kind} event"
    return found[-1].data


def _wakeups(office: Office, agent_id: str, source: WakeSource) -> list[WakeupRequest]:
    page = office.store.listing.list_wakeups(agent_id=agent_id, limit=500)
    return [w for w in page.items if w.source is source]


async def _fail_until_escalated(office: Office, task: Task) -> Run:
    """Drive the worker's run of ``task`` through its five failures."""
    office.clock.advance(timedelta(seconds=15))  # past the coalescing hold and any cooldown
    await office.service.run_until_idle()
    for _ in range(4):
        run = _run_of(office, task)
        assert run.status is RunStatus.SCHEDULED_RETRY
        office.clock.advance(PAST_ANY_BACKOFF)
        await office.service.run_until_idle()
    run = _run_of(office, task)
    assert (run.status, run.reason) == (RunStatus.FAILED, RunReason.RETRIES_EXHAUSTED)
    return run


async def test_first_failure_is_retried_after_the_jittered_backoff(office: Office) -> None:
    _worker_fails(office, "segfault")
    task = await _assigned_task(office)
    with structlog.testing.capture_logs() as logs:
        await _drain(office)
    failed_at = office.clock.now()
    run = _run_of(office, task)
    assert (run.status, run.reason, run.error, run.retry_count) == (
        RunStatus.SCHEDULED_RETRY,
        RunReason.AGENT_FAILED,
        "segfault",
        1,
    )
    # 2 minutes ± 25 %.
    assert failed_at + timedelta(seconds=90) <= run.not_before <= failed_at + timedelta(seconds=150)
    assert run.claimed_by is None
    assert run.lease_expires_at is None
    assert office.store.office.get_task(task.id).checkout_agent_id is None
    event = _event(office, run.id, "retry_scheduled")
    assert (event["source"], event["parsed_reset_at"], event["failures"]) == ("backoff", None, 1)
    [entry] = [e for e in logs if e["event"] == "run_retry_scheduled"]
    assert (entry["run_id"], entry["source"], entry["parsed_reset_at"]) == (run.id, "backoff", None)
    # Second, third and fourth failures: 10 minutes, 30 minutes and 2 hours ± 25 %.
    for base in (timedelta(minutes=10), timedelta(minutes=30), timedelta(hours=2)):
        office.clock.advance(run.not_before - office.clock.now())
        await office.service.run_until_idle()
        failed_at = office.clock.now()
        run = _run_of(office, task)
        assert run.status is RunStatus.SCHEDULED_RETRY
        assert failed_at + base * 0.75 <= run.not_before <= failed_at + base * 1.25
    assert run.retry_count == 4
    assert len(office.executor.launches) == 4


async def test_rate_limit_with_retry_after_retries_at_the_reset_plus_30_seconds(
    office: Office,
) -> None:
    _worker_fails(office, "API error: 429 Too Many Requests. Retry-After: 600")
    task = await _assigned_task(office)
    with structlog.testing.capture_logs() as logs:
        await _drain(office)
    now = office.clock.now()
    run = _run_of(office, task)
    assert run.status is RunStatus.SCHEDULED_RETRY
    assert run.not_before == now + timedelta(seconds=630)
    reset = (now + timedelta(seconds=600)).isoformat().replace("+00:00", "Z")
    event = _event(office, run.id, "retry_scheduled")
    assert (event["source"], event["parsed_reset_at"], event["delay_s"]) == (
        "rate_limit_parsed",
        reset,
        630.0,
    )
    [entry] = [e for e in logs if e["event"] == "run_retry_scheduled"]
    assert (entry["source"], entry["parsed_reset_at"]) == ("rate_limit_parsed", reset)


async def test_rate_limit_with_a_wall_clock_reset_retries_at_that_time(office: Office) -> None:
    # The fixture's clock starts at 2026-11-29 12:00Z; the drain adds the 5 s hold.
    _worker_fails(office, "Claude usage limit reached. Your limit will reset at 3:45 PM (UTC).")
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    assert run.status is RunStatus.SCHEDULED_RETRY
    assert run.not_before == datetime(2026, 11, 29, 15, 45, 30, tzinfo=UTC)
    assert _event(office, run.id, "retry_scheduled")["source"] == "rate_limit_parsed"


async def test_a_reset_the_executor_read_itself_is_used(office: Office) -> None:
    reset = office.clock.now() + timedelta(hours=1)
    office.executor._outcomes.append(
        _fail("quota exhausted", error_family=ErrorFamily.RATE_LIMIT, retry_not_before=reset)
    )
    task = await _assigned_task(office)
    await _drain(office)
    assert _run_of(office, task).not_before == reset + timedelta(seconds=30)


async def test_due_retry_is_promoted_by_maintenance_and_runs_again(office: Office) -> None:
    office.executor._outcomes.append(_fail("segfault"))
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    office.clock.advance(run.not_before - office.clock.now() - timedelta(seconds=1))
    assert await office.service.maintenance.promote_due_retries() == []
    await office.service.run_until_idle()
    assert _run_of(office, task).status is RunStatus.SCHEDULED_RETRY
    office.clock.advance(timedelta(seconds=1))
    await office.service.maintenance.tick()
    queued = _run_of(office, task)
    assert (queued.status, queued.retry_count) == (RunStatus.QUEUED, 1)
    assert _event(office, run.id, "retry_promoted") == {"retry_count": 1}
    await office.service.run_until_idle()
    done = _run_of(office, task)
    assert (done.id, done.status, done.reason, done.retry_count) == (
        run.id,
        RunStatus.FINISHED,
        RunReason.COMPLETED,
        1,
    )
    assert len(office.executor.launches) == 2


async def test_promoted_retry_waits_for_the_agents_cooldown(office: Office) -> None:
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), cooldown=timedelta(hours=1)
    )
    office.executor._outcomes.append(_fail("segfault"))
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    office.clock.advance(run.not_before - office.clock.now())
    await office.service.run_until_idle()
    # Promoted, but the claim gate still applies: the agent cools down for an hour.
    assert _run_of(office, task).status is RunStatus.QUEUED
    assert len(office.executor.launches) == 1


async def test_reassignment_cancels_the_previous_assignees_retry_at_once(office: Office) -> None:
    office.executor._outcomes.append(_fail("segfault"))
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    # A checkout the old agent left behind is cleared with its retry.
    assert office.store.queue.checkout_task(
        task.id, agent_id=office.worker.id, run_id=run.id, now=office.clock.now()
    )
    ended: list[Run] = []

    async def on_end(event: RunEnded) -> None:
        ended.append(event.run)

    office.service.bus.subscribe(on_end, RunEnded)
    await office.service.office.update_task(task.id, {"assignee_agent_id": office.other_worker.id})
    cancelled = office.store.queue.get_run(run.id)
    assert (cancelled.status, cancelled.reason) == (
        RunStatus.CANCELLED,
        RunReason.RETRY_STALE_ASSIGNEE,
    )
    assert [r.id for r in ended] == [run.id]
    assert _event(office, run.id, "run_cancelled") == {"reason": "retry_stale_assignee"}
    [entry] = office.store.runlog.list_activity(office.workspace.id, kind="run_cancelled").items
    assert (entry.run_id, entry.data["reason"]) == (run.id, "retry_stale_assignee")
    assert office.store.office.get_task(task.id).checkout_agent_id is None
    # The new assignee is woken as usual; the old agent never runs again.
    await _drain(office)
    [new_run] = _runs(office, office.other_worker.id)
    assert new_run.status is RunStatus.FINISHED
    assert [launch.agent_id for launch in office.executor.launches] == [
        office.worker.id,
        office.other_worker.id,
    ]


async def test_retry_of_a_cancelled_task_is_cancelled_at_promotion(office: Office) -> None:
    office.executor._outcomes.append(_fail("segfault"))
    task = await _assigned_task(office)
    await _drain(office)
    await office.service.office.update_task(task.id, {"state": TaskState.CANCELLED})
    run = _run_of(office, task)
    assert run.status is RunStatus.SCHEDULED_RETRY  # still waiting: checked at promotion
    office.clock.advance(PAST_ANY_BACKOFF)
    assert await office.service.maintenance.promote_due_retries() == []
    after = office.store.queue.get_run(run.id)
    assert (after.status, after.reason) == (RunStatus.CANCELLED, RunReason.RETRY_TASK_CANCELLED)
    await office.service.run_until_idle()
    assert len(office.executor.launches) == 1


async def test_retry_of_an_archived_or_reassigned_task_is_cancelled_at_promotion(
    office: Office,
) -> None:
    office.executor._outcomes.extend([_fail("segfault"), _fail("segfault")])
    archived = await _assigned_task(office, "archived")
    moved = await _assigned_task(office, "moved")
    await _drain(office)
    office.clock.advance(timedelta(seconds=15))  # the second run waits out the cooldown
    await office.service.run_until_idle()
    assert _run_of(office, moved).status is RunStatus.SCHEDULED_RETRY
    office.store.office.archive_task(archived.id, now=office.clock.now())
    # Reassigned behind the service's back: only the promotion check can see it.
    office.store.office.update_task(
        moved.id, now=office.clock.now(), changes={"assignee_agent_id": office.other_worker.id}
    )
    office.clock.advance(PAST_ANY_BACKOFF)
    await office.service.maintenance.promote_due_retries()
    assert office.store.queue.get_run(_run_of(office, archived).id).reason is (
        RunReason.RETRY_TASK_CANCELLED
    )
    assert office.store.queue.get_run(_run_of(office, moved).id).reason is (
        RunReason.RETRY_STALE_ASSIGNEE
    )


async def test_fifth_failure_escalates_to_the_coordinator(office: Office) -> None:
    _worker_fails(office, "boom")
    task = await _assigned_task(office)
    run = await _fail_until_escalated(office, task)
    assert (run.retry_count, run.error) == (4, "boom")
    worker_launches = [x for x in office.executor.launches if x.agent_id == office.worker.id]
    assert len(worker_launches) == 5
    assert run.session_id is not None
    payload = {
        "failed_agent_id": office.worker.id,
        "failed_session_id": run.session_id,
        "run_id": run.id,
        "error": "boom",
    }
    [item] = office.store.runlog.list_inbox(office.workspace.id)
    assert (item.kind, item.data) == (InboxKind.AGENT_ERROR, {**payload, "task_id": task.id})
    assert (item.agent_id, item.task_id) == (run.agent_id, task.id)
    [wake] = _wakeups(office, office.coordinator.id, WakeSource.AGENT_ERROR)
    assert wake.payload == payload
    assert wake.idempotency_key == f"agent_error:{run.id}"
    assert wake.task_id is None
    # The failed run caused it: a loop of failing work stays one causation chain.
    assert (wake.caused_by_run_id, wake.causation_depth) == (run.id, run.causation_depth + 1)
    # Taskless, no hold: the coordinator ran it in the same drain.
    [coordinator_run] = _runs(office, office.coordinator.id)
    assert coordinator_run.status is RunStatus.FINISHED
    assert coordinator_run.task_id is None
    assert "agent_error" in office.executor.launches[-1].prompt
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE


async def test_failing_coordinator_gets_an_inbox_item_but_no_wake(office: Office) -> None:
    office.executor._default = lambda _launch: _fail("coordinator crashed")
    await office.service.wake(office.coordinator.id)
    await office.service.run_until_idle()
    for _ in range(4):
        office.clock.advance(PAST_ANY_BACKOFF)
        await office.service.run_until_idle()
    [run] = _runs(office, office.coordinator.id)
    assert (run.status, run.reason) == (RunStatus.FAILED, RunReason.RETRIES_EXHAUSTED)
    [item] = office.store.runlog.list_inbox(office.workspace.id)
    assert item.kind is InboxKind.AGENT_ERROR
    assert item.data["failed_agent_id"] == office.coordinator.id
    wakes = office.store.listing.list_wakeups(limit=500).items
    assert [w.source for w in wakes] == [WakeSource.USER]
    assert len(office.executor.launches) == 5


async def test_agent_is_paused_after_three_escalations_in_a_row(office: Office) -> None:
    _worker_fails(office)
    for number in range(1, 4):
        task = await _assigned_task(office, f"task {number}")
        await _fail_until_escalated(office, task)
        status = office.store.office.get_agent(office.worker.id).status
        assert status is (AgentStatus.PAUSED if number == 3 else AgentStatus.IDLE)
    assert office.store.office.get_agent(office.worker.id).paused_reason == "escalations"
    inbox = office.store.runlog.list_inbox(office.workspace.id)
    assert [i.kind for i in inbox] == [InboxKind.AGENT_PAUSED] + [InboxKind.AGENT_ERROR] * 3
    assert "3 runs of ann in a row failed 5 times" in inbox[0].body
    assert inbox[0].data["escalations"] == 3
    [entry] = office.store.runlog.list_activity(office.workspace.id, kind="agent_paused").items
    assert entry.agent_id == office.worker.id


async def test_a_successful_run_resets_the_escalation_streak(office: Office) -> None:
    _worker_fails(office)
    for number in (1, 2):
        await _fail_until_escalated(office, await _assigned_task(office, f"task {number}"))
    office.executor._default = lambda _launch: Outcome(status=OutcomeStatus.SUCCEEDED)
    success = await _assigned_task(office, "a success")
    office.clock.advance(timedelta(seconds=15))
    await office.service.run_until_idle()
    assert _run_of(office, success).reason is RunReason.COMPLETED
    assert office.store.queue.escalation_streak(office.worker.id) == 0
    _worker_fails(office)
    for number in (3, 4):
        await _fail_until_escalated(office, await _assigned_task(office, f"task {number}"))
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE
    assert office.store.queue.escalation_streak(office.worker.id) == 2


async def test_resuming_a_paused_agent_starts_a_new_streak(office: Office) -> None:
    _worker_fails(office)
    for number in (1, 2, 3):
        await _fail_until_escalated(office, await _assigned_task(office, f"task {number}"))
    office.clock.advance(timedelta(minutes=1))
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), status=AgentStatus.IDLE
    )
    assert office.store.queue.escalation_streak(office.worker.id) == 0
    await _fail_until_escalated(office, await _assigned_task(office, "task 4"))
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE


async def test_missing_file_words_in_a_failure_follow_the_retry_path(office: Office) -> None:
    _worker_fails(office, "bash: rg: command not found\ncat: x: No such file or directory")
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    assert (run.status, run.reason, run.retry_count) == (
        RunStatus.SCHEDULED_RETRY,
        RunReason.AGENT_FAILED,
        1,
    )
    assert office.store.runlog.list_inbox(office.workspace.id) == []


async def test_configuration_failure_fails_at_once_with_an_inbox_item(office: Office) -> None:
    office.executor._outcomes.append(
        _fail("agent: command not found", error_family=ErrorFamily.CONFIG, exit_code=127)
    )
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    assert (run.status, run.reason, run.retry_count) == (
        RunStatus.FAILED,
        RunReason.CONFIG_ERROR,
        0,
    )
    [item] = office.store.runlog.list_inbox(office.workspace.id)
    assert item.kind is InboxKind.AGENT_ERROR
    assert item.data["error_family"] == "config"
    assert _wakeups(office, office.coordinator.id, WakeSource.AGENT_ERROR) == []


async def test_cancelled_session_is_not_retried(office: Office) -> None:
    office.executor._outcomes.append(Outcome(status=OutcomeStatus.CANCELLED, message="stopped"))
    task = await _assigned_task(office)
    await _drain(office)
    run = _run_of(office, task)
    assert (run.status, run.reason) == (RunStatus.CANCELLED, RunReason.CANCELLED_BY_USER)


async def test_a_tuned_backoff_table_is_used(office: Office, tmp_path: Path) -> None:
    settings = replace(
        office.service.settings,
        home=tmp_path / "tuned",
        retry_backoff=(timedelta(seconds=10), timedelta(seconds=20)),
    )
    service = Service(
        settings, clock=office.clock, executors={"command": office.executor}, store=office.store
    )
    _worker_fails(office)
    task = await service.office.create_task(
        workspace_id=office.workspace.id,
        title="tuned",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    expected = (
        timedelta(seconds=10),
        timedelta(seconds=20),
        timedelta(seconds=20),
        timedelta(seconds=20),
    )
    office.clock.advance(HOLD)
    try:
        for base in expected:
            await service.run_until_idle()
            failed_at = office.clock.now()
            run = _run_of(office, task)
            assert run.status is RunStatus.SCHEDULED_RETRY
            assert failed_at + base * 0.75 <= run.not_before <= failed_at + base * 1.25
            # Past the retry and the agent's 10 s cooldown.
            office.clock.advance(max(run.not_before - failed_at, timedelta(seconds=10)))
        await service.run_until_idle()
        assert _run_of(office, task).reason is RunReason.RETRIES_EXHAUSTED
    finally:
        await service.stop()
