"""Routines on both databases: catch-up, concurrency policies, heartbeat, webhooks, variables."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from helpers import Office, merged_wakes
from office_scheduler.domain.errors import (
    AuthError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from office_scheduler.domain.events import TaskCreated
from office_scheduler.domain.models import WakeRequest, WorkspaceSettings
from office_scheduler.domain.routines import (
    HEARTBEAT_NAME,
    Routine,
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
    RoutineStatus,
    RoutineTrigger,
)
from office_scheduler.domain.status import (
    AgentRole,
    Classification,
    RunReason,
    RunStatus,
    WakeSource,
)
from office_scheduler.routines import webhooks
from office_scheduler.routines.firing import TRIGGERS_PER_TRANSACTION, BatchLostError, tick_run
from office_scheduler.service import Service
from office_scheduler.store import office_agents
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.routine_to_fire import RoutinesToFire, RoutineToFire
from office_scheduler.store.routines import heartbeat_follows_role
from office_scheduler.store.schema import routines as routines_table
from office_scheduler.testing import ScriptedExecutor

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def _routine(office: Office, **fields: object) -> Routine:
    values: dict[str, object] = {"name": "Check PRs", "assignee_agent_id": office.worker.id}
    values.update(fields)
    return await office.service.routines.create_routine(office.workspace.id, values)


async def _scheduled(
    office: Office, expression: str = "*/5 * * * *", timezone: str = "", **fields: object
) -> tuple[Routine, RoutineTrigger]:
    routine = await _routine(office, **fields)
    trigger, secret = await office.service.routines.add_trigger(
        routine.id, {"kind": "schedule", "cron_expression": expression, "timezone": timezone}
    )
    assert secret is None
    return routine, trigger


def _runs(office: Office, routine: Routine) -> list[RoutineRun]:
    return sorted(office.store.routines.list_runs(routine.id, limit=1000), key=lambda r: r.id)


def _statuses(runs: list[RoutineRun]) -> list[RoutineRunStatus]:
    return [run.status for run in runs]


# -- heartbeat and idle skip -------------------------------------------------------------


async def test_coordinator_gets_heartbeat_routine_and_workers_do_not(office: Office) -> None:
    boss_routines = office.store.routines.list_routines(
        office.workspace.id, assignee_agent_id=office.coordinator.id
    )
    assert [routine.name for routine in boss_routines] == [HEARTBEAT_NAME]
    heartbeat = boss_routines[0]
    assert heartbeat.task_template is None
    assert heartbeat.concurrency_policy.value == "coalesce_if_active"
    assert heartbeat.catch_up_policy.value == "enqueue_missed_with_cap"
    assert heartbeat.catch_up_max == 25
    [trigger] = office.store.routines.list_triggers(heartbeat.id)
    assert (trigger.cron_expression, trigger.timezone, trigger.enabled) == (
        "*/5 * * * *",
        "UTC",
        True,
    )
    assert trigger.next_run_at is None  # the cron loop gives it its first tick
    assert (
        office.store.routines.list_routines(office.workspace.id, assignee_agent_id=office.worker.id)
        == []
    )
    await office.service.run_until_idle()
    [trigger] = office.store.routines.list_triggers(heartbeat.id)
    assert trigger.next_run_at == _z("2026-11-29T12:05:00Z")


def _heartbeats(office: Office, agent_id: str) -> list[Routine]:
    return [
        routine
        for routine in office.store.routines.list_routines(
            office.workspace.id, assignee_agent_id=agent_id
        )
        if routine.name == HEARTBEAT_NAME
    ]


async def test_a_promoted_worker_gets_a_heartbeat_and_a_demoted_one_has_it_paused(
    office: Office,
) -> None:
    agents = office.store.office
    worker = office.worker.id
    assert _heartbeats(office, worker) == []
    agents.update_agent(worker, role=AgentRole.COORDINATOR, now=office.clock.now())
    [heartbeat] = _heartbeats(office, worker)
    assert heartbeat.status is RoutineStatus.ACTIVE
    await office.service.run_until_idle()  # 12:00: its first tick is computed, 12:05
    office.clock.advance(timedelta(hours=2))
    agents.update_agent(worker, role=AgentRole.WORKER, now=office.clock.now())
    [paused] = _heartbeats(office, worker)
    assert (paused.id, paused.status) == (heartbeat.id, RoutineStatus.PAUSED)
    await office.service.run_until_idle()  # a paused routine fires nothing
    assert _runs(office, paused) == []
    office.clock.advance(timedelta(hours=1))  # 15:00
    agents.update_agent(worker, role=AgentRole.CEO, now=office.clock.now())
    [again] = _heartbeats(office, worker)  # the same routine, not a second one
    assert (again.id, again.status) == (heartbeat.id, RoutineStatus.ACTIVE)
    [trigger] = office.store.routines.list_triggers(again.id)
    assert trigger.next_run_at is None  # first tick from now: the paused hours are not caught up
    await office.service.run_until_idle()
    [trigger] = office.store.routines.list_triggers(again.id)
    assert trigger.next_run_at == _z("2026-11-29T15:05:00Z")
    assert _runs(office, again) == []


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_demotion_racing_a_promotion_sees_it_and_pauses_the_heartbeat(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break-it: both role changes read "worker"; the demotion then changed nothing and left
    a worker with an active heartbeat."""
    worker = office.worker.id
    promoted, go_on = threading.Event(), threading.Event()
    real = heartbeat_follows_role

    def hold_after_promotion(conn: sa.Connection, **kwargs: Any) -> None:
        real(conn, **kwargs)
        if kwargs["coordinator"]:
            promoted.set()
            go_on.wait(10)

    monkeypatch.setattr(office_agents, "heartbeat_follows_role", hold_after_promotion)

    def change(role: AgentRole) -> threading.Thread:
        thread = threading.Thread(
            target=office.store.office.update_agent,
            args=(worker,),
            kwargs={"role": role, "now": office.clock.now()},
        )
        thread.start()
        return thread

    promotion = change(AgentRole.COORDINATOR)
    assert promoted.wait(10)
    demotion = change(AgentRole.WORKER)
    waiting = sa.text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
    with office.store.db.reader.connect() as conn:
        for _ in range(500):  # until the demotion waits for the promotion's row lock
            if conn.execute(waiting).scalar_one():
                break
            threading.Event().wait(0.01)
    go_on.set()
    promotion.join(10)
    demotion.join(10)
    assert office.store.office.get_agent(worker).role is AgentRole.WORKER
    assert [r.status for r in _heartbeats(office, worker)] == [RoutineStatus.PAUSED]


async def test_a_role_change_between_coordinator_roles_leaves_the_heartbeat_alone(
    office: Office,
) -> None:
    boss = office.coordinator.id
    [heartbeat] = _heartbeats(office, boss)
    office.store.office.update_agent(boss, role=AgentRole.CEO, now=office.clock.now())
    assert [(r.id, r.status) for r in _heartbeats(office, boss)] == [
        (heartbeat.id, RoutineStatus.ACTIVE)
    ]


async def test_an_archived_heartbeat_stays_archived_on_promotion(office: Office) -> None:
    boss = office.coordinator.id
    [heartbeat] = _heartbeats(office, boss)
    office.store.office.update_agent(boss, role=AgentRole.WORKER, now=office.clock.now())
    with office.store.db.write() as conn:
        conn.execute(
            sa.update(routines_table)
            .where(routines_table.c.id == heartbeat.id)
            .values(status=RoutineStatus.ARCHIVED.value)
        )
    office.store.office.update_agent(boss, role=AgentRole.COORDINATOR, now=office.clock.now())
    assert [(r.id, r.status) for r in _heartbeats(office, boss)] == [
        (heartbeat.id, RoutineStatus.ARCHIVED)
    ]


async def test_idle_coordinator_heartbeat_runs_and_idle_worker_heartbeat_is_skipped(
    office: Office,
) -> None:
    routine, _ = await _scheduled(office)  # a worker heartbeat, same shape as the coordinator's
    await office.service.run_until_idle()
    office.clock.advance(timedelta(minutes=5))  # tick 12:05 fires
    await office.service.run_until_idle()
    office.clock.advance(timedelta(seconds=5))  # the coalescing hold ends
    await office.service.run_until_idle()
    boss_runs = office.store.listing.list_runs(agent_id=office.coordinator.id).items
    ann_runs = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert [(run.status, run.reason, run.classification) for run in boss_runs] == [
        (RunStatus.FINISHED, RunReason.COMPLETED, Classification.PERIODIC)
    ]
    assert [(run.status, run.reason) for run in ann_runs] == [
        (RunStatus.FINISHED, RunReason.NO_ACTIONABLE_TASKS)
    ]
    assert [launch.agent_id for launch in office.executor.launches] == [office.coordinator.id]
    [ann_routine_run] = _runs(office, routine)
    assert ann_routine_run.source is RoutineRunSource.CRON
    assert ann_routine_run.status is RoutineRunStatus.DONE  # its run ended finished


async def test_manual_fire_of_idle_worker_routine_is_not_skipped(office: Office) -> None:
    routine = await _routine(office)
    run = await office.service.routines.fire_manual(routine.id)
    assert run.status is RoutineRunStatus.DISPATCHED
    assert run.idempotency_key == f"routine:{routine.id}:manual:{run.id}"
    await office.service.run_until_idle()  # manual fires have no coalescing hold
    [agent_run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert agent_run.id == run.linked_run_id
    assert (agent_run.status, agent_run.reason) == (RunStatus.FINISHED, RunReason.COMPLETED)
    assert agent_run.source is WakeSource.ROUTINE
    assert agent_run.classification is Classification.EVENT
    first = merged_wakes(office.store, agent_run.id)[0]
    assert first.payload == {"routine_id": routine.id, "variables": run.variables}


# -- catch-up after downtime -------------------------------------------------------------


async def test_downtime_of_three_hours_enqueues_newest_25_ticks(office: Office) -> None:
    routine, trigger = await _scheduled(office)
    assert trigger.next_run_at == _z("2026-11-29T12:05:00Z")
    office.clock.advance(timedelta(hours=3))
    made = await office.service.cron_firer.fire_due()
    runs = _runs(office, routine)
    assert len(made) == len(runs) == 25
    ticks = [run.scheduled_for for run in runs]
    assert ticks == [_z("2026-11-29T13:00:00Z") + timedelta(minutes=5 * i) for i in range(25)]
    assert ticks[-1] == _z("2026-11-29T15:00:00Z")
    assert runs[0].missed == {"count": 11, "since": "2026-11-29T12:05:00Z", "exact": True}
    assert all(run.missed is None for run in runs[1:])
    # The first tick's run is queued (active), so the other 24 coalesce into it.
    assert _statuses(runs) == [RoutineRunStatus.DISPATCHED] + [RoutineRunStatus.COALESCED] * 24
    assert {run.coalesced_into_run_id for run in runs[1:]} == {runs[0].id}
    assert runs[0].idempotency_key == (
        f"routine:{routine.id}:{trigger.id}:{int(_z('2026-11-29T13:00:00Z').timestamp()) // 60}"
    )
    [agent_run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert merged_wakes(office.store, agent_run.id)[0].payload["missed_ticks"] == runs[0].missed
    [trigger] = office.store.routines.list_triggers(routine.id)
    assert trigger.next_run_at == _z("2026-11-29T15:05:00Z")
    assert trigger.last_fired_at == _z("2026-11-29T15:00:00Z")
    assert await office.service.cron_firer.fire_due() == []  # nothing is due twice


async def test_downtime_with_skip_missed_fires_current_tick_and_records_the_rest(
    office: Office,
) -> None:
    routine, _ = await _scheduled(office, catch_up_policy="skip_missed")
    office.clock.advance(timedelta(hours=3))
    await office.service.cron_firer.fire_due()
    skipped, fired = _runs(office, routine)
    assert skipped.status is RoutineRunStatus.SKIPPED
    assert skipped.status_reason == "missed 35 ticks since 2026-11-29T12:05:00Z"
    assert skipped.missed == {"count": 35, "since": "2026-11-29T12:05:00Z", "exact": True}
    assert fired.status is RoutineRunStatus.DISPATCHED
    assert fired.scheduled_for == _z("2026-11-29T15:00:00Z")
    assert fired.missed is None


async def test_skip_missed_drops_a_tick_older_than_the_misfire_grace(office: Office) -> None:
    routine, _ = await _scheduled(office, "0 * * * *", catch_up_policy="skip_missed")
    office.clock.advance(timedelta(hours=3, minutes=20))  # newest tick 15:00 is 20 min old
    await office.service.cron_firer.fire_due()
    [skipped] = _runs(office, routine)
    assert skipped.status is RoutineRunStatus.SKIPPED
    assert skipped.missed == {"count": 3, "since": "2026-11-29T13:00:00Z", "exact": True}
    assert office.store.listing.list_runs(agent_id=office.worker.id).items == []


async def test_always_enqueue_fires_every_tick_and_intake_merges_them(office: Office) -> None:
    routine, _ = await _scheduled(office, concurrency_policy="always_enqueue", catch_up_max=4)
    office.clock.advance(timedelta(minutes=20))
    await office.service.cron_firer.fire_due()
    runs = _runs(office, routine)
    assert _statuses(runs) == [RoutineRunStatus.DISPATCHED] * 4
    [agent_run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert {run.linked_run_id for run in runs} == {agent_run.id}
    assert agent_run.coalesced_count == 4


async def test_paused_routine_does_not_fire_and_resuming_does_not_catch_up(
    office: Office,
) -> None:
    routine, _ = await _scheduled(office)
    await office.service.routines.update_routine(routine.id, {"status": "paused"})
    office.clock.advance(timedelta(hours=1))
    assert await office.service.cron_firer.fire_due() == []
    await office.service.routines.update_routine(routine.id, {"status": "active"})
    [trigger] = office.store.routines.list_triggers(routine.id)
    assert trigger.next_run_at == _z("2026-11-29T13:05:00Z")
    assert await office.service.cron_firer.fire_due() == []


async def test_resuming_commits_the_new_ticks_with_the_status(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: resume committed ``active`` first and the next ticks after, so a cron
    pass of another process in between caught up the ticks missed while paused."""
    routine, _ = await _scheduled(office)
    await office.service.routines.update_routine(routine.id, {"status": "paused"})
    office.clock.advance(timedelta(hours=3))
    real_update = office.store.routines.update_routine
    due_right_after: list[RoutineTrigger] = []

    def update_then_look(*args: object, **kwargs: object) -> Routine:
        updated = real_update(*args, **kwargs)  # type: ignore[arg-type]
        due_right_after.extend(office.store.routines.due_triggers(office.clock.now()))
        return updated

    monkeypatch.setattr(office.store.routines, "update_routine", update_then_look)
    await office.service.routines.update_routine(routine.id, {"status": "active"})

    assert due_right_after == []
    assert await office.service.cron_firer.fire_due() == []


async def test_a_tick_takes_its_workspace_coalescing_hold(office: Office) -> None:
    """The wake of a cron tick is held for the workspace's coalescing window, as set."""
    office.store.office.update_workspace(
        office.workspace.id,
        now=office.clock.now(),
        settings=WorkspaceSettings(coalesce_window=timedelta(seconds=42)),
    )
    await _scheduled(office)
    office.clock.advance(timedelta(minutes=5))
    [fired] = await office.service.cron_firer.fire_due()
    assert fired.status is RoutineRunStatus.DISPATCHED
    [agent_run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert agent_run.not_before == office.clock.now() + timedelta(seconds=42)


async def test_a_tick_of_a_routine_paused_after_the_due_query_fails_with_the_reason(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim reads the routine again: paused since the due query, its tick fails."""
    routine, _ = await _scheduled(office)
    office.clock.advance(timedelta(minutes=5))
    real_due = office.store.routines.due_triggers

    def due_then_pause(now: datetime, **kwargs: Any) -> list[RoutineTrigger]:
        due = real_due(now, **kwargs)
        with office.store.db.write() as conn:
            conn.execute(
                sa.update(routines_table)
                .where(routines_table.c.id == routine.id)
                .values(status="paused")
            )
        return due

    monkeypatch.setattr(office.store.routines, "due_triggers", due_then_pause)
    [failed] = await office.service.cron_firer.fire_due()
    assert (failed.status, failed.status_reason) == (
        RoutineRunStatus.FAILED,
        "routine is paused",
    )
    assert office.store.listing.list_runs(agent_id=office.worker.id).items == []


async def test_the_routines_to_fire_know_their_assignees_and_coalescing_holds(
    office: Office,
) -> None:
    routine, _ = await _scheduled(office)
    other, _ = await _scheduled(office, name="Other")
    with office.store.db.write() as conn:
        conn.execute(
            sa.update(routines_table)
            .where(routines_table.c.id == other.id)
            .values(assignee_agent_id=None)
        )
    held = office.store.routines.routines_to_fire([routine.id, other.id, "no-such-routine"])
    first = held.get(routine.id)
    assert (first.routine, first.assignee_exists) == (routine, True)
    assert first.coalesce_window == WorkspaceSettings().coalesce_window
    assert held.get(other.id).assignee_exists is False
    with pytest.raises(NotFoundError):
        held.get("no-such-routine")


@pytest.mark.parametrize("policy", ["coalesce_if_active", "skip_if_active"])
async def test_a_lightweight_tick_meets_the_last_one_still_queued(
    office: Office, policy: str
) -> None:
    """A dispatched tick's fingerprint is stored with its outcome, so the next tick finds
    it active (its agent run is still queued) and is coalesced into it or skipped."""
    routine, _ = await _scheduled(office, concurrency_policy=policy)
    office.clock.advance(timedelta(minutes=5))
    [first] = [r for r in await office.service.cron_firer.fire_due() if r.routine_id == routine.id]
    assert first.status is RoutineRunStatus.DISPATCHED
    assert first.dispatch_fingerprint is not None
    assert office.store.routines.get_run(first.id) == first
    office.clock.advance(timedelta(minutes=5))
    [second] = [r for r in await office.service.cron_firer.fire_due() if r.routine_id == routine.id]
    expected = (
        RoutineRunStatus.COALESCED if policy == "coalesce_if_active" else (RoutineRunStatus.SKIPPED)
    )
    assert second.status is expected
    assert second.status_reason == f"routine run {first.id} is still active"
    assert second.dispatch_fingerprint == first.dispatch_fingerprint
    assert second.coalesced_into_run_id == (first.id if policy == "coalesce_if_active" else None)
    assert _statuses(_runs(office, routine)) == [RoutineRunStatus.DISPATCHED, expected]


async def test_trigger_in_a_zone_resolves_date_of_the_tick(office: Office) -> None:
    _, trigger = await _scheduled(
        office,
        "30 0 * * *",
        "Europe/Berlin",
        task_template={"title": "Report {{date}}", "description": "at {{datetime}}"},
    )
    assert trigger.next_run_at == _z("2026-11-29T23:30:00Z")
    office.clock.advance(timedelta(hours=11, minutes=30))
    [run] = await office.service.cron_firer.fire_due()
    assert run.status is RoutineRunStatus.TASK_CREATED
    assert run.variables["date"] == "2026-11-30"
    task = office.store.office.get_task(run.linked_task_id or "")
    assert task.title == "Report 2026-11-30"
    assert task.description == "at 2026-11-30T00:30:00+01:00"
    assert task.workflow_id == office.workspace.routine_workflow_id
    assert task.is_office
    assert task.assignee_agent_id == office.worker.id


async def test_heavy_routine_task_starts_a_task_bound_run(office: Office) -> None:
    routine = await _routine(office, task_template={"title": "Review {{area}}"})
    assert [variable.name for variable in routine.variables] == ["area"]
    run = await office.service.routines.fire_manual(routine.id, {"area": "docs"})
    task = office.store.office.get_task(run.linked_task_id or "")
    assert task.title == "Review docs"
    office.clock.advance(timedelta(seconds=5))
    await office.service.run_until_idle()
    [agent_run] = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert (agent_run.task_id, agent_run.source) == (task.id, WakeSource.TASK_ASSIGNED)
    await office.service.office.update_task(task.id, {"state": "DONE"})
    assert office.store.routines.get_run(run.id).status is RoutineRunStatus.DONE


async def test_missing_required_variable_fails_the_tick(office: Office) -> None:
    routine, _ = await _scheduled(
        office, variables=[{"name": "repo", "type": "text", "required": True}]
    )
    office.clock.advance(timedelta(minutes=5))
    [run] = await office.service.cron_firer.fire_due()
    assert run.status is RoutineRunStatus.FAILED
    assert run.status_reason == "variable 'repo' is required"
    with pytest.raises(InvalidInputError) as caught:
        await office.service.routines.fire_manual(routine.id, {"repo": 7})
    assert caught.value.field == "variables.repo"
    assert len(_runs(office, routine)) == 1


async def test_abandoned_received_run_is_dispatched_by_a_later_pass(office: Office) -> None:
    routine, trigger = await _scheduled(office)
    office.clock.advance(timedelta(minutes=5))
    plan_next = _z("2026-11-29T12:10:00Z")
    # A process that claimed the tick and stopped before dispatching it.
    claimed_runs = office.store.routines.claim_ticks(
        trigger.id,
        expected_next_run_at=_z("2026-11-29T12:05:00Z"),
        next_run_at=plan_next,
        last_fired_at=_z("2026-11-29T12:05:00Z"),
        runs_to_insert=[tick_run(routine, trigger, _z("2026-11-29T12:05:00Z"))],
        now=office.clock.now(),
    )
    assert claimed_runs is not None
    [claimed] = claimed_runs
    assert claimed.status is RoutineRunStatus.RECEIVED
    assert await office.service.cron_firer.fire_due() == []  # not yet considered abandoned
    office.clock.advance(timedelta(minutes=1, seconds=1))
    [recovered] = await office.service.cron_firer.fire_due()
    assert (recovered.id, recovered.status) == (claimed.id, RoutineRunStatus.DISPATCHED)


async def test_a_claim_leaves_out_a_tick_whose_routine_run_exists(office: Office) -> None:
    """A tick whose idempotency key is already taken gets no second routine run."""
    routine, trigger = await _scheduled(office)
    first, second = _z("2026-11-29T12:05:00Z"), _z("2026-11-29T12:10:00Z")
    earlier, made = office.store.routines.insert_run(
        tick_run(routine, trigger, first), now=office.clock.now()
    )
    assert made
    claimed = office.store.routines.claim_ticks(
        trigger.id,
        expected_next_run_at=first,
        next_run_at=_z("2026-11-29T12:15:00Z"),
        last_fired_at=second,
        runs_to_insert=[tick_run(routine, trigger, first), tick_run(routine, trigger, second)],
        now=office.clock.now(),
    )
    assert claimed is not None
    assert [run.scheduled_for for run in claimed] == [second]
    assert [run.id for run in _runs(office, routine)] == [earlier.id, claimed[0].id]


# -- concurrency policies against an active instance -------------------------------------

STATES = ["TODO", "IN_PROGRESS", "BLOCKED", "IN_REVIEW", "DONE", "CANCELLED", "archived"]
ACTIVE = {"TODO", "IN_PROGRESS", "BLOCKED", "IN_REVIEW"}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("policy", ["coalesce_if_active", "skip_if_active", "always_enqueue"])
async def test_concurrency_policy_against_instance_in_each_state(
    office: Office, policy: str, state: str
) -> None:
    routine = await _routine(
        office, concurrency_policy=policy, task_template={"title": "Daily review"}
    )
    first = await office.service.routines.fire_manual(routine.id)
    assert first.status is RoutineRunStatus.TASK_CREATED
    task_id = first.linked_task_id or ""
    if state == "archived":
        await office.service.office.archive_task(task_id)
    elif state != "TODO":
        await office.service.office.update_task(task_id, {"state": state})
    second = await office.service.routines.fire_manual(routine.id)
    if policy == "always_enqueue" or state not in ACTIVE:
        assert second.status is RoutineRunStatus.TASK_CREATED
        assert second.linked_task_id not in (None, task_id)
    elif policy == "coalesce_if_active":
        assert second.status is RoutineRunStatus.COALESCED
        assert second.coalesced_into_run_id == first.id
        assert second.linked_task_id is None
    else:
        assert second.status is RoutineRunStatus.SKIPPED
        assert second.coalesced_into_run_id is None
    assert second.dispatch_fingerprint == first.dispatch_fingerprint
    expected_first = {
        "DONE": RoutineRunStatus.DONE,
        "CANCELLED": RoutineRunStatus.CANCELLED,
        "archived": RoutineRunStatus.CANCELLED,
    }.get(state, RoutineRunStatus.TASK_CREATED)
    assert office.store.routines.get_run(first.id).status is expected_first


async def test_a_new_date_in_the_title_is_a_new_fingerprint(office: Office) -> None:
    await _scheduled(office, "0 9 * * *", task_template={"title": "Standup {{date}}"})
    office.clock.advance(timedelta(days=2))
    runs = await office.service.cron_firer.fire_due()
    assert _statuses(runs) == [RoutineRunStatus.TASK_CREATED] * 2
    assert runs[0].dispatch_fingerprint != runs[1].dispatch_fingerprint


# -- webhooks ----------------------------------------------------------------------------


async def _webhook(office: Office, mode: str = "hmac_sha256") -> tuple[Routine, str, str]:
    routine = await _routine(office)
    trigger, secret = await office.service.routines.add_trigger(
        routine.id, {"kind": "webhook", "signing_mode": mode}
    )
    assert trigger.public_id is not None
    assert (secret is None) == (mode == "none")
    return routine, trigger.public_id, secret or ""


def _signed(secret: str, body: bytes, at: datetime, **extra: str) -> dict[str, str]:
    stamp = int(at.timestamp())
    headers = {
        "x-signature-256": webhooks.sign(secret, stamp, body),
        "x-signature-timestamp": str(stamp),
    }
    headers.update(extra)
    return headers


async def test_webhook_retried_with_same_idempotency_key_makes_one_run(office: Office) -> None:
    routine, public_id, secret = await _webhook(office)
    body = json.dumps({"branch": "main"}).encode()
    headers = _signed(secret, body, office.clock.now(), **{"idempotency-key": "delivery-1"})
    first, created = await office.service.routines.fire_webhook(public_id, headers, body)
    again, created_again = await office.service.routines.fire_webhook(public_id, headers, body)
    assert (created, created_again) == (True, False)
    assert again.id == first.id
    assert first.idempotency_key == f"routine:{routine.id}:webhook:delivery-1"
    assert first.variables["branch"] == "main"
    assert first.status is RoutineRunStatus.DISPATCHED
    assert len(_runs(office, routine)) == 1


async def test_replayed_signed_webhook_is_rejected(office: Office) -> None:
    routine, public_id, secret = await _webhook(office)
    body = b'{"x": 1}'
    headers = _signed(secret, body, office.clock.now())
    await office.service.routines.fire_webhook(public_id, headers, body)
    office.clock.advance(timedelta(seconds=30))
    with pytest.raises(ConflictError):
        await office.service.routines.fire_webhook(public_id, headers, body)
    office.clock.advance(timedelta(minutes=5))  # the timestamp is now stale as well
    with pytest.raises(AuthError):
        await office.service.routines.fire_webhook(public_id, headers, body)
    assert len(_runs(office, routine)) == 1


@pytest.mark.parametrize(
    "tamper",
    ["wrong-secret", "changed-body", "no-signature", "stale", "future", "bad-stamp"],
)
async def test_badly_signed_webhook_is_rejected_and_stores_nothing(
    office: Office, tamper: str
) -> None:
    routine, public_id, secret = await _webhook(office)
    body = b'{"x": 1}'
    at = office.clock.now()
    headers = _signed("not-the-secret" if tamper == "wrong-secret" else secret, body, at)
    sent = b'{"x": 2}' if tamper == "changed-body" else body
    if tamper == "no-signature":
        del headers["x-signature-256"]
    elif tamper in ("stale", "future"):
        shift = timedelta(minutes=5, seconds=1) * (-1 if tamper == "stale" else 1)
        headers = _signed(secret, body, at + shift)
    elif tamper == "bad-stamp":
        headers["x-signature-timestamp"] = "yesterday"
    with pytest.raises(AuthError):
        await office.service.routines.fire_webhook(public_id, headers, sent)
    assert _runs(office, routine) == []


async def test_bearer_and_unsigned_webhooks(office: Office) -> None:
    routine, public_id, secret = await _webhook(office, "bearer")
    with pytest.raises(AuthError):
        await office.service.routines.fire_webhook(public_id, {"authorization": "Bearer nope"}, b"")
    run, _ = await office.service.routines.fire_webhook(
        public_id, {"authorization": f"Bearer {secret}"}, b""
    )
    assert run.idempotency_key == f"routine:{routine.id}:webhook:{run.id}"
    _, open_id, _ = await _webhook(office, "none")
    unsigned, created = await office.service.routines.fire_webhook(open_id, {}, b"{}")
    assert created
    assert unsigned.source is RoutineRunSource.WEBHOOK


async def test_webhook_body_must_be_a_json_object(office: Office) -> None:
    routine, public_id, _ = await _webhook(office, "none")
    for body in (b"[1, 2]", b"not json", b'"text"'):
        with pytest.raises(InvalidInputError) as caught:
            await office.service.routines.fire_webhook(public_id, {}, body)
        assert caught.value.field == "body"
    assert _runs(office, routine) == []


# -- two schedulers on one database ------------------------------------------------------


async def test_two_cron_loops_fire_each_tick_exactly_once(
    office: Office, database: Database, db_url: str, db_schema: str | None
) -> None:
    routines = [(await _scheduled(office, name=f"r{i}"))[0] for i in range(4)]
    second_store = Store.open(db_url, schema=db_schema)
    second = Service(
        office.service.settings,
        clock=office.clock,
        executors={"command": ScriptedExecutor()},
        store=second_store,
    )
    try:
        for _ in range(6):
            office.clock.advance(timedelta(minutes=5))
            await asyncio.gather(office.service.cron_firer.fire_due(), second.cron_firer.fire_due())
    finally:
        await second.stop()
        second_store.close()
    for routine in routines:
        ticks = [run.scheduled_for for run in _runs(office, routine)]
        expected = [T0 + timedelta(minutes=5 * i) for i in range(1, 7)]
        assert ticks == expected


@pytest.mark.parametrize(
    "body",
    [
        b'{"x": "a\\u0000b"}',
        b'{"x": NaN}',
        b'{"x": 1e999}',
        b'{"a\\u0000": 1}',
        b'{"x": "\\ud800"}',
    ],
    ids=["nul-value", "nan", "overflow", "nul-key", "lone-surrogate"],
)
async def test_webhook_values_no_database_can_store_are_rejected(
    office: Office, body: bytes
) -> None:
    routine, public_id, _ = await _webhook(office, "none")
    with pytest.raises(InvalidInputError) as caught:
        await office.service.routines.fire_webhook(public_id, {}, body)
    assert caught.value.field == "body"
    with pytest.raises(InvalidInputError) as manual:
        await office.service.routines.fire_manual(routine.id, {"x": float("nan")})
    assert manual.value.field == "variables"
    assert _runs(office, routine) == []


async def test_redelivery_with_a_seen_key_is_answered_after_the_routine_is_paused(
    office: Office,
) -> None:
    routine, public_id, _ = await _webhook(office, "none")
    headers = {"idempotency-key": "d-1"}
    first, _ = await office.service.routines.fire_webhook(public_id, headers, b"{}")
    await office.service.routines.update_routine(routine.id, {"status": "paused"})
    again, created = await office.service.routines.fire_webhook(public_id, headers, b"{}")
    assert (again.id, created) == (first.id, False)
    with pytest.raises(ConflictError):
        await office.service.routines.fire_webhook(public_id, {"idempotency-key": "d-2"}, b"{}")


async def test_concurrent_dispatch_of_one_received_heavy_run_creates_one_task(
    office: Office, db_url: str, db_schema: str | None
) -> None:
    routine = await _routine(office, task_template={"title": "T"})
    run = office.received_manual_run(routine)
    other_store = Store.open(db_url, schema=db_schema)
    other = Service(
        office.service.settings,
        clock=office.clock,
        executors={"command": ScriptedExecutor()},
        store=other_store,
    )
    try:
        results = await asyncio.gather(
            office.service.routines.dispatch(run),
            other.routines.dispatch(run),
            return_exceptions=True,
        )
    finally:
        await other.stop()
        other_store.close()
    assert all(not isinstance(r, BaseException) or isinstance(r, ConflictError) for r in results)
    tasks = office.store.office.list_tasks(office.workspace.id, limit=500).items
    assert [task.title for task in tasks] == ["T"]
    assert office.store.routines.get_run(run.id).linked_task_id == tasks[0].id


async def test_a_trigger_failing_in_a_pass_does_not_stop_the_others(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a routine deleted while due, or a schedule that no longer fires within the
    horizon, used to abort the whole cron pass."""
    vanished, _ = await _scheduled(office, name="Vanished")
    beyond, beyond_trigger = await _scheduled(office, name="Beyond the horizon")
    healthy, _ = await _scheduled(office, name="Healthy")
    real_get = RoutinesToFire.get

    def get(held: RoutinesToFire, routine_id: str) -> RoutineToFire:
        if routine_id == vanished.id:
            raise NotFoundError(f"routine {routine_id} not found", field="routine_id")
        if routine_id == beyond.id:
            raise InvalidInputError("cron_expression does not fire within 30 years")
        return real_get(held, routine_id)

    monkeypatch.setattr(RoutinesToFire, "get", get)
    office.clock.advance(timedelta(minutes=5))
    made = await office.service.cron_firer.fire_due()
    assert [run.routine_id for run in made] == [healthy.id]
    assert _statuses(_runs(office, healthy)) == [RoutineRunStatus.DISPATCHED]
    [trigger] = office.store.routines.list_triggers(beyond.id)
    assert trigger.id == beyond_trigger.id
    assert trigger.enabled is False
    assert _runs(office, vanished) == []


async def test_a_routine_row_that_cannot_be_read_fails_its_own_tick_only(office: Office) -> None:
    """The routines of a batch are read in one query but converted one tick at a time: a
    malformed row fails its tick alone (the others of the batch still fire)."""
    broken, broken_trigger = await _scheduled(office, name="Broken")
    healthy, _ = await _scheduled(office, name="Healthy")
    with office.store.db.write() as conn:
        conn.execute(
            sa.update(routines_table)
            .where(routines_table.c.id == broken.id)
            .values(variables=[{"name": "x", "type": "no-such-type"}])
        )
    office.clock.advance(timedelta(minutes=5))
    made = await office.service.cron_firer.fire_due()
    assert [run.routine_id for run in made if run.routine_id in (broken.id, healthy.id)] == [
        healthy.id
    ]
    assert _runs(office, broken) == []
    unclaimed = office.store.routines.get_trigger(broken_trigger.id)
    assert unclaimed.next_run_at == _z("2026-11-29T12:05:00Z")


async def test_a_webhook_trigger_refuses_a_timezone(office: Office) -> None:
    """Regression: a webhook trigger silently dropped the ``timezone`` it was given."""
    routine = await _routine(office)
    with pytest.raises(InvalidInputError) as caught:
        await office.service.routines.add_trigger(
            routine.id, {"kind": "webhook", "timezone": "Europe/Paris"}
        )
    assert caught.value.field == "timezone"
    assert caught.value.message == "timezone does not apply to a webhook trigger"
    assert office.store.routines.list_triggers(routine.id) == []
    trigger, secret = await office.service.routines.add_trigger(routine.id, {"kind": "webhook"})
    assert (trigger.timezone, secret is not None) == ("", True)


# -- one transaction per trigger: claim and dispatch commit together -----------------------


def _wakeups_of(office: Office, agent_id: str) -> list[object]:
    return [w for w in office.store.listing.list_wakeups(limit=500).items if w.agent_id == agent_id]


async def test_a_cron_pass_that_fails_mid_dispatch_leaves_the_tick_unclaimed(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim of a tick and the dispatch of its run are one transaction: an error after
    the wake was written undoes the claim too, and a later pass fires the tick exactly once
    instead of leaving a half-dispatched run behind. A trigger failing this way on every
    pass never stops the other triggers (break-it finding: it used to end the pass)."""
    every_tick = {"concurrency_policy": "always_enqueue"}
    failing, trigger = await _scheduled(office, name="Failing", **every_tick)
    healthy, _ = await _scheduled(
        office, name="Healthy", assignee_agent_id=office.other_worker.id, **every_tick
    )
    real_settle = office.store.routines.settle
    failing_run_ids = {run.id for run in _runs(office, failing)}

    def settle(run_id: int, *args: Any, **kwargs: Any) -> RoutineRun | None:
        if office.store.routines.get_run(run_id).routine_id == failing.id:
            failing_run_ids.add(run_id)
            raise RuntimeError("the disk is full")
        return real_settle(run_id, *args, **kwargs)

    monkeypatch.setattr(office.store.routines, "settle", settle)
    for minutes in (5, 5):  # fails on every pass; the healthy trigger fires on each
        office.clock.advance(timedelta(minutes=minutes))
        made = await office.service.cron_firer.fire_due()
        ours = [(r.routine_id, r.status) for r in made if r.routine_id in (failing.id, healthy.id)]
        assert ours == [(healthy.id, RoutineRunStatus.DISPATCHED)]
    assert failing_run_ids  # the dispatch did get as far as settling, twice
    assert office.store.routines.get_trigger(trigger.id).next_run_at == _z("2026-11-29T12:05:00Z")
    assert _runs(office, failing) == []
    assert _wakeups_of(office, office.worker.id) == []

    monkeypatch.setattr(office.store.routines, "settle", real_settle)
    made = await office.service.cron_firer.fire_due()
    [fired, fired_again] = [run for run in made if run.routine_id == failing.id]
    assert (fired.status, fired_again.status) == (RoutineRunStatus.DISPATCHED,) * 2
    assert [fired.scheduled_for, fired_again.scheduled_for] == [
        _z("2026-11-29T12:05:00Z"),
        _z("2026-11-29T12:10:00Z"),
    ]
    assert office.store.routines.get_trigger(trigger.id).next_run_at == _z("2026-11-29T12:15:00Z")
    wakeups = _wakeups_of(office, office.worker.id)
    assert {w.idempotency_key for w in wakeups} == {  # type: ignore[attr-defined]
        fired.idempotency_key,
        fired_again.idempotency_key,
    }


async def test_a_tick_whose_wake_is_refused_fails_alone_and_stays_fired(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dispatch refused by intake rolls back to its savepoint: its routine run is settled
    ``failed`` with the reason, the tick stays claimed (it never fires again), nothing of the
    gate is kept, and the other trigger of the same pass is dispatched as usual."""
    refused, refused_trigger = await _scheduled(office, name="Refused")
    healthy, _ = await _scheduled(office, name="Healthy", assignee_agent_id=office.other_worker.id)
    intake = office.service.intake
    real_persist = intake.persist

    def persist(request: WakeRequest, **kwargs: Any) -> IntakeResult:
        if request.payload.get("routine_id") == refused.id:
            raise InvalidInputError("payload is larger than 256 KiB", field="payload")
        return real_persist(request, **kwargs)

    monkeypatch.setattr(intake, "persist", persist)
    office.clock.advance(timedelta(minutes=5))
    made = await office.service.cron_firer.fire_due()
    assert sorted((run.routine_id, run.status) for run in made) == sorted(
        [(refused.id, RoutineRunStatus.FAILED), (healthy.id, RoutineRunStatus.DISPATCHED)]
    )
    [failed] = _runs(office, refused)
    assert failed.status_reason == "payload is larger than 256 KiB"
    assert failed.dispatch_fingerprint is None  # the gate's write went with the savepoint
    assert _wakeups_of(office, office.worker.id) == []
    assert len(_wakeups_of(office, office.other_worker.id)) == 1
    trigger = office.store.routines.get_trigger(refused_trigger.id)
    assert trigger.next_run_at == _z("2026-11-29T12:10:00Z")
    assert await office.service.cron_firer.fire_due() == []


async def test_due_triggers_share_a_commit_on_sqlite_and_each_has_its_own_on_postgres(
    office: Office,
) -> None:
    """On SQLite up to ``TRIGGERS_PER_TRANSACTION`` triggers are claimed and dispatched in one
    transaction (one ``fsync``); PostgreSQL keeps one transaction per trigger. Either way
    every tick fires once."""
    fired = [await _scheduled(office, name=f"Every five {n}") for n in range(30)]
    office.clock.advance(timedelta(minutes=5))
    db = office.store.db
    claims_per_commit: list[int] = []  # tick claims (compare-and-set statements) per commit
    pending = [0]

    def statement(_c: object, _cur: object, sql: str, *_args: object) -> None:
        pending[0] += sql.startswith("UPDATE routine_triggers") and "last_fired_at" in sql

    def commit(_conn: object) -> None:
        if pending[0]:
            claims_per_commit.append(pending[0])
        pending[0] = 0

    sa.event.listen(db.writer, "before_cursor_execute", statement)
    sa.event.listen(db.writer, "commit", commit)
    try:
        made = await office.service.cron_firer.fire_due()
    finally:
        sa.event.remove(db.writer, "before_cursor_execute", statement)
        sa.event.remove(db.writer, "commit", commit)
    assert sorted(run.routine_id for run in made) == sorted(routine.id for routine, _ in fired)
    mine = len(fired)
    assert sum(claims_per_commit) >= mine  # the coordinator's heartbeat may be due too
    if db.dialect == "postgresql":
        assert set(claims_per_commit) == {1}
    else:
        assert claims_per_commit[0] == TRIGGERS_PER_TRANSACTION["sqlite"] == 25
        assert len(claims_per_commit) == 2
    assert all(len(_runs(office, routine)) == 1 for routine, _ in fired)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_batch_rolled_back_by_sqlite_mid_way_announces_nothing_and_fires_later(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break-it: on a full disk SQLite rolls back the whole transaction, savepoints
    included. The batch used to carry on as if one trigger had failed, announcing the
    earlier triggers' tasks that were never committed (and firing them again later)."""
    template = {"title": "Job", "description": "x" * 19_000}  # needs new pages
    routines = [
        (await _scheduled(office, name=f"Heavy {n}", task_template=template))[0] for n in range(3)
    ]
    ours = {routine.id for routine in routines}
    office.clock.advance(timedelta(minutes=5))
    due = office.store.routines.due_triggers(office.clock.now())
    second = [t.routine_id for t in due if t.routine_id in ours][1]
    announced: list[str] = []

    async def on_created(event: TaskCreated) -> None:
        announced.append(event.task.id)

    office.service.bus.subscribe(on_created, TaskCreated)
    real_gate = office.store.routines.gate

    def gate_on_a_full_disk(run_id: int, **kwargs: Any) -> Any:
        if kwargs["routine_id"] != second:
            return real_gate(run_id, **kwargs)
        with office.store.db.write() as conn:  # the batch's own connection
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
            conn.exec_driver_sql(f"PRAGMA max_page_count={pages}")
            try:
                return real_gate(run_id, **kwargs)
            finally:
                conn.exec_driver_sql("PRAGMA max_page_count=1073741823")

    monkeypatch.setattr(office.store.routines, "gate", gate_on_a_full_disk)
    with pytest.raises(BatchLostError):
        await office.service.cron_firer.fire_due()
    assert announced == []
    assert all(_runs(office, routine) == [] for routine in routines)

    monkeypatch.setattr(office.store.routines, "gate", real_gate)
    made = await office.service.cron_firer.fire_due()
    assert sorted(r.routine_id for r in made if r.routine_id in ours) == sorted(ours)
    assert all(len(_runs(office, routine)) == 1 for routine in routines)
    tasks = {t.id for t in office.store.office.list_tasks(office.workspace.id, limit=500).items}
    assert len(announced) == 3
    assert set(announced) <= tasks


async def test_an_announcement_that_fails_does_not_stop_the_others(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break-it: a failing announcement ended the pass, so the rest of the batch's tasks
    were committed but never announced (their assignees were not woken)."""
    routines = [
        (await _scheduled(office, name=f"Heavy {n}", task_template={"title": f"Job {n}"}))[0]
        for n in range(4)
    ]
    failing = routines[1].id
    dispatcher = office.service.cron_firer._dispatcher
    real_announce = dispatcher.announce
    announced: list[str] = []

    async def announce(dispatched: Any) -> RoutineRun:
        if dispatched.run.routine_id == failing:
            raise RuntimeError("the bus is gone")
        announced.append(dispatched.run.routine_id)
        return await real_announce(dispatched)

    monkeypatch.setattr(dispatcher, "announce", announce)
    office.clock.advance(timedelta(minutes=5))
    await office.service.cron_firer.fire_due()
    assert sorted(announced) == sorted(r.id for r in routines if r.id != failing)
