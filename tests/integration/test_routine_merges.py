"""A lightweight routine's later fires reach the agent, on both databases.

``coalesce_if_active`` marks a fire ``coalesced`` when the routine's run is still active,
but the fire's payload (its variables, a catch-up summary) goes through intake like any
wake: into the active run while it has not started, else into one follow-up run that
later fires join too. Nothing ends only on a routine_runs row.
"""

from __future__ import annotations

from datetime import timedelta

from helpers import Office, merged_wakes
from office_scheduler.domain.models import Run
from office_scheduler.domain.routines import (
    ConcurrencyPolicy,
    Routine,
    RoutineRun,
    RoutineRunStatus,
)
from office_scheduler.domain.status import RunStatus, WakeSource


async def _hook(office: Office, **fields: object) -> tuple[Routine, str]:
    values: dict[str, object] = {"name": "On PR", "assignee_agent_id": office.worker.id}
    values.update(fields)
    routine = await office.service.routines.create_routine(office.workspace.id, values)
    trigger, _ = await office.service.routines.add_trigger(
        routine.id, {"kind": "webhook", "signing_mode": "none"}
    )
    assert trigger.public_id is not None
    return routine, trigger.public_id


async def _fire(office: Office, public_id: str, pr: int) -> RoutineRun:
    run, created = await office.service.routines.fire_webhook(
        public_id, {}, f'{{"pr": {pr}}}'.encode()
    )
    assert created
    return run


def _runs(office: Office) -> list[Run]:
    items = office.store.listing.list_runs(agent_id=office.worker.id).items
    return sorted(items, key=lambda run: run.id)


def _prs(office: Office, run: Run) -> list[object]:
    return [
        entry.payload["variables"].get("pr")
        for entry in merged_wakes(office.store, run.id)
        if entry.source is WakeSource.ROUTINE
    ]


def _start(office: Office, run: Run) -> None:
    """Claim ``run`` and mark it running, as the pipeline does before the session."""
    queue = office.store.queue
    office.clock.advance(timedelta(seconds=6))
    [claimed] = queue.claim(now=office.clock.now(), node_id="n", lease=timedelta(60), limit=5)
    assert claimed.id == run.id
    assert queue.mark_running(
        run.id,
        expected_version=claimed.context_version,
        prompt="p",
        executor="fake",
        session_id=None,
        now=office.clock.now(),
    )


async def test_a_later_fire_joins_the_queued_run_with_its_payload(office: Office) -> None:
    _, public_id = await _hook(office, variables=[{"name": "pr", "type": "number"}])
    first = await _fire(office, public_id, 101)
    second = await _fire(office, public_id, 202)
    assert first.status is RoutineRunStatus.DISPATCHED
    assert (second.status, second.coalesced_into_run_id) == (RoutineRunStatus.COALESCED, first.id)
    [run] = _runs(office)
    assert _prs(office, run) == [101, 202]
    assert run.coalesced_count == 2


async def test_fires_while_the_run_is_running_gather_in_one_follow_up_run(
    office: Office,
) -> None:
    _, public_id = await _hook(office, variables=[{"name": "pr", "type": "number"}])
    await _fire(office, public_id, 101)
    [active] = _runs(office)
    _start(office, active)
    second = await _fire(office, public_id, 202)
    third = await _fire(office, public_id, 303)
    assert [second.status, third.status] == [RoutineRunStatus.COALESCED] * 2
    started, follow_up = _runs(office)
    assert (started.id, started.status) == (active.id, RunStatus.RUNNING)
    assert _prs(office, started) == [101]
    assert follow_up.status is RunStatus.QUEUED
    assert _prs(office, follow_up) == [202, 303]


async def test_a_catch_up_summary_reaches_a_run_active_from_before_the_downtime(
    office: Office,
) -> None:
    routine = await office.service.routines.create_routine(
        office.workspace.id, {"name": "Heartbeat", "assignee_agent_id": office.worker.id}
    )
    await office.service.routines.add_trigger(
        routine.id, {"kind": "schedule", "cron_expression": "*/5 * * * *"}
    )
    # A run of the routine is still queued when the scheduler stops (e.g. requeued at
    # shutdown); three hours later every caught-up tick coalesces into it.
    before = await office.service.routines.fire_manual(routine.id)
    assert before.status is RoutineRunStatus.DISPATCHED
    office.clock.advance(timedelta(hours=3))
    made = await office.service.cron_firer.fire_due()
    assert {run.status for run in made} == {RoutineRunStatus.COALESCED}
    assert made[0].missed is not None
    [run] = _runs(office)
    wakes = merged_wakes(office.store, run.id)
    summaries = [e.payload["missed_ticks"] for e in wakes if "missed_ticks" in e.payload]
    assert summaries == [made[0].missed]


async def test_a_catch_up_summary_reaches_the_agent_when_the_old_run_is_running(
    office: Office,
) -> None:
    routine = await office.service.routines.create_routine(
        office.workspace.id, {"name": "Heartbeat", "assignee_agent_id": office.worker.id}
    )
    await office.service.routines.add_trigger(
        routine.id, {"kind": "schedule", "cron_expression": "*/5 * * * *"}
    )
    await office.service.routines.fire_manual(routine.id)
    [old] = _runs(office)
    _start(office, old)
    office.clock.advance(timedelta(hours=3))
    made = await office.service.cron_firer.fire_due()
    assert made[0].missed is not None
    _, follow_up = _runs(office)
    wakes = merged_wakes(office.store, follow_up.id)
    assert wakes[0].payload["missed_ticks"] == made[0].missed
    assert len(wakes) == len(made)


async def test_always_create_is_the_specifications_name_of_always_enqueue(
    office: Office,
) -> None:
    routine, public_id = await _hook(office, concurrency_policy="always_create")
    assert routine.concurrency_policy is ConcurrencyPolicy.ALWAYS_ENQUEUE
    updated = await office.service.routines.update_routine(
        routine.id, {"concurrency_policy": "always_create"}
    )
    assert updated.concurrency_policy is ConcurrencyPolicy.ALWAYS_ENQUEUE
    first = await _fire(office, public_id, 1)
    second = await _fire(office, public_id, 2)
    assert [first.status, second.status] == [RoutineRunStatus.DISPATCHED] * 2
