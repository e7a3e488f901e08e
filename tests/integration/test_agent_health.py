"""Failing agents: the streak read for the dashboard (both databases) and its family."""

from __future__ import annotations

from datetime import timedelta

from helpers import Office
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus
from office_scheduler.store.agent_health import failing_streaks

PAST_ANY_BACKOFF = timedelta(hours=3)


def scripted(office: Office, *, fail: bool) -> None:
    worker_id = office.worker.id

    def outcome(launch: Launch) -> Outcome:
        if fail and launch.agent_id == worker_id:
            return Outcome(
                status=OutcomeStatus.FAILED,
                message='{"type":"system"}\n\x1b[31mInvalid API key\x1b[0m · Please run /login',
                error_family=ErrorFamily.AUTH,
            )
        return Outcome(status=OutcomeStatus.SUCCEEDED)

    office.executor._default = outcome


async def work(office: Office, title: str) -> None:
    await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    office.clock.advance(timedelta(seconds=15))
    await office.service.run_until_idle()


async def test_an_agent_is_failing_from_its_first_failure_until_a_success(office: Office) -> None:
    db = office.store.db
    await work(office, "Works")
    assert failing_streaks(db, [office.worker.id]) == {}

    scripted(office, fail=True)
    await work(office, "First failure")
    first = failing_streaks(db, [office.worker.id])[office.worker.id]
    await work(office, "Second failure")
    second = failing_streaks(db, [office.worker.id, office.other_worker.id])

    assert (first.runs, first.family) == (1, "auth")
    assert set(second) == {office.worker.id}
    streak = second[office.worker.id]
    assert streak.runs == 2
    assert streak.since == first.since
    assert streak.family == "auth"
    assert "Invalid API key" in streak.error

    scripted(office, fail=False)
    office.clock.advance(PAST_ANY_BACKOFF)
    await office.service.run_until_idle()
    assert failing_streaks(db, [office.worker.id]) == {}
