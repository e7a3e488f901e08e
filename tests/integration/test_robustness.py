"""Regression tests for defects found by trying to break the scheduler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from helpers import Office, merged_wakes
from office_scheduler.config import Settings
from office_scheduler.domain.errors import DatabaseLockedError, InvalidInputError
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import (
    AgentStatus,
    AuthorKind,
    IntakeOutcome,
    RunReason,
    RunStatus,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.pipeline.context import RunContext
from office_scheduler.pipeline.steps import DEFAULT_STEPS
from office_scheduler.service import Service
from office_scheduler.testing import ScriptedExecutor


async def test_wall_clock_jump_never_recovers_a_run_this_node_is_executing(
    office: Office,
) -> None:
    await office.service.wake(office.worker.id)
    node = office.service.settings.node_id
    [run] = office.store.queue.claim(
        now=office.clock.now(), node_id=node, lease=timedelta(seconds=60), limit=1
    )
    office.clock.advance(timedelta(seconds=120))
    queue = office.store.queue
    assert queue.recover_expired_leases(now=office.clock.now(), alive=[run.id]) == []
    assert queue.get_run(run.id).status is RunStatus.CLAIMED
    # Another node's stale claim is recovered, and the old holder can no longer end it.
    assert queue.recover_expired_leases(now=office.clock.now()) == [run.id]
    ended = queue.finish_run(
        run.id,
        status=RunStatus.FINISHED,
        reason=RunReason.COMPLETED,
        now=office.clock.now(),
        node_id=node,
    )
    assert ended is None


async def test_wake_merged_into_a_claimed_run_that_ends_unlaunched_is_handed_over(
    office: Office,
) -> None:
    svc = office.service
    blocker = await svc.office.create_task(
        workspace_id=office.workspace.id, title="spec", project_id=office.project.id
    )
    task = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="build",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
        blocked_by=[blocker.id],
    )

    commented: list[bool] = []

    # After ``load`` read the run's wakes (one task_assigned wake: the run is held as
    # blocked), a comment merges into the claimed run; it must go to the next run.
    async def comment_while_claimed(
        ctx: RunContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        if not commented:
            commented.append(True)
            await svc.office.add_comment(task.id, "please also do X")
        await call_next()

    service = Service(
        svc.settings,
        clock=office.clock,
        executors={"command": office.executor},
        store=svc.store,
        steps=(DEFAULT_STEPS[0], comment_while_claimed, *DEFAULT_STEPS[1:]),
    )
    office.clock.advance(timedelta(seconds=5))
    await service.run_until_idle()
    runs = {r.id: r for r in service.store.listing.list_runs(agent_id=office.worker.id).items}
    assert [(r.status, r.reason) for r in sorted(runs.values(), key=lambda r: r.id)] == [
        (RunStatus.FINISHED, RunReason.BLOCKED),
        (RunStatus.FINISHED, RunReason.COMPLETED),
    ]
    handed = max(runs)
    assert [e.source for e in merged_wakes(service.store, handed)] == [WakeSource.COMMENT]
    assert runs[handed].context_version == 1  # the version counts the wakes it was given
    comment_wakeup = service.store.listing.list_wakeups(agent_id=office.worker.id).items[0]
    assert comment_wakeup.source is WakeSource.COMMENT
    assert comment_wakeup.status is WakeupStatus.COALESCED
    assert comment_wakeup.run_id == handed
    assert len(office.executor.launches) == 1
    assert "please also do X" in office.executor.launches[0].prompt
    await service.stop()


@pytest.mark.parametrize("after_steps", [0, 1], ids=["after-claim", "after-load"])
async def test_wake_merged_after_the_prompt_material_was_read_reaches_the_session(
    office: Office, after_steps: int
) -> None:
    # The prompt is built from the run as claimed and material load read ahead; a wake
    # merged in after the claim must still reach the session: the start's compare-and-set
    # on the context version fails and the prompt is rebuilt from a fresh read.
    svc = office.service
    task = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="build",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )

    async def comment(ctx: RunContext, call_next: Callable[[], Awaitable[None]]) -> None:
        if ctx.run.task_id == task.id and not ctx.extras.get("commented"):
            ctx.extras["commented"] = True
            await svc.office.add_comment(task.id, "please also do X")
        await call_next()

    steps = (*DEFAULT_STEPS[:after_steps], comment, *DEFAULT_STEPS[after_steps:])
    service = Service(
        svc.settings,
        clock=office.clock,
        executors={"command": office.executor},
        store=svc.store,
        steps=steps,
    )
    office.clock.advance(timedelta(seconds=5))
    await service.run_until_idle()
    [run] = service.store.listing.list_runs(agent_id=office.worker.id).items
    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert [e.source for e in merged_wakes(service.store, run.id)] == [
        WakeSource.TASK_ASSIGNED,
        WakeSource.COMMENT,
    ]
    assert len(office.executor.launches) == 1
    assert "please also do X" in office.executor.launches[0].prompt
    kinds = [e.kind for e in service.store.runlog.list_run_events(run.id)]
    assert kinds.count("prompt_rebuilt") == 1
    await service.stop()


async def test_a_checkout_freed_after_load_makes_the_prompt_read_afresh(office: Office) -> None:
    # load reads the prompt's material while another run still holds the task; that run
    # ends before this one's checkout, so what it left must reach the prompt: the material
    # read ahead is dropped and read again after the checkout.
    svc, store = office.service, office.store
    task = await svc.office.create_task(
        workspace_id=office.workspace.id,
        title="build",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    now = office.clock.now()
    assert store.queue.checkout_task(task.id, agent_id=office.worker.id, run_id=999_999, now=now)

    async def holder_ends(ctx: RunContext, call_next: Callable[[], Awaitable[None]]) -> None:
        store.office.add_comment(
            task_id=task.id,
            body="left by the previous run",
            author_kind=AuthorKind.AGENT,
            author_agent_id=office.worker.id,
            now=office.clock.now(),
        )
        assert store.queue.reap_leaked_checkouts() == [task.id]
        await call_next()

    load, *rest = DEFAULT_STEPS
    service = Service(
        svc.settings,
        clock=office.clock,
        executors={"command": office.executor},
        store=store,
        steps=(load, holder_ends, *rest),
    )
    office.clock.advance(timedelta(seconds=5))
    await service.run_until_idle()
    [run] = store.listing.list_runs(agent_id=office.worker.id).items
    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert "left by the previous run" in office.executor.launches[0].prompt
    await service.stop()


async def test_next_wake_ignores_due_runs_of_blocked_agents(office: Office) -> None:
    queue, now = office.store.queue, office.clock.now()
    await office.service.wake(office.worker.id)
    office.store.office.update_agent(office.worker.id, now=now, status=AgentStatus.PAUSED)
    assert queue.claim(now=now, node_id="n", lease=timedelta(seconds=60), limit=5) == []
    assert queue.next_wake_at(now=now) is None  # nothing to wait for: sleep a safety tick
    await office.service.intake.enqueue(
        WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.other_worker.id,
            source=WakeSource.SELF,
        )
    )
    assert queue.next_wake_at(now=now) == now + timedelta(seconds=5)


async def test_caller_keys_are_scoped_to_the_agent(office: Office) -> None:
    first = await office.service.wake(office.worker.id, idempotency_key="nightly")
    other = await office.service.wake(office.other_worker.id, idempotency_key="nightly")
    again = await office.service.wake(office.worker.id, idempotency_key="nightly")
    assert first.outcome is IntakeOutcome.CREATED
    assert other.outcome is IntakeOutcome.CREATED
    assert other.request.agent_id == office.other_worker.id
    assert again.outcome is IntakeOutcome.DEDUPLICATED


@pytest.mark.parametrize(
    ("payload", "key", "field"),
    [
        ({"when": object()}, None, "payload"),
        ({"big": "x" * 300_000}, None, "payload"),
        ({}, "", "idempotency_key"),
    ],
)
async def test_bad_wake_input_is_rejected_before_anything_is_written(
    office: Office, payload: dict[str, object], key: str | None, field: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        await office.service.wake(office.worker.id, payload=payload, idempotency_key=key)
    assert err.value.field == field
    assert office.store.listing.list_wakeups().items == []


async def test_second_scheduler_on_one_sqlite_file_refuses_to_drain(tmp_path: Path) -> None:
    from office_scheduler.store import migrate
    from office_scheduler.store.facade import Store

    url = f"sqlite:///{tmp_path}/office.db"
    first_store, second_store = Store.open(url), Store.open(url)
    migrate.upgrade(first_store.db)
    settings = Settings(home=tmp_path)
    first = Service(settings, executors={"command": ScriptedExecutor()}, store=first_store)
    second = Service(settings, executors={"command": ScriptedExecutor()}, store=second_store)
    try:
        await first.start()
        with pytest.raises(DatabaseLockedError):
            await second.run_until_idle()
        with pytest.raises(DatabaseLockedError):
            await second.start()
    finally:
        await first.close()
        await second.close()


async def test_a_lost_database_connection_requeues_the_run_instead_of_failing_it(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a connection dropped under a pipeline step failed the run for good."""
    real_get_agent = office.store.office.get_agent
    calls = 0

    def flaky_get_agent(agent_id: str) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise sa.exc.OperationalError(
                "SELECT agents",
                {},
                psycopg.OperationalError("server closed the connection unexpectedly"),
            )
        return real_get_agent(agent_id)

    result = await office.service.wake(office.worker.id)
    assert result.run is not None
    monkeypatch.setattr(office.store.office, "get_agent", flaky_get_agent)
    await office.service.run_until_idle()

    run = office.store.queue.get_run(result.run.id)
    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert len(office.executor.launches) == 1, "launched once, after the requeue"
    claims = [e for e in office.store.runlog.list_run_events(run.id) if e.kind == "claimed"]
    assert len(claims) == 2


async def test_a_connection_lost_while_ending_a_run_does_not_run_its_session_again(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a lost connection in finish_run requeued a run whose session had ended."""
    real_finish = office.store.queue.finish_run
    calls = 0

    def flaky_finish(*args: Any, **kwargs: Any) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise sa.exc.OperationalError(
                "UPDATE runs", {}, psycopg.OperationalError("server closed the connection")
            )
        return real_finish(*args, **kwargs)

    result = await office.service.wake(office.worker.id)
    assert result.run is not None
    monkeypatch.setattr(office.store.queue, "finish_run", flaky_finish)
    await office.service.run_until_idle()

    run = office.store.queue.get_run(result.run.id)
    assert (run.status, run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert calls == 2
    assert len(office.executor.launches) == 1, "the finished session is not started again"


async def test_any_other_pipeline_error_fails_the_run_naming_the_error_class(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_get_agent(agent_id: str) -> object:
        raise RuntimeError("boom")

    result = await office.service.wake(office.worker.id)
    assert result.run is not None
    monkeypatch.setattr(office.store.office, "get_agent", broken_get_agent)
    await office.service.run_until_idle()

    run = office.store.queue.get_run(result.run.id)
    assert (run.status, run.reason) == (RunStatus.FAILED, RunReason.INTERNAL_ERROR)
    assert run.error == "internal error (RuntimeError): boom"
    assert office.executor.launches == []
