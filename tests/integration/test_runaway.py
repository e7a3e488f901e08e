"""Causation and runaway limits (DESIGN §15), on both databases.

Agents are scripted: each launch runs a coroutine that acts with its run's token, as a
launched agent calling the API would (``causation.acting(run_id)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.config import Settings
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import ExecutorConfig, Task, WakeupRequest, WorkspaceSettings
from office_scheduler.domain.runaway import RunawayLimits, check_limits
from office_scheduler.domain.status import (
    AgentRole,
    AuthorKind,
    HoldReason,
    InboxKind,
    IntakeOutcome,
    OutcomeStatus,
    RunStatus,
    WakeSource,
    WakeupStatus,
)
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.intake.causation import acting
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import runs, wakeup_requests
from office_scheduler.testing import FakeClock

Behaviour = Callable[[Launch], Awaitable[None]]


class ActingExecutor:
    """Runs the behaviour of the launched agent under its run's causation, then succeeds."""

    def __init__(self) -> None:
        self.behaviours: dict[str, Behaviour] = {}
        self.launches: list[Launch] = []

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        self.launches.append(launch)
        await sink.started(4242)
        behaviour = self.behaviours.get(launch.agent_id)
        if behaviour is not None:
            with acting(launch.run_id):
                await behaviour(launch)
        return Outcome(status=OutcomeStatus.SUCCEEDED)


@pytest.fixture
async def office(
    database: Database, clock: FakeClock, tmp_path: Path
) -> AsyncIterator[tuple[Office, ActingExecutor]]:
    store = Store.from_database(database)
    executor = ActingExecutor()
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    service = Service(settings, clock=clock, executors={"command": executor}, store=store)
    now = clock.now()
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5),
            default_executor="fake",
            executors={"fake": ExecutorConfig(name="fake", argv=("agent",))},
        ),
        now=now,
    )
    agents = [
        store.office.create_agent(workspace_id=workspace.id, name=name, role=role, now=now)
        for name, role in (
            ("boss", AgentRole.COORDINATOR),
            ("ann", AgentRole.WORKER),
            ("bob", AgentRole.WORKER),
        )
    ]
    project = store.office.create_project(
        workspace_id=workspace.id, name="site", directory=str(tmp_path / "site"), now=now
    )
    yield (
        Office(
            service=service,
            clock=clock,
            executor=None,  # type: ignore[arg-type]
            workspace=workspace,
            coordinator=agents[0],
            worker=agents[1],
            other_worker=agents[2],
            project=project,
        ),
        executor,
    )
    await service.stop()


async def _settle(office: Office, rounds: int = 40) -> None:
    """Let every due run go (cooldowns and coalescing holds included)."""
    for _ in range(rounds):
        office.clock.advance(timedelta(seconds=15))
        await office.service.run_until_idle()


async def _task(office: Office, title: str, assignee: str) -> Task:
    with acting(True):
        return await office.service.office.create_task(
            workspace_id=office.workspace.id,
            title=title,
            project_id=office.project.id,
            assignee_agent_id=assignee,
        )


def _wakeups(office: Office, **where: object) -> list[WakeupRequest]:
    from office_scheduler.store.rows import wakeup_from_row

    query = sa.select(wakeup_requests).order_by(wakeup_requests.c.id)
    for name, value in where.items():
        query = query.where(wakeup_requests.c[name] == value)
    with office.store.db.read() as conn:
        return [wakeup_from_row(row) for row in conn.execute(query).mappings()]


def _run_count(
    office: Office, agent_id: str | None = None, source: WakeSource | None = None
) -> int:
    query = sa.select(sa.func.count()).select_from(runs)
    if agent_id is not None:
        query = query.where(runs.c.agent_id == agent_id)
    if source is not None:
        query = query.where(runs.c.source == source.value)
    with office.store.db.read() as conn:
        return int(conn.execute(query).scalar_one())


def _held_items(office: Office) -> list[object]:
    return list(office.store.runlog.list_inbox(office.workspace.id, kind=InboxKind.WAKE_HELD))


async def test_a_self_waking_agent_stops_at_max_self_wakes_per_hour_with_one_inbox_item(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, executor = office
    ann = o.worker.id

    async def wake_myself_twice(launch: Launch) -> None:
        for n in range(2):
            await o.service.wake(
                ann, source=WakeSource.SELF, idempotency_key=f"again-{launch.run_id}-{n}"
            )

    executor.behaviours[ann] = wake_myself_twice
    with acting(True):
        await o.service.wake(ann, payload={"go": 1})
    await _settle(o)

    selfs = _wakeups(o, source=WakeSource.SELF.value)
    assert len(selfs) == 8
    assert [w.status for w in selfs[:6]] == [WakeupStatus.CLAIMED, WakeupStatus.COALESCED] * 3
    assert [(w.status, w.status_reason) for w in selfs[6:]] == [
        (WakeupStatus.HELD, HoldReason.SELF_WAKE_LIMIT.value)
    ] * 2
    assert all(w.run_id is None for w in selfs[6:])
    assert _run_count(o, ann) == 4  # the person's run and three runs of six self-wakes
    [item] = _held_items(o)
    assert item.agent_id == ann  # type: ignore[attr-defined]
    assert item.data["reason"] == "self_wake_limit"  # type: ignore[attr-defined]
    assert item.data["held_count"] == 2  # type: ignore[attr-defined]
    assert [w.causation_depth for w in selfs] == [1, 1, 2, 2, 3, 3, 4, 4]
    held_entries = o.store.runlog.list_activity(o.workspace.id, kind="wake_held").items
    assert [entry.data["wakeup_id"] for entry in held_entries] == [w.id for w in selfs[:5:-1]]


async def _ping_pong(o: Office, executor: ActingExecutor) -> tuple[Task, Task]:
    ann, bob = o.worker.id, o.other_worker.id
    t1 = await _task(o, "Ann's side", ann)
    t2 = await _task(o, "Bob's side", bob)

    def answer(on: Task, me: str) -> Behaviour:
        async def behaviour(launch: Launch) -> None:
            await o.service.office.add_comment(
                on.id,
                f"over to you (run {launch.run_id})",
                author_kind=AuthorKind.AGENT,
                author_agent_id=me,
            )

        return behaviour

    await _settle(o)  # the assignment wakes (a person's) run first and do nothing
    executor.behaviours[ann] = answer(t2, ann)
    executor.behaviours[bob] = answer(t1, bob)
    return t1, t2


async def test_two_agents_commenting_back_and_forth_stop_at_max_causation_depth(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, executor = office
    t1, _ = await _ping_pong(o, executor)
    before = _run_count(o, source=WakeSource.COMMENT)
    with acting(True):
        await o.service.office.add_comment(t1.id, "please sort this out")
    await _settle(o)

    # The person's comment (depth 0) and twelve answers: depths 0 to 12, then held.
    assert _run_count(o, source=WakeSource.COMMENT) - before == 13
    [held] = _wakeups(o, status=WakeupStatus.HELD.value)
    assert held.status_reason == HoldReason.DEPTH_LIMIT.value
    assert (held.causation_depth, held.human_rooted) == (13, True)
    [item] = _held_items(o)
    assert item.agent_id == held.agent_id  # type: ignore[attr-defined]
    chain = item.data["chain"]  # type: ignore[attr-defined]
    assert chain[0]["run_id"] == held.caused_by_run_id
    assert [link["depth"] for link in chain] == list(range(12, -1, -1))
    assert "depth 12" in item.body  # type: ignore[attr-defined]
    assert "←" in item.body  # type: ignore[attr-defined]
    with o.store.db.read() as conn:
        depths = sorted(
            conn.execute(sa.select(runs.c.causation_depth).where(runs.c.id > 0)).scalars()
        )
    assert max(depths) == 12

    # A person's comment after that starts a new chain at depth 0.
    with acting(True):
        await o.service.office.add_comment(t1.id, "start again")
    fresh = _wakeups(o, source=WakeSource.COMMENT.value)[-1]
    assert (fresh.causation_depth, fresh.human_rooted, fresh.caused_by_run_id) == (0, True, None)
    assert fresh.status is WakeupStatus.CLAIMED
    run = o.store.queue.get_run(fresh.run_id)  # type: ignore[arg-type]
    assert (run.causation_depth, run.caused_by_run_id, run.human_rooted) == (0, None, True)


async def test_release_enqueues_the_held_wakes_exactly_once_as_a_person(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, executor = office
    ann = o.worker.id
    o.store.runaway.set_agent_limits(ann, {"max_self_wakes_per_hour": 1}, now=o.clock.now())

    async def wake_myself(launch: Launch) -> None:
        await o.service.wake(ann, source=WakeSource.SELF, idempotency_key=f"s-{launch.run_id}")

    executor.behaviours[ann] = wake_myself
    with acting(True):
        await o.service.wake(ann)
    await _settle(o, rounds=6)
    [held] = _wakeups(o, status=WakeupStatus.HELD.value)
    executor.behaviours.clear()
    [item] = _held_items(o)

    results = await asyncio.gather(
        o.service.releases.release([held.id]),
        o.service.releases.release([held.id]),
        o.service.releases.release_item(item.id),  # type: ignore[attr-defined]
    )
    outcomes = [r for r in results[0] + results[1] + results[2][1] if r.result is not None]
    assert len(outcomes) == 1
    [done] = outcomes
    assert done.result is not None
    assert done.result.outcome in (IntakeOutcome.CREATED, IntakeOutcome.COALESCED)
    successor = done.result.request
    assert (successor.causation_depth, successor.human_rooted) == (0, True)
    assert successor.idempotency_key == f"release:{held.id}"
    released = o.store.queue.get_wakeup(held.id)
    assert released.status is WakeupStatus.RELEASED
    assert released.run_id == successor.run_id
    assert results[2][0].status.value == "resolved"
    assert await o.service.releases.release([held.id]) == [type(done)(wakeup=released, result=None)]
    assert len(_wakeups(o, idempotency_key=f"release:{held.id}")) == 1
    await _settle(o, rounds=3)
    assert o.store.queue.get_run(successor.run_id).status is RunStatus.FINISHED  # type: ignore[arg-type]


async def test_a_routine_capped_per_day_holds_the_rest(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, _ = office
    o.store.runaway.set_workspace_limits(
        o.workspace.id, {"max_routine_runs_per_day": 2}, now=o.clock.now()
    )
    routine = await o.service.routines.create_routine(
        o.workspace.id,
        {"name": "Poll", "assignee_agent_id": o.worker.id, "concurrency_policy": "always_enqueue"},
    )
    await o.service.routines.add_trigger(
        routine.id, {"kind": "schedule", "cron_expression": "*/5 * * * *", "timezone": ""}
    )
    for _ in range(5):
        o.clock.advance(timedelta(minutes=5))
        await o.service.run_until_idle()
        await _settle(o, rounds=2)
    # (The coordinator's heartbeat routine is capped as well: only this one is looked at.)
    routine_wakes = [
        w
        for w in _wakeups(o, source=WakeSource.ROUTINE.value)
        if w.payload["routine_id"] == routine.id
    ]
    assert len(routine_wakes) == 5
    assert [w.status for w in routine_wakes[:2]] == [WakeupStatus.CLAIMED] * 2
    assert {(w.status, w.status_reason) for w in routine_wakes[2:]} == {
        (WakeupStatus.HELD, HoldReason.ROUTINE_DAILY_LIMIT.value)
    }
    assert _run_count(o, o.worker.id) == 2
    [item] = [i for i in _held_items(o) if i.agent_id == o.worker.id]  # type: ignore[attr-defined]
    assert item.data["held_count"] == 3  # type: ignore[attr-defined]
    # A person firing it by hand is not held.
    with acting(True):
        fired = await o.service.routines.fire_manual(routine.id)
    assert fired is not None
    assert fired.linked_run_id is not None
    assert o.store.queue.get_run(fired.linked_run_id).source is WakeSource.ROUTINE


async def test_the_no_progress_rule_holds_the_fourth_identical_run(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, executor = office
    ann = o.worker.id
    task = await _task(o, "Spin", ann)

    async def poke_myself(launch: Launch) -> None:
        await o.service.wake(
            ann, source=WakeSource.SELF, task_id=task.id, idempotency_key=f"p-{launch.run_id}"
        )

    executor.behaviours[ann] = poke_myself
    await _settle(o)
    task_runs = [r for r in _wakeups(o, task_id=task.id) if r.run_id is not None]
    held = _wakeups(o, status=WakeupStatus.HELD.value)
    assert [(w.status_reason, w.source) for w in held] == [
        (HoldReason.NO_PROGRESS.value, WakeSource.SELF)
    ]
    # The assignment's run (a person's), then three identical runs the agent caused.
    assert _run_count(o, ann) == 4
    assert len({w.run_id for w in task_runs}) == 4
    [item] = _held_items(o)
    assert item.task_id == task.id  # type: ignore[attr-defined]
    assert "changed nothing" in item.data["detail"]  # type: ignore[attr-defined]


async def test_progress_by_someone_else_keeps_the_agent_going(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, executor = office
    ann = o.worker.id
    task = await _task(o, "Spin", ann)
    seen: list[int] = []

    async def poke_myself(launch: Launch) -> None:
        seen.append(launch.run_id)
        if len(seen) < 6:
            await o.service.wake(
                ann, source=WakeSource.SELF, task_id=task.id, idempotency_key=f"p-{launch.run_id}"
            )
        if len(seen) == 3:
            await o.service.office.add_comment(
                task.id,
                "reviewer note",
                author_kind=AuthorKind.AGENT,
                author_agent_id=o.other_worker.id,
            )

    executor.behaviours[ann] = poke_myself
    await _settle(o)
    assert len(seen) == 6
    assert _wakeups(o, status=WakeupStatus.HELD.value) == []


async def test_no_limit_ever_holds_a_wake_a_person_caused_directly(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, _ = office
    ann = o.worker.id
    o.store.runaway.set_workspace_limits(
        o.workspace.id,
        {key: 0 for key in RunawayLimits().as_dict()},
        now=o.clock.now(),
    )
    task = await _task(o, "Anything", ann)
    with acting(True):
        for n in range(3):
            await o.service.wake(ann, idempotency_key=f"u{n}")
            await o.service.office.add_comment(task.id, f"note {n}")
            await o.service.queue_run(task.id)
    await _settle(o, rounds=4)
    assert _wakeups(o, status=WakeupStatus.HELD.value) == []
    assert all(w.causation_depth == 0 and w.human_rooted for w in _wakeups(o))
    # The same wake made by a run is held at once (depth 1 > 0).
    run_id = next(w.run_id for w in _wakeups(o) if w.run_id is not None)
    with acting(run_id):
        result = await o.service.wake(ann, source=WakeSource.SELF)
    assert result.outcome is IntakeOutcome.HELD
    assert result.request.causation_depth == 1


def test_limit_values_are_checked() -> None:
    assert check_limits({"max_causation_depth": 3, "max_runs_per_hour": None}) == {
        "max_causation_depth": 3,
        "max_runs_per_hour": None,
    }
    with pytest.raises(InvalidInputError) as bad:
        check_limits({"max_causation_depth": -1})
    assert bad.value.field == "max_causation_depth"
    with pytest.raises(InvalidInputError) as unknown:
        check_limits({"max_loops": 1})
    assert unknown.value.field == "max_loops"
    with pytest.raises(InvalidInputError):
        check_limits({"max_workspace_runs_per_hour": 5}, for_agent=True)
    with pytest.raises(InvalidInputError):
        check_limits({"max_runs_per_hour": True})
    limits = RunawayLimits.resolve({"max_runs_per_hour": 10}, {"max_runs_per_hour": None})
    assert limits.max_runs_per_hour is None
    assert limits.max_causation_depth == 12
    assert RunawayLimits().as_dict() == {
        "max_causation_depth": 12,
        "max_self_wakes_per_hour": 6,
        "max_runs_per_hour": 30,
        "max_workspace_runs_per_hour": 300,
        "max_routine_runs_per_day": None,
        "no_progress_runs": 3,
    }


async def test_a_heavy_routine_capped_per_day_holds_its_tasks_wakes(
    office: tuple[Office, ActingExecutor],
) -> None:
    o, _ = office
    o.store.runaway.set_agent_limits(
        o.worker.id, {"max_routine_runs_per_day": 1}, now=o.clock.now()
    )
    routine = await o.service.routines.create_routine(
        o.workspace.id,
        {
            "name": "Report",
            "assignee_agent_id": o.worker.id,
            "concurrency_policy": "always_enqueue",
            "task_template": {"title": "Report {{datetime}}"},
        },
    )
    await o.service.routines.add_trigger(
        routine.id, {"kind": "schedule", "cron_expression": "*/5 * * * *", "timezone": ""}
    )
    for _ in range(3):
        o.clock.advance(timedelta(minutes=5))
        await o.service.run_until_idle()
        await _settle(o, rounds=2)
    wakes = _wakeups(o, agent_id=o.worker.id, source=WakeSource.TASK_ASSIGNED.value)
    assert len(wakes) == 3
    assert [(w.status, w.status_reason) for w in wakes] == [
        (WakeupStatus.CLAIMED, None),
        (WakeupStatus.HELD, HoldReason.ROUTINE_DAILY_LIMIT.value),
        (WakeupStatus.HELD, HoldReason.ROUTINE_DAILY_LIMIT.value),
    ]
    assert _run_count(o, o.worker.id) == 1
