"""Budgets on both databases: cost events, alerts, exceed actions, precedence, resume."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from helpers import Office
from office_scheduler.budgets.projection import median_cost
from office_scheduler.config import Settings
from office_scheduler.domain.budgets import BudgetAction, BudgetPeriod, BudgetScope
from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.events import BudgetThresholdCrossed
from office_scheduler.domain.execution import Launch, Outcome, Usage
from office_scheduler.domain.models import ExecutorConfig, Task, WorkspaceSettings
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    InboxKind,
    OutcomeStatus,
    RunReason,
    RunStatus,
    WakeSource,
    WorkflowKind,
)
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor

HOLD = timedelta(seconds=5)
#: One cent in subcents (the unit of ``Usage.cost_subcents``).
CENT = 100


class CostExecutor(ScriptedExecutor):
    """Succeeds every launch; an agent's next scripted usage is reported with it."""

    def __init__(self) -> None:
        super().__init__(default=self._outcome)
        self.usage: dict[str, deque[Usage]] = defaultdict(deque)

    def charge(self, agent_id: str, *usages: Usage) -> None:
        """Report ``usages`` (in order) for the agent's next launches."""
        self.usage[agent_id].extend(usages)

    def _outcome(self, launch: Launch) -> Outcome:
        queued = self.usage[launch.agent_id]
        usage = queued.popleft() if queued else Usage()
        return Outcome(status=OutcomeStatus.SUCCEEDED, usage=usage)

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        """Record the launch and report the agent's next usage."""
        return await super().run(launch, sink)


@pytest.fixture
async def office(database: Database, clock: FakeClock, tmp_path: Path) -> AsyncIterator[Office]:
    """The usual small office, with an executor that reports scripted costs and no
    coordinator heartbeat (only the tested wakes create runs)."""
    store = Store.from_database(database)
    executor = CostExecutor()
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    service = Service(settings, clock=clock, executors={"command": executor}, store=store)
    now = clock.now()
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            default_executor="fake",
            executors={"fake": ExecutorConfig(name="fake", argv=("agent",))},
        ),
        now=now,
    )
    coordinator = store.office.create_agent(
        workspace_id=workspace.id, name="boss", role=AgentRole.COORDINATOR, now=now
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=now, cooldown=timedelta()
    )
    other = store.office.create_agent(
        workspace_id=workspace.id, name="bob", role=AgentRole.WORKER, now=now, cooldown=timedelta()
    )
    project = store.office.create_project(
        workspace_id=workspace.id, name="site", directory=str(tmp_path / "site"), now=now
    )
    for routine in store.routines.list_routines(workspace.id):
        store.routines.delete_routine(routine.id)
    yield Office(
        service=service,
        clock=clock,
        executor=executor,
        workspace=workspace,
        coordinator=coordinator,
        worker=worker,
        other_worker=other,
        project=project,
    )
    await service.stop()


def _charge(office: Office, agent_id: str, *cents: int) -> None:
    executor = office.executor
    assert isinstance(executor, CostExecutor)
    executor.charge(
        agent_id,
        *(Usage(input_tokens=1000, output_tokens=100, cost_subcents=c * CENT) for c in cents),
    )


async def _task(
    office: Office, agent_id: str | None = None, *, project: bool = True, title: str = "work"
) -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        project_id=office.project.id if project else None,
        workflow=WorkflowKind.OFFICE,
        assignee_agent_id=agent_id or office.worker.id,
    )


async def _drain(office: Office) -> None:
    office.clock.advance(HOLD)
    await office.service.run_until_idle()


async def _work(office: Office, agent_id: str | None = None, **fields: object) -> Task:
    """One task for the agent, processed to its end."""
    task = await _task(office, agent_id, **fields)  # type: ignore[arg-type]
    await _drain(office)
    return task


def _runs(office: Office, agent_id: str) -> list[tuple[RunStatus, RunReason | None]]:
    runs = sorted(office.store.listing.list_runs(agent_id=agent_id).items, key=lambda r: r.id)
    return [(run.status, run.reason) for run in runs]


def _inbox(office: Office, kind: InboxKind) -> list[str]:
    return [
        i.dedupe_key or ""
        for i in office.store.runlog.list_inbox(office.workspace.id)
        if i.kind is kind
    ]


def _alert_wakes(office: Office) -> list[dict[str, object]]:
    page = office.store.listing.list_wakeups(agent_id=office.coordinator.id, limit=500)
    return [w.payload for w in page.items if w.source is WakeSource.BUDGET_ALERT]


async def _policy(
    office: Office,
    scope: BudgetScope,
    *,
    limit_cents: int = 100,
    action: BudgetAction = BudgetAction.PAUSE_AGENT,
    scope_id: str | None = None,
    period: BudgetPeriod = BudgetPeriod.MONTHLY,
) -> str:
    policy = await office.service.budgets.create_policy(
        office.workspace.id,
        scope_kind=scope,
        scope_id=scope_id,
        limit_cents=limit_cents,
        action_on_exceed=action,
        period=period,
    )
    return policy.id


async def test_cost_events_record_priced_and_unpriced_usage(office: Office) -> None:
    executor = office.executor
    assert isinstance(executor, CostExecutor)
    executor.charge(
        office.worker.id,
        Usage(input_tokens=1200, output_tokens=300, cost_subcents=4321, model="m-1"),
        Usage(input_tokens=800, output_tokens=50),  # tokens, no price
        Usage(),  # nothing reported: no cost event
    )
    for _ in range(3):
        await _work(office)
    report = await office.service.budgets.spend_report(office.workspace.id)
    total = report.items[0]
    assert (total.scope_kind, total.scope_id) == (BudgetScope.WORKSPACE, office.workspace.id)
    assert (total.cost_subcents, total.priced_count, total.unpriced_count) == (4321, 1, 1)
    assert (total.input_tokens, total.output_tokens) == (2000, 350)
    by_scope = {(item.scope_kind, item.scope_id): item for item in report.items}
    assert by_scope[(BudgetScope.AGENT, office.worker.id)].unpriced_count == 1
    assert by_scope[(BudgetScope.PROJECT, office.project.id)].cost_subcents == 4321
    assert report.period == "2026-11"
    lifetime = await office.service.budgets.spend_report(office.workspace.id, "lifetime")
    assert lifetime.items[0].cost_subcents == 4321
    december = await office.service.budgets.spend_report(office.workspace.id, "2026-12")
    assert december.items[0].priced_count == 0
    with pytest.raises(InvalidInputError) as bad:
        await office.service.budgets.spend_report(office.workspace.id, "last week")
    assert bad.value.field == "period"


async def test_a_scope_with_a_policy_is_reported_before_it_spends(office: Office) -> None:
    """Regression: the spend report left out budgeted scopes that had spent nothing yet."""
    await office.service.budgets.create_policy(
        office.workspace.id, scope_kind="agent", scope_id=office.worker.id, limit_cents=500
    )
    report = await office.service.budgets.spend_report(office.workspace.id)
    scopes = [(item.scope_kind, item.scope_id, item.cost_subcents) for item in report.items]
    assert scopes == [
        (BudgetScope.WORKSPACE, office.workspace.id, 0),
        (BudgetScope.AGENT, office.worker.id, 0),
    ]
    assert report.policies[(BudgetScope.AGENT, office.worker.id)].limit_cents == 500


async def test_one_alert_per_period_and_again_next_month(office: Office) -> None:
    events: list[BudgetThresholdCrossed] = []

    async def seen(event: BudgetThresholdCrossed) -> None:
        events.append(event)

    office.service.bus.subscribe(seen, BudgetThresholdCrossed)
    policy_id = await _policy(
        office, BudgetScope.AGENT, scope_id=office.worker.id, action=BudgetAction.NOTIFY
    )
    _charge(office, office.worker.id, 50, 35, 5, 85)
    await _work(office)
    assert _alert_wakes(office) == []
    await _work(office)  # 85 %: the alert
    assert _alert_wakes(office) == [{"agent_instance_id": office.worker.id, "budget_pct": 85}]
    assert _inbox(office, InboxKind.BUDGET_ALERT) == [f"budget_alert:{policy_id}:2026-11"]
    await _work(office)  # 90 %: same period, nothing more
    assert len(_alert_wakes(office)) == 1
    assert (
        len(office.store.runlog.list_activity(office.workspace.id, kind="budget_alert").items) == 1
    )
    office.clock.advance(timedelta(days=3))  # December
    await _work(office)
    assert _alert_wakes(office)[-1] == {"agent_instance_id": office.worker.id, "budget_pct": 85}
    assert len(_alert_wakes(office)) == 2
    assert sorted(_inbox(office, InboxKind.BUDGET_ALERT)) == [
        f"budget_alert:{policy_id}:2026-11",
        f"budget_alert:{policy_id}:2026-12",
    ]
    assert [(e.period, e.budget_pct, e.exceeded) for e in events] == [
        ("2026-11", 85, False),
        ("2026-12", 85, False),
    ]
    # The coordinator ran the alert wakes (taskless runs); the worker was never paused.
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE


async def test_pause_agent_pauses_and_ends_queued_runs(office: Office) -> None:
    await _policy(office, BudgetScope.AGENT, scope_id=office.worker.id)
    _charge(office, office.worker.id, 120)
    await _task(office, title="first")
    office.clock.advance(timedelta(milliseconds=1))
    await _task(office, title="second")
    await _drain(office)
    agent = office.store.office.get_agent(office.worker.id)
    assert (agent.status, agent.paused_reason) == (AgentStatus.PAUSED, "budget_exceeded")
    assert _runs(office, office.worker.id) == [
        (RunStatus.FINISHED, RunReason.COMPLETED),
        (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED),
    ]
    assert len(office.executor.launches) == 1
    assert _alert_wakes(office) == [{"agent_instance_id": office.worker.id, "budget_pct": 120}]
    assert len(_inbox(office, InboxKind.BUDGET_ALERT)) == 1
    assert len(_inbox(office, InboxKind.BUDGET_EXCEEDED)) == 1
    [paused] = office.store.runlog.list_activity(
        office.workspace.id, kind="budget_agent_paused"
    ).items
    assert paused.agent_id == office.worker.id
    skipped = office.store.runlog.list_activity(office.workspace.id, kind="run_skipped").items
    assert [entry.data["reason"] for entry in skipped] == ["budget_exceeded"]


async def test_a_run_claimed_before_the_pause_ends_budget_exceeded(office: Office) -> None:
    await _task(office)
    office.clock.advance(HOLD)
    [run] = office.store.queue.claim(
        now=office.clock.now(),
        node_id=office.service.settings.node_id,
        lease=timedelta(60),
        limit=5,
    )
    paused, ended = office.store.budgets.pause_agent_for_budget(
        office.worker.id, now=office.clock.now()
    )
    assert (paused, ended) == (True, [])
    await office.service.runs._process(run)
    assert _runs(office, office.worker.id) == [(RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)]
    assert office.executor.launches == []


async def test_block_new_runs_skips_without_pausing(office: Office) -> None:
    policy_id = await _policy(office, BudgetScope.WORKSPACE, action=BudgetAction.BLOCK_NEW_RUNS)
    _charge(office, office.worker.id, 100)
    await _work(office)
    assert _inbox(office, InboxKind.BUDGET_EXCEEDED) == [f"budget_exceeded:{policy_id}:2026-11:100"]
    await _work(office, office.other_worker.id)
    await _work(office)
    assert _runs(office, office.other_worker.id) == [
        (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)
    ]
    assert _runs(office, office.worker.id)[-1] == (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)
    for agent_id in (office.worker.id, office.other_worker.id):
        assert office.store.office.get_agent(agent_id).status is AgentStatus.IDLE
    assert len(office.executor.launches) == 1
    assert len(_inbox(office, InboxKind.BUDGET_EXCEEDED)) == 1


async def test_notify_only_leaves_an_inbox_item(office: Office) -> None:
    await _policy(office, BudgetScope.AGENT, scope_id=office.worker.id, action=BudgetAction.NOTIFY)
    _charge(office, office.worker.id, 150, 10)
    await _work(office)
    await _work(office)
    assert _runs(office, office.worker.id) == [(RunStatus.FINISHED, RunReason.COMPLETED)] * 2
    assert len(_inbox(office, InboxKind.BUDGET_EXCEEDED)) == 1
    assert (
        len(office.store.runlog.list_activity(office.workspace.id, kind="budget_exceeded").items)
        == 1
    )
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE


async def test_workspace_then_project_then_agent(office: Office) -> None:
    budgets = office.service.budgets
    ws_policy = await _policy(
        office, BudgetScope.WORKSPACE, limit_cents=1000, action=BudgetAction.BLOCK_NEW_RUNS
    )
    await _policy(
        office, BudgetScope.PROJECT, scope_id=office.project.id, action=BudgetAction.BLOCK_NEW_RUNS
    )
    agent_policy = await _policy(
        office, BudgetScope.AGENT, scope_id=office.worker.id, limit_cents=5000
    )
    _charge(office, office.worker.id, 100)
    await _work(office)  # the project's budget is spent
    _charge(office, office.other_worker.id, 1000)
    await _work(office, office.other_worker.id)  # project task: blocked by the project
    await _work(office, office.other_worker.id, project=False)  # office task: runs
    assert _runs(office, office.other_worker.id) == [
        (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED),
        (RunStatus.FINISHED, RunReason.COMPLETED),
    ]
    # Now the workspace (1100 of 1000) and, after lowering it, the agent's pause budget are
    # both exceeded: the workspace is checked first, so its block decides and nobody pauses.
    await budgets.update_policy(agent_policy, limit_cents=1)
    await _work(office, project=False)
    assert _runs(office, office.worker.id)[-1] == (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE
    await budgets.delete_policy(ws_policy)
    await _work(office, project=False)
    assert _runs(office, office.worker.id)[-1] == (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.PAUSED
    workers = {office.worker.id, office.other_worker.id}
    assert len([x for x in office.executor.launches if x.agent_id in workers]) == 2


async def test_raising_the_limit_allows_resume_and_rearms(office: Office) -> None:
    policy_id = await _policy(office, BudgetScope.AGENT, scope_id=office.worker.id)
    budgets = office.service.budgets
    _charge(office, office.worker.id, 100)
    await _work(office)
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.PAUSED
    blocking = await budgets.blocking_policy(office.worker.id)
    assert blocking is not None
    assert blocking.id == policy_id
    assert await budgets.blocking_policy(office.other_worker.id) is None
    raised = await budgets.update_policy(policy_id, limit_cents=300)
    assert (raised.limit_cents, raised.exceeded_period, raised.alerted_period) == (
        300,
        None,
        "2026-11",
    )
    assert await budgets.blocking_policy(office.worker.id) is None
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), status=AgentStatus.IDLE
    )
    # 100 spent + the expected 100 (the median run) stays under 300, so the run launches;
    # it costs 200: 300 of 300, the action fires again.
    _charge(office, office.worker.id, 200)
    await _work(office)
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.PAUSED
    assert len(_inbox(office, InboxKind.BUDGET_EXCEEDED)) == 2


async def test_recovery_sweep_skips_a_blocked_agent(office: Office) -> None:
    await _policy(
        office, BudgetScope.AGENT, scope_id=office.worker.id, action=BudgetAction.BLOCK_NEW_RUNS
    )
    _charge(office, office.worker.id, 100)
    await _work(office)
    lost = office.store.office.create_task(
        workspace_id=office.workspace.id,
        title="lost",
        now=office.clock.now(),
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    other = office.store.office.create_task(
        workspace_id=office.workspace.id,
        title="lost too",
        now=office.clock.now(),
        project_id=office.project.id,
        assignee_agent_id=office.other_worker.id,
    )
    assert await office.service.maintenance.recovery_sweep() == 1
    assert office.store.listing.list_runs(task_id=lost.id).items == []
    assert len(office.store.listing.list_runs(task_id=other.id).items) == 1


async def test_policy_validation(office: Office) -> None:
    budgets = office.service.budgets
    ws = office.workspace.id
    cases: list[tuple[dict[str, object], str]] = [
        ({"scope_kind": "agent", "scope_id": office.worker.id, "limit_cents": 0}, "limit_cents"),
        (
            {
                "scope_kind": "agent",
                "scope_id": office.worker.id,
                "limit_cents": 5,
                "alert_threshold_pct": 0,
            },
            "alert_threshold_pct",
        ),
        (
            {
                "scope_kind": "agent",
                "scope_id": office.worker.id,
                "limit_cents": 5,
                "alert_threshold_pct": 101,
            },
            "alert_threshold_pct",
        ),
        ({"scope_kind": "team", "limit_cents": 5}, "scope_kind"),
        ({"scope_kind": "agent", "limit_cents": 5}, "scope_id"),
        (
            {
                "scope_kind": "agent",
                "scope_id": office.worker.id,
                "limit_cents": 5,
                "period": "weekly",
            },
            "period",
        ),
        (
            {
                "scope_kind": "agent",
                "scope_id": office.worker.id,
                "limit_cents": 5,
                "action_on_exceed": "explode",
            },
            "action_on_exceed",
        ),
    ]
    for body, field in cases:
        with pytest.raises(InvalidInputError) as bad:
            await budgets.create_policy(ws, **body)  # type: ignore[arg-type]
        assert bad.value.field == field, body
    with pytest.raises(NotFoundError):
        await budgets.create_policy(ws, scope_kind="project", scope_id="nope", limit_cents=5)
    await budgets.create_policy(ws, scope_kind="workspace", limit_cents=5)
    with pytest.raises(ConflictError):
        await budgets.create_policy(ws, scope_kind="workspace", limit_cents=9)
    [policy] = await budgets.list_policies(ws)
    assert (policy.alert_threshold_pct, policy.period, policy.limit_subcents) == (
        80,
        BudgetPeriod.MONTHLY,
        500,
    )
    with pytest.raises(InvalidInputError):
        await budgets.update_policy(policy.id, limit_cents=-1)
    with pytest.raises(InvalidInputError):
        await budgets.update_policy(policy.id, scope_id="x")
    await budgets.delete_policy(policy.id)
    with pytest.raises(NotFoundError):
        await budgets.get_policy(policy.id)


class _Crash(RuntimeError):
    """Stands in for the process dying between two steps."""


def _spend(office: Office, agent_id: str, cents: int) -> None:
    office.store.budgets.add_cost_event(
        workspace_id=office.workspace.id,
        agent_id=agent_id,
        input_tokens=10,
        output_tokens=10,
        cost_subcents=cents * CENT,
        priced=True,
        now=office.clock.now(),
    )


async def test_an_alert_survives_a_crash_and_its_wake_is_redriven(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 4 item 4): the marker committed first, so a crash before the inbox
    item, activity and coordinator wake lost the notice for the whole period."""
    policy_id = await _policy(
        office, BudgetScope.AGENT, scope_id=office.worker.id, action=BudgetAction.NOTIFY
    )
    notifier = office.service.budgets.notifier

    async def crash(_request: object) -> object:
        raise _Crash

    monkeypatch.setattr(notifier, "_enqueue", crash)
    _spend(office, office.worker.id, 90)
    with pytest.raises(_Crash):
        await office.service.budgets.check_after_cost(office.worker.id, project_id=None)
    monkeypatch.undo()
    key = f"budget_alert:{policy_id}:2026-11"
    assert _inbox(office, InboxKind.BUDGET_ALERT) == [key]
    (entry,) = office.store.runlog.list_activity(office.workspace.id, kind="budget_alert").items
    assert entry.data["coordinator_id"] == office.coordinator.id
    assert _alert_wakes(office) == []

    await office.service.maintenance.tick()
    assert _alert_wakes(office) == [{"agent_instance_id": office.worker.id, "budget_pct": 90}]
    assert await office.service.budgets.redrive(office.clock.now()) == 0
    # The spend check does not fire the alert a second time.
    await office.service.budgets.check_after_cost(office.worker.id, project_id=None)
    assert len(_alert_wakes(office)) == 1
    assert len(_inbox(office, InboxKind.BUDGET_ALERT)) == 1


async def test_a_crossing_while_paused_by_hand_is_still_reported_and_blocks_resume(
    office: Office,
) -> None:
    """Regression (item 7): a manual pause hid the crossing, and resume skipped the check."""
    policy_id = await _policy(office, BudgetScope.AGENT, scope_id=office.worker.id)
    await office.service.agents.pause(office.worker.id, actor="user")
    _spend(office, office.worker.id, 150)
    await office.service.budgets.check_after_cost(office.worker.id, project_id=None)

    (key,) = _inbox(office, InboxKind.BUDGET_EXCEEDED)
    assert key.startswith(f"budget_exceeded:{policy_id}:2026-11:")
    (entry,) = office.store.runlog.list_activity(office.workspace.id, kind="budget_exceeded").items
    assert entry.agent_id == office.worker.id
    agent = office.store.office.get_agent(office.worker.id)
    assert (agent.status, agent.paused_reason) == (AgentStatus.PAUSED, "manual")
    with pytest.raises(ConflictError) as refused:
        await office.service.agents.resume(
            office.worker.id, budget_check=office.service.budgets.blocking_policy
        )
    assert refused.value.field == "status"
    assert policy_id in refused.value.message
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.PAUSED
    await office.service.budgets.update_policy(policy_id, limit_cents=1000)
    resumed = await office.service.agents.resume(
        office.worker.id, budget_check=office.service.budgets.blocking_policy
    )
    assert resumed.status is AgentStatus.IDLE


# -- the projection: spend so far plus the run's expected cost ------------------------------


def _run_events(office: Office, kind: str) -> list[dict[str, object]]:
    runs = office.store.listing.list_runs(agent_id=office.worker.id).items
    return [
        event.data
        for run in runs
        for event in office.store.runlog.list_run_events(run.id)
        if event.kind == kind
    ]


@pytest.mark.parametrize("action", [BudgetAction.PAUSE_AGENT, BudgetAction.BLOCK_NEW_RUNS])
async def test_a_run_that_would_cross_a_blocking_limit_is_not_launched(
    office: Office, action: BudgetAction
) -> None:
    await _policy(office, BudgetScope.WORKSPACE, limit_cents=1000, action=action)
    _charge(office, office.worker.id, 100, 90, 110)  # the median run costs 100 cents
    for title in ("one", "two", "three"):
        await _work(office, title=title)
    office.clock.advance(timedelta(minutes=1))
    _spend(office, office.worker.id, 650)  # 950 of 1000 cents: 95 %
    await _work(office, title="four")
    assert _runs(office, office.worker.id)[-1] == (RunStatus.FINISHED, RunReason.BUDGET_EXCEEDED)
    assert len(office.executor.launches) == 3
    [event] = _run_events(office, "budget_exceeded")
    assert (event["projected"], event["expected_run_cents"], event["budget_pct"]) == (True, 100, 95)
    # Nothing fired: the limit is not reached, so no pause, no inbox item.
    assert office.store.office.get_agent(office.worker.id).status is AgentStatus.IDLE
    assert _inbox(office, InboxKind.BUDGET_EXCEEDED) == []


async def test_a_run_that_stays_under_the_limit_launches(office: Office) -> None:
    await _policy(office, BudgetScope.AGENT, scope_id=office.worker.id, limit_cents=1000)
    _charge(office, office.worker.id, 100)
    await _work(office, title="one")
    _spend(office, office.worker.id, 700)  # 800 + the expected 100 stays under 1000
    await _work(office, title="two")
    assert [reason for _status, reason in _runs(office, office.worker.id)] == [
        RunReason.COMPLETED,
        RunReason.COMPLETED,
    ]


async def test_expected_run_cents_on_the_agent_wins_over_the_history(office: Office) -> None:
    await _policy(office, BudgetScope.WORKSPACE, limit_cents=1000)
    _spend(office, office.worker.id, 950)
    await _work(office, title="no history, no estimate")
    assert _runs(office, office.worker.id)[-1][1] is RunReason.COMPLETED
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), expected_run_cents=60
    )
    office.clock.advance(timedelta(minutes=1))
    await _work(office, title="estimated")
    assert _runs(office, office.worker.id)[-1][1] is RunReason.BUDGET_EXCEEDED
    [event] = _run_events(office, "budget_exceeded")
    assert event["expected_run_cents"] == 60


async def test_a_notify_policy_is_never_projected(office: Office) -> None:
    await _policy(office, BudgetScope.WORKSPACE, limit_cents=1000, action=BudgetAction.NOTIFY)
    _spend(office, office.worker.id, 950)
    office.store.office.update_agent(
        office.worker.id, now=office.clock.now(), expected_run_cents=500
    )
    await _work(office)
    assert _runs(office, office.worker.id)[-1][1] is RunReason.COMPLETED


def test_the_median_of_recent_priced_runs() -> None:
    assert median_cost([]) == 0
    assert median_cost([300, 100, 200]) == 200
    assert median_cost([100, 201]) == 151  # half up
