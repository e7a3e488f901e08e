"""Contract tests of OfficeStore: workspaces, projects, agents (both databases)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import ExecutorConfig, Workspace, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AgentStatus, WorkflowKind
from office_scheduler.store.engine import Database
from office_scheduler.store.office import OfficeStore
from office_scheduler.store.schema import agents, workflows, workspace_settings


@pytest.fixture
def workspace(office_store: OfficeStore, now: datetime) -> Workspace:
    return office_store.create_workspace(name="acme", settings=WorkspaceSettings(), now=now)


# --- workspaces -------------------------------------------------------------------------


def test_create_workspace_makes_three_workflows_and_settings(
    office_store: OfficeStore, database: Database, now: datetime
) -> None:
    settings = WorkspaceSettings(
        coalesce_window=timedelta(seconds=2.5),
        recovery_lookback_hours=48,
        default_executor="claude",
        executors={
            "claude": ExecutorConfig(
                name="claude", argv=("claude", "-p"), env={"A": "1"}, timeout_s=60.0
            )
        },
    )
    ws = office_store.create_workspace(
        name="acme", description="the office", settings=settings, now=now
    )
    assert ws.name == "acme"
    assert ws.description == "the office"
    assert ws.settings == settings
    assert ws.created_at == now
    assert len({ws.office_workflow_id, ws.kanban_workflow_id, ws.routine_workflow_id}) == 3
    with database.read() as conn:
        kinds = dict(
            conn.execute(
                sa.select(workflows.c.id, workflows.c.kind).where(workflows.c.workspace_id == ws.id)
            ).all()
        )
    assert kinds == {
        ws.office_workflow_id: WorkflowKind.OFFICE.value,
        ws.kanban_workflow_id: WorkflowKind.KANBAN.value,
        ws.routine_workflow_id: WorkflowKind.ROUTINE.value,
    }
    assert office_store.get_workspace(ws.id) == ws
    assert office_store.find_workspace_by_name("acme") == ws
    assert office_store.find_workspace_by_name("nope") is None


def test_workspace_errors(office_store: OfficeStore, workspace: Workspace, now: datetime) -> None:
    with pytest.raises(ConflictError) as conflict:
        office_store.create_workspace(name="acme", settings=WorkspaceSettings(), now=now)
    assert conflict.value.field == "name"
    with pytest.raises(InvalidInputError) as blank:
        office_store.create_workspace(name="  ", settings=WorkspaceSettings(), now=now)
    assert blank.value.field == "name"
    # The recovery lookback is clamped to 1..720 hours on write, not rejected.
    low = office_store.create_workspace(
        name="other", settings=WorkspaceSettings(recovery_lookback_hours=0), now=now
    )
    assert low.settings.recovery_lookback_hours == 1
    high = office_store.update_workspace(
        low.id, now=now, settings=WorkspaceSettings(recovery_lookback_hours=10_000)
    )
    assert high.settings.recovery_lookback_hours == 720
    with pytest.raises(NotFoundError) as missing:
        office_store.get_workspace("missing")
    assert missing.value.field == "workspace_id"
    with pytest.raises(NotFoundError):
        office_store.update_workspace("missing", now=now, description="x")


def test_workspace_without_a_settings_row_reads_with_default_settings(
    office_store: OfficeStore, database: Database, workspace: Workspace
) -> None:
    # get_workspace reads the workspace and its settings in one outer join.
    with database.write() as conn:
        conn.execute(
            sa.delete(workspace_settings).where(workspace_settings.c.workspace_id == workspace.id)
        )
    read = office_store.get_workspace(workspace.id)
    assert read.settings == WorkspaceSettings()
    assert read == office_store.find_workspace_by_name("acme")


def test_list_and_update_workspaces(
    office_store: OfficeStore, workspace: Workspace, now: datetime
) -> None:
    beta = office_store.create_workspace(name="beta", settings=WorkspaceSettings(), now=now)
    assert [w.name for w in office_store.list_workspaces()] == ["acme", "beta"]

    new_settings = WorkspaceSettings(coalesce_window=timedelta(0), default_executor="codex")
    updated = office_store.update_workspace(
        beta.id, now=now, description="second", settings=new_settings
    )
    assert updated.description == "second"
    assert updated.settings == new_settings
    untouched = office_store.update_workspace(beta.id, now=now)
    assert untouched == updated


def test_office_adopted(office_store: OfficeStore, workspace: Workspace, now: datetime) -> None:
    assert office_store.office_adopted() is False
    office_store.create_task(
        workspace_id=workspace.id, title="plain", workflow=WorkflowKind.KANBAN, now=now
    )
    assert office_store.office_adopted() is False
    office_store.create_task(workspace_id=workspace.id, title="office", now=now)
    assert office_store.office_adopted() is True


# --- projects ---------------------------------------------------------------------------


def test_projects(office_store: OfficeStore, workspace: Workspace, now: datetime) -> None:
    project = office_store.create_project(
        workspace_id=workspace.id,
        name="web",
        description="site",
        directory="/srv/web",
        executor="claude",
        repos=["git@example.com:web.git"],
        now=now,
    )
    assert project.repos == ("git@example.com:web.git",)
    assert project.directory == "/srv/web"
    assert office_store.get_project(project.id) == project
    assert office_store.find_project_by_name(workspace.id, "web") == project
    assert office_store.find_project_by_name(workspace.id, "api") is None
    api = office_store.create_project(workspace_id=workspace.id, name="api", now=now)
    assert [p.name for p in office_store.list_projects(workspace.id)] == ["api", "web"]
    assert api.repos == ()
    assert api.directory is None

    changed = office_store.update_project(
        project.id, now=now, description="new", directory=None, repos=("a", "b")
    )
    assert changed.description == "new"
    assert changed.directory is None
    assert changed.repos == ("a", "b")
    assert changed.executor == "claude"


def test_project_errors(office_store: OfficeStore, workspace: Workspace, now: datetime) -> None:
    office_store.create_project(workspace_id=workspace.id, name="web", now=now)
    with pytest.raises(ConflictError) as conflict:
        office_store.create_project(workspace_id=workspace.id, name="web", now=now)
    assert conflict.value.field == "name"
    other = office_store.create_workspace(name="other", settings=WorkspaceSettings(), now=now)
    office_store.create_project(workspace_id=other.id, name="web", now=now)  # other workspace
    with pytest.raises(NotFoundError) as no_ws:
        office_store.create_project(workspace_id="missing", name="x", now=now)
    assert no_ws.value.field == "workspace_id"
    with pytest.raises(NotFoundError) as no_project:
        office_store.get_project("missing")
    assert no_project.value.field == "project_id"
    project = office_store.find_project_by_name(workspace.id, "web")
    assert project is not None
    with pytest.raises(InvalidInputError) as unknown:
        office_store.update_project(project.id, now=now, name="renamed")
    assert unknown.value.field == "name"
    with pytest.raises(InvalidInputError) as bad_repos:
        office_store.update_project(project.id, now=now, repos="not-a-list")
    assert bad_repos.value.field == "repos"


# --- agents -----------------------------------------------------------------------------


def test_create_agent_defaults(
    office_store: OfficeStore, workspace: Workspace, now: datetime
) -> None:
    boss = office_store.create_agent(
        workspace_id=workspace.id, name="boss", role=AgentRole.COORDINATOR, now=now
    )
    assert boss.status is AgentStatus.IDLE
    assert boss.max_concurrent_sessions == 1
    assert boss.cooldown == timedelta(seconds=10)
    assert boss.skip_idle_wakeups is False
    assert boss.last_wakeup_finished_at is None
    worker = office_store.create_agent(
        workspace_id=workspace.id,
        name="dev",
        role=AgentRole.WORKER,
        now=now,
        instructions="write code",
        max_concurrent_sessions=3,
        cooldown=timedelta(0),
        executor="codex",
        status=AgentStatus.PAUSED,
    )
    assert worker.skip_idle_wakeups is True
    assert worker.max_concurrent_sessions == 3
    assert worker.cooldown == timedelta(0)
    assert worker.status is AgentStatus.PAUSED
    assert office_store.get_agent(worker.id) == worker
    assert office_store.find_agent_by_name(workspace.id, "dev") == worker
    assert office_store.find_agent_by_name(workspace.id, "nobody") is None
    assert [a.name for a in office_store.list_agents(workspace.id)] == ["boss", "dev"]
    explicit = office_store.create_agent(
        workspace_id=workspace.id,
        name="ceo",
        role=AgentRole.CEO,
        now=now,
        skip_idle_wakeups=True,
    )
    assert explicit.skip_idle_wakeups is True


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_concurrent_sessions": 0}, "max_concurrent_sessions"),
        ({"cooldown": timedelta(seconds=-1)}, "cooldown_s"),
        ({"name": ""}, "name"),
        ({"role": "boss"}, "role"),
    ],
)
def test_create_agent_validation(
    office_store: OfficeStore,
    workspace: Workspace,
    now: datetime,
    kwargs: dict[str, object],
    field: str,
) -> None:
    args: dict[str, object] = {"name": "dev", "role": AgentRole.WORKER, **kwargs}
    with pytest.raises(InvalidInputError) as err:
        office_store.create_agent(workspace_id=workspace.id, now=now, **args)  # type: ignore[arg-type]
    assert err.value.field == field


def test_agent_conflicts_and_missing(
    office_store: OfficeStore, workspace: Workspace, now: datetime
) -> None:
    office_store.create_agent(workspace_id=workspace.id, name="dev", role=AgentRole.WORKER, now=now)
    with pytest.raises(ConflictError) as conflict:
        office_store.create_agent(
            workspace_id=workspace.id, name="dev", role=AgentRole.REVIEWER, now=now
        )
    assert conflict.value.field == "name"
    with pytest.raises(NotFoundError) as no_ws:
        office_store.create_agent(
            workspace_id="missing", name="dev", role=AgentRole.WORKER, now=now
        )
    assert no_ws.value.field == "workspace_id"
    with pytest.raises(NotFoundError) as no_agent:
        office_store.get_agent("missing")
    assert no_agent.value.field == "agent_id"


def test_update_agent(office_store: OfficeStore, workspace: Workspace, now: datetime) -> None:
    agent = office_store.create_agent(
        workspace_id=workspace.id, name="dev", role=AgentRole.WORKER, now=now
    )
    office_store.create_agent(workspace_id=workspace.id, name="qa", role=AgentRole.WORKER, now=now)
    later = now + timedelta(minutes=1)
    updated = office_store.update_agent(
        agent.id,
        now=later,
        name="developer",
        role=AgentRole.COORDINATOR,
        status=AgentStatus.WORKING,
        instructions="lead",
        max_concurrent_sessions=2,
        executor="claude",
    )
    assert updated.name == "developer"
    assert updated.role is AgentRole.COORDINATOR
    assert updated.status is AgentStatus.WORKING
    assert updated.instructions == "lead"
    assert updated.max_concurrent_sessions == 2
    assert updated.executor == "claude"
    assert updated.skip_idle_wakeups is True  # unchanged by a role change
    reset = office_store.update_agent(agent.id, now=later, skip_idle_wakeups=None)
    assert reset.skip_idle_wakeups is False  # the coordinator's default

    with pytest.raises(ConflictError) as conflict:
        office_store.update_agent(agent.id, now=later, name="qa")
    assert conflict.value.field == "name"
    with pytest.raises(InvalidInputError) as unknown:
        office_store.update_agent(agent.id, now=later, workspace_id="x")
    assert unknown.value.field == "workspace_id"
    with pytest.raises(InvalidInputError) as bad:
        office_store.update_agent(agent.id, now=later, cooldown=timedelta(seconds=-5))
    assert bad.value.field == "cooldown_s"
    with pytest.raises(InvalidInputError) as bad_status:
        office_store.update_agent(agent.id, now=later, status="asleep")
    assert bad_status.value.field == "status"
    with pytest.raises(NotFoundError):
        office_store.update_agent("missing", now=later, name="x")


def test_update_agent_cooldown_recomputes_cooldown_until(
    office_store: OfficeStore, database: Database, workspace: Workspace, now: datetime
) -> None:
    agent = office_store.create_agent(
        workspace_id=workspace.id, name="dev", role=AgentRole.WORKER, now=now
    )

    def cooldown_until() -> datetime | None:
        with database.read() as conn:
            query = sa.select(agents.c.cooldown_until).where(agents.c.id == agent.id)
            value: datetime | None = conn.execute(query).scalar_one()
            return value

    office_store.update_agent(agent.id, now=now, cooldown=timedelta(seconds=30))
    assert cooldown_until() is None  # never finished a run

    finished = now - timedelta(seconds=5)
    with database.write() as conn:
        conn.execute(
            sa.update(agents)
            .where(agents.c.id == agent.id)
            .values(last_wakeup_finished_at=finished)
        )
    updated = office_store.update_agent(agent.id, now=now, cooldown=timedelta(minutes=2))
    assert updated.cooldown == timedelta(minutes=2)
    assert updated.last_wakeup_finished_at == finished
    assert cooldown_until() == finished + timedelta(minutes=2)


def test_coalesce_window_and_agent_names_read_only_what_intake_and_prompts_need(
    office_store: OfficeStore, database: Database, now: datetime
) -> None:
    space = office_store.create_workspace(
        name="quick", settings=WorkspaceSettings(coalesce_window=timedelta(seconds=7)), now=now
    )
    assert office_store.coalesce_window(space.id) == timedelta(seconds=7)
    with database.write() as conn:  # a workspace whose settings row is missing
        conn.exec_driver_sql("DELETE FROM workspace_settings")
    assert office_store.coalesce_window(space.id) == WorkspaceSettings().coalesce_window
    with pytest.raises(NotFoundError) as missing:
        office_store.coalesce_window("nope")
    assert missing.value.field == "workspace_id"
    ann = office_store.create_agent(
        workspace_id=space.id, name="ann", role=AgentRole.WORKER, now=now
    )
    assert office_store.agent_names(space.id) == {ann.id: "ann"}
    assert office_store.agent_names("nope") == {}
