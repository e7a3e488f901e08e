"""Prompts and continuation summaries through the pipeline, on both databases."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from helpers import Office
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.models import ExecutorConfig, Run, WakeRequest
from office_scheduler.domain.status import (
    AuthorKind,
    ErrorFamily,
    OutcomeStatus,
    RunStatus,
    WakeSource,
)
from office_scheduler.domain.summaries import ContinuationSummary
from office_scheduler.pipeline import summary as summary_step
from office_scheduler.store.facade import Store

HOLD = timedelta(seconds=5)


async def _drain(office: Office) -> None:
    office.clock.advance(HOLD)
    await office.service.run_until_idle()


def _runs(office: Office, agent_id: str) -> list[Run]:
    return sorted(office.store.listing.list_runs(agent_id=agent_id).items, key=lambda r: r.id)


async def _heartbeat(office: Office) -> str:
    """Let the coordinator's heartbeat fire once more; return its scope."""
    [routine] = office.store.routines.list_routines(
        office.workspace.id, assignee_agent_id=office.coordinator.id
    )
    await office.service.run_until_idle()  # the cron loop plans the next tick
    office.clock.advance(timedelta(minutes=5))
    await office.service.run_until_idle()
    await _drain(office)
    return f"routine:{routine.id}"


def _summary(office: Office, scope: str) -> ContinuationSummary | None:
    return office.store.summaries.get_summary(office.coordinator.id, scope)


async def test_heartbeat_success_writes_the_summary_and_the_next_prompt_carries_it(
    office: Office,
) -> None:
    svc = office.service
    spec = await svc.office.create_task(workspace_id=office.workspace.id, title="Write the spec")
    await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="Deploy the site",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
        blocked_by=[spec.id],
    )
    office.executor._outcomes.append(
        Outcome(
            status=OutcomeStatus.SUCCEEDED,
            result={"status": "ok", "summary": "Checked the board; asked for the spec."},
        )
    )
    scope = await _heartbeat(office)
    [first_run] = [r for r in _runs(office, office.coordinator.id) if r.task_id is None]
    assert first_run.status is RunStatus.FINISHED
    assert first_run.prompt_kind == "full"
    summary = _summary(office, scope)
    assert summary is not None
    assert summary.updated_by_run_id == first_run.id
    assert summary.updated_at == first_run.finished_at
    assert summary.content_tokens == (len(summary.content.encode()) + 3) // 4
    assert summary.content.startswith("## Active focus\nboss keeps watch over routine ")
    assert "- Deploy the site (task " in summary.content
    assert "ann): needs Write the spec done; surfaced " in summary.content
    assert "(run " + str(first_run.id) + "): Checked the board; asked for the spec." in (
        summary.content
    )
    assert summary.content.rstrip().endswith(
        "Unblock task Deploy the site (waiting on Write the spec)."
    )
    events = office.store.runlog.list_run_events(first_run.id)
    updated = [e for e in events if e.kind == "summary_updated"]
    assert updated[0].data["scope"] == scope

    await _heartbeat(office)
    prompt = office.executor.launches[-1].prompt
    assert office.executor.launches[-1].task_id is None
    assert f"## Where you left off (continuation summary, scope {scope})" in prompt
    assert "Checked the board; asked for the spec." in prompt
    assert "## Open blockers" in prompt
    # The second success replaces the row (one current row) and keeps the first decision.
    later = _summary(office, scope)
    assert later is not None
    assert later.updated_by_run_id != first_run.id
    assert "Checked the board; asked for the spec." in later.content


async def test_a_failed_taskless_run_leaves_the_last_good_summary(office: Office) -> None:
    office.executor._outcomes.append(
        Outcome(status=OutcomeStatus.SUCCEEDED, result={"message": "All quiet."})
    )
    scope = await _heartbeat(office)
    good = _summary(office, scope)
    assert good is not None
    assert "All quiet." in good.content
    office.executor._outcomes.append(
        Outcome(
            status=OutcomeStatus.FAILED,
            error_family=ErrorFamily.CRASH,
            message="segfault",
            result={"summary": "half-done thoughts"},
            exit_code=139,
        )
    )
    await _heartbeat(office)
    failed = _runs(office, office.coordinator.id)[-1]
    assert failed.status in (RunStatus.SCHEDULED_RETRY, RunStatus.FAILED)
    assert _summary(office, scope) == good
    assert "half-done thoughts" not in (_summary(office, scope) or good).content


async def test_a_taskless_self_wake_uses_the_agent_scope(office: Office) -> None:
    office.executor._outcomes.append(
        Outcome(status=OutcomeStatus.SUCCEEDED, result={"summary": "Looked at CI."})
    )
    await office.service.wake(
        office.worker.id, source=WakeSource.SELF, payload={"reason": "check CI"}
    )
    await _drain(office)
    summary = office.store.summaries.get_summary(office.worker.id, "agent")
    assert summary is not None
    assert "keeps watch over the agent's own wakes" in summary.content
    assert "Looked at CI." in summary.content


async def _resumable_office(office: Office) -> None:
    executors = dict(office.workspace.settings.executors)
    executors["claude"] = ExecutorConfig(name="claude", kind="command", preset="claude")
    office.store.office.update_workspace(
        office.workspace.id,
        now=office.clock.now(),
        settings=replace(office.workspace.settings, executors=executors),
    )
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), instructions="ALWAYS RUN THE TESTS FIRST."
    )


async def test_second_task_run_resuming_its_session_gets_a_delta_prompt(office: Office) -> None:
    await _resumable_office(office)
    office.executor._outcomes.append(
        Outcome(status=OutcomeStatus.SUCCEEDED, external_session_id="ext-1")
    )
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="Write the page",
        description="THE LONG TASK DESCRIPTION",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
        executor="claude",
    )
    await office.service.office.add_comment(task.id, "an early remark")
    await _drain(office)
    office.clock.advance(timedelta(seconds=20))
    await office.service.office.add_comment(task.id, "please add a footer")
    await _drain(office)

    first, second = _runs(office, office.worker.id)
    assert (first.prompt_kind, second.prompt_kind) == ("full", "delta")
    full, delta = (launch.prompt for launch in office.executor.launches)
    assert first.prompt == full
    assert second.prompt == delta
    assert "ALWAYS RUN THE TESTS FIRST." in full
    assert "THE LONG TASK DESCRIPTION" in full
    assert delta.startswith(f"# Resumed session: what is new since run {first.id}\n")
    for absent in ("ALWAYS RUN THE TESTS FIRST.", "THE LONG TASK DESCRIPTION", "an early remark"):
        assert absent not in delta
    assert "please add a footer" in delta
    assert "1. **comment**" in delta
    assert office.executor.launches[1].resume_session_id == "ext-1"
    built = [e for e in office.store.runlog.list_run_events(second.id) if e.kind == "prompt_built"][
        -1
    ]
    assert built.data["prompt_kind"] == "delta"
    assert built.data["bytes"] == len(delta.encode())
    assert built.data["bytes"] < built.data["full_bytes"]
    assert built.data["resumed_run_id"] == first.id


async def test_an_executor_that_cannot_resume_gets_the_full_prompt_again(office: Office) -> None:
    office.executor._outcomes.append(
        Outcome(status=OutcomeStatus.SUCCEEDED, external_session_id="ext-1")
    )
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title="Write the page",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    await _drain(office)
    office.clock.advance(timedelta(seconds=20))
    await office.service.office.add_comment(task.id, "please add a footer")
    await _drain(office)
    assert [r.prompt_kind for r in _runs(office, office.worker.id)] == ["full", "full"]
    assert office.executor.launches[1].prompt.startswith("# You are ann")


async def test_a_summary_that_fails_halfway_keeps_the_end_and_writes_nothing(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary is written inside the run's end transaction, under a savepoint."""
    real = summary_step.write_summary

    def upsert_then_fail(
        store: Store, run: Run, agent_name: str, scope: str
    ) -> ContinuationSummary:
        real(store, run, agent_name, scope)  # the upsert happened in the end transaction...
        raise RuntimeError("summary renderer broke")  # ...and must be undone alone

    monkeypatch.setattr(summary_step, "write_summary", upsert_then_fail)
    office.executor._outcomes.append(
        Outcome(status=OutcomeStatus.SUCCEEDED, result={"message": "All quiet."})
    )
    scope = await _heartbeat(office)
    [run] = [r for r in _runs(office, office.coordinator.id) if r.task_id is None]
    assert run.status is RunStatus.FINISHED
    assert _summary(office, scope) is None
    events = office.store.runlog.list_run_events(run.id)
    kinds = [e.kind for e in events]
    assert kinds[-2:] == ["run_finished", "summary_failed"]
    assert events[-1].message == "continuation summary not written: summary renderer broke"


async def test_the_prompt_names_the_agents_its_wakes_comments_and_subtasks_mention(
    office: Office,
) -> None:
    """Names are read for the ids the prompt can show (not for every agent of the office):
    a merged wake's payload, a comment's author and a subtask's assignee are all named."""
    svc = office.service
    task = await svc.office.create_task(
        workspace_id=office.workspace.id, title="Ship it", assignee_agent_id=office.coordinator.id
    )
    await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="Sub",
        parent_id=task.id,
        assignee_agent_id=office.other_worker.id,
    )
    await svc.office.add_comment(
        task.id, body="looks fine", author_kind=AuthorKind.AGENT, author_agent_id=office.worker.id
    )
    await svc.intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.coordinator.id,
            source=WakeSource.AGENT_ERROR,
            payload={"failed_agent_id": office.other_worker.id, "error": "boom"},
            task_id=task.id,
        )
    )
    await _drain(office)
    prompt = next(x.prompt for x in office.executor.launches if x.agent_id == office.coordinator.id)
    worker, other = office.worker, office.other_worker
    assert f"{other.name} ({other.id})" in prompt  # named in the agent_error wake
    assert f"agent {worker.name}" in prompt  # the comment's author
    assert f"assignee {other.name})" in prompt  # the subtask's assignee
