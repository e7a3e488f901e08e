"""Workspace config as files: loading, validation, import plans and the export round trip."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from office_scheduler.domain.errors import ConflictError, InvalidInputError
from office_scheduler.domain.routines import HEARTBEAT_NAME
from office_scheduler.domain.status import AgentRole, AgentStatus
from office_scheduler.files import (
    Action,
    AgentSpec,
    ImportPlan,
    apply_import,
    export_config,
    load_config,
    plan_import,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo-office"

OFFICE_YML = """\
workspace:
  name: Test Office
  description: for tests
settings:
  coalesce_window_s: 2.5
  recovery_lookback_hours: 48
  prompt_max_wakes: 12
  default_executor: cli
executors:
  cli:
    kind: command
    argv: ["{python}", "./agent.py", "--flag"]
    env: {API_KEY: secret-value}
    timeout_s: 60
    inactivity_timeout_s: 30
    pass_env: [PATH]
"""

CODER_YML = """\
name: coder
role: worker
instructions: |
  Write code.
  Test it.
max_concurrent_sessions: 2
cooldown_s: 3
executor: cli
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    return write(
        tmp_path / "office",
        {
            "office.yml": OFFICE_YML,
            "agents/coder.yml": CODER_YML,
            "agents/lead.yml": "role: coordinator\n",
            "projects/site.yml": "name: site\ndirectory: work/site\nrepos: [git@x:y.git]\n",
        },
    )


@pytest.fixture
def store(database: Database) -> Store:
    return Store.from_database(database)


@pytest.fixture(autouse=True)
def _exported_secret_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exports write ``${env:API_KEY}``; re-importing reads it from the environment."""
    monkeypatch.setenv("API_KEY", "secret-value")


def test_load_resolves_machine_values(config_dir: Path) -> None:
    config = load_config(config_dir)

    assert config.name == "Test Office"
    assert config.settings.coalesce_window == timedelta(seconds=2.5)
    assert config.settings.recovery_lookback_hours == 48
    assert (config.settings.prompt_max_wakes, config.settings.prompt_max_wake_bytes) == (
        12,
        12_000,
    )
    cli = config.settings.executors["cli"]
    assert cli.argv == (sys.executable, str(config_dir / "agent.py"), "--flag")
    assert cli.env == {"API_KEY": "secret-value"}
    assert cli.pass_env == ("PATH",)
    assert [a.name for a in config.agents] == ["coder", "lead"]
    coder, lead = config.agents
    assert coder.instructions == "Write code.\nTest it.\n"
    assert (coder.max_concurrent_sessions, coder.cooldown_s) == (2, 3.0)
    assert coder.skip_idle_wakeups is True  # worker default
    assert lead.role is AgentRole.COORDINATOR
    assert lead.skip_idle_wakeups is False  # coordinator default
    assert lead.status is AgentStatus.IDLE
    (site,) = config.projects
    assert site.directory == str(config_dir / "work" / "site")
    assert site.repos == ("git@x:y.git",)


def test_the_demo_office_loads() -> None:
    config = load_config(EXAMPLE)

    sample = config.settings.executors["sample"]
    assert sample.argv[0] == sys.executable
    assert Path(sample.argv[1]).is_file()
    assert sample.argv[1].endswith("examples/agents/sample_agent.py")
    assert config.settings.coalesce_window == timedelta(seconds=1)
    roles = {agent.name: agent.role for agent in config.agents}
    assert roles["coordinator"] is AgentRole.COORDINATOR
    assert sum(role is AgentRole.WORKER for role in roles.values()) >= 2
    assert all(agent.cooldown_s <= 1 for agent in config.agents)
    (project,) = config.projects
    assert project.directory == str(EXAMPLE / "workspace")
    routines = {routine.name: routine for routine in config.routines}
    assert set(routines) == {HEARTBEAT_NAME, "Deploy hook", "Nightly report"}
    assert routines[HEARTBEAT_NAME].assignee == "coordinator"
    assert routines["Nightly report"].task_template is not None
    assert routines["Deploy hook"].task_template is None


@pytest.mark.parametrize(
    ("files", "field"),
    [
        (
            {"agents/coder.yml": "role: worker\nmax_concurrent_sessions: 0\n"},
            "agents/coder.yml: max_concurrent_sessions",
        ),
        (
            {"agents/coder.yml": "role: worker\nmax_concurrent_sessions: true\n"},
            "agents/coder.yml: max_concurrent_sessions",
        ),
        ({"agents/coder.yml": "role: boss\n"}, "agents/coder.yml: role"),
        ({"agents/coder.yml": "role: worker\ncolour: red\n"}, "agents/coder.yml: colour"),
        ({"agents/coder.yml": "role: worker\ncooldown_s: -1\n"}, "agents/coder.yml: cooldown_s"),
        ({"agents/coder.yml": "role: worker\nexecutor: nope\n"}, "agents/coder.yml: executor"),
        ({"agents/coder.yml": "role: worker\nstatus: asleep\n"}, "agents/coder.yml: status"),
        ({"agents/coder.yml": "- a list\n"}, "agents/coder.yml"),
        (
            {"agents/a.yml": "name: x\nrole: worker\n", "agents/b.yml": "name: x\nrole: worker\n"},
            "agents/b.yml: name",
        ),
        ({"projects/p.yml": "repos: notalist\n"}, "projects/p.yml: repos"),
        ({"projects/p.yml": "executor: nope\n"}, "projects/p.yml: executor"),
        ({"office.yml": "workspace: {description: x}\n"}, "office.yml: workspace.name"),
        (
            {"office.yml": "workspace: {name: x}\nsettings: {recovery_lookback_hours: 0}\n"},
            "office.yml: settings.recovery_lookback_hours",
        ),
        (
            {"office.yml": "workspace: {name: x}\nsettings: {prompt_max_wake_bytes: 500}\n"},
            "office.yml: settings.prompt_max_wake_bytes",
        ),
        (
            {"office.yml": "workspace: {name: x}\nsettings: {default_executor: nope}\n"},
            "office.yml: settings.default_executor",
        ),
        (
            {"office.yml": "workspace: {name: x}\nexecutors: {c: {argv: [a], timeout_s: abc}}\n"},
            "office.yml: executors.c.timeout_s",
        ),
        (
            {"office.yml": "workspace: {name: x}\nexecutors: {c: {kind: ssh, argv: [a]}}\n"},
            "office.yml: executors.c.kind",
        ),
        (
            {"office.yml": "workspace: {name: x}\nexecutors: {c: {argv: []}}\n"},
            "office.yml: executors.c.argv",
        ),
        (
            {"office.yml": "workspace: {name: x}\nexecutors: {c: {argv: [a], env: {K: [1]}}}\n"},
            "office.yml: executors.c.env",
        ),
        ({"office.yml": "workspace: [unclosed\n"}, "office.yml"),
        ({"office.yml": "workspace: {name: x}\nextra: 1\n"}, "office.yml: extra"),
    ],
)
def test_validation_names_file_and_key(config_dir: Path, files: dict[str, str], field: str) -> None:
    write(config_dir, files)

    with pytest.raises(InvalidInputError) as caught:
        load_config(config_dir)

    assert caught.value.field == field
    assert str(caught.value).startswith(field)


def test_missing_office_yml_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_config(tmp_path)
    assert caught.value.field == "office.yml"
    with pytest.raises(InvalidInputError) as caught:
        load_config(tmp_path / "nowhere")
    assert caught.value.field == "directory"


def actions(plan: ImportPlan) -> dict[tuple[str, str], tuple[Action, tuple[str, ...]]]:
    return {(c.kind, c.name): (c.action, c.fields) for c in plan.changes}


def test_plan_apply_and_replan(store: Store, config_dir: Path, now: datetime) -> None:
    config = load_config(config_dir)

    plan = plan_import(store, config)
    assert plan.workspace_id is None
    assert plan.has_changes
    assert {action for action, _ in actions(plan).values()} == {Action.CREATE}
    assert set(actions(plan)) == {
        ("workspace", "Test Office"),
        ("agent", "coder"),
        ("agent", "lead"),
        ("project", "site"),
    }

    workspace_id = apply_import(store, plan, now)
    assert Path(config.projects[0].directory or "").is_dir()
    workspace = store.office.get_workspace(workspace_id)
    assert workspace.settings == config.settings
    coder = store.office.find_agent_by_name(workspace_id, "coder")
    assert coder is not None
    assert coder.cooldown == timedelta(seconds=3)

    again = plan_import(store, config)
    assert again.workspace_id == workspace_id
    assert not again.has_changes

    changed_coder = replace(config.agents[0], cooldown_s=7, instructions="New.")
    newcomer = AgentSpec(name="tester", role=AgentRole.WORKER)
    executors = dict(config.settings.executors)
    executors["cli"] = replace(executors["cli"], timeout_s=90)
    changed = replace(
        config,
        description="changed",
        settings=replace(config.settings, executors=executors),
        agents=(changed_coder, config.agents[1], newcomer),
    )
    plan = plan_import(store, changed)
    assert actions(plan) == {
        ("workspace", "Test Office"): (Action.UPDATE, ("description", "executors.cli")),
        ("agent", "coder"): (Action.UPDATE, ("instructions", "cooldown_s")),
        ("agent", "lead"): (Action.UNCHANGED, ()),
        ("agent", "tester"): (Action.CREATE, ()),
        ("project", "site"): (Action.UNCHANGED, ()),
    }
    assert apply_import(store, plan, now + timedelta(minutes=1)) == workspace_id
    assert not plan_import(store, changed).has_changes
    coder = store.office.find_agent_by_name(workspace_id, "coder")
    assert coder is not None
    assert coder.cooldown == timedelta(seconds=7)
    assert store.office.get_workspace(workspace_id).settings.executors["cli"].timeout_s == 90


def test_import_export_import_round_trip(
    store: Store, config_dir: Path, tmp_path: Path, now: datetime
) -> None:
    original = load_config(config_dir)
    workspace_id = apply_import(store, plan_import(store, original), now)

    exported = export_config(store, workspace_id, tmp_path / "exported")

    assert (exported / "office.yml").is_file()
    assert sorted(p.name for p in (exported / "agents").iterdir()) == ["coder.yml", "lead.yml"]
    # Executor env values are exported as references, read back from the environment
    # (``API_KEY`` is set by ``_exported_secret_in_env``).
    reloaded = load_config(exported)
    # The coordinator got its "Coordinator heartbeat" routine when it was created.
    assert [(r.name, r.assignee) for r in reloaded.routines] == [(HEARTBEAT_NAME, "lead")]
    assert replace(reloaded, routines=()) == original
    text = (exported / "office.yml").read_text()
    assert "secret-value" not in text
    assert "API_KEY: ${env:API_KEY}" in text
    assert not plan_import(store, reloaded).has_changes


def test_demo_office_round_trip(store: Store, tmp_path: Path, now: datetime) -> None:
    original = load_config(EXAMPLE)
    original = replace(
        original,
        projects=tuple(replace(p, directory=str(tmp_path / "w")) for p in original.projects),
    )
    workspace_id = apply_import(store, plan_import(store, original), now)

    assert load_config(export_config(store, workspace_id, tmp_path / "out")) == original


def test_agent_settings_round_trip_losslessly(
    store: Store, config_dir: Path, tmp_path: Path, now: datetime
) -> None:
    write(
        config_dir,
        {
            "agents/coder.yml": CODER_YML
            + "reports_to: lead\n"
            + "permission_policy: {mode: allow_listed, tools: [bash, read]}\n"
            + "status: paused\npaused_reason: budget_exceeded\nskip_idle_wakeups: false\n"
            + "expected_run_cents: 40\n",
            "agents/tester.yml": "role: reviewer\nreports_to: coder\n"
            + "permission_policy: {mode: deny}\nstatus: stopped\n",
        },
    )
    original = load_config(config_dir)
    coder = next(a for a in original.agents if a.name == "coder")
    assert coder.permission_policy == {"mode": "allow_listed", "tools": ["bash", "read"]}
    assert (coder.reports_to, coder.paused_reason) == ("lead", "budget_exceeded")
    assert coder.expected_run_cents == 40
    workspace_id = apply_import(store, plan_import(store, original), now)
    stored = store.office.find_agent_by_name(workspace_id, "coder")
    lead = store.office.find_agent_by_name(workspace_id, "lead")
    assert stored is not None
    assert lead is not None
    assert (stored.reports_to, stored.status, stored.paused_reason) == (
        lead.id,
        AgentStatus.PAUSED,
        "budget_exceeded",
    )
    assert stored.expected_run_cents == 40

    exported = load_config(export_config(store, workspace_id, tmp_path / "exported"))
    assert replace(exported, routines=()) == original
    assert not plan_import(store, exported).has_changes

    # Reversing a reporting line in the files is applied without a transient cycle.
    flipped = replace(
        original,
        agents=tuple(
            replace(a, reports_to={"lead": "coder", "coder": None}.get(a.name, a.reports_to))
            for a in original.agents
        ),
    )
    plan = plan_import(store, flipped)
    assert actions(plan)[("agent", "lead")] == (Action.UPDATE, ("reports_to",))
    apply_import(store, plan, now)
    assert not plan_import(store, flipped).has_changes


@pytest.mark.parametrize(
    ("files", "field"),
    [
        (
            {"agents/coder.yml": "role: worker\nreports_to: nobody\n"},
            "agents/coder.yml: reports_to",
        ),
        ({"agents/coder.yml": "role: worker\nreports_to: coder\n"}, "agents/coder.yml: reports_to"),
        (
            {"agents/coder.yml": "role: worker\npermission_policy: {mode: maybe}\n"},
            "agents/coder.yml: permission_policy.mode",
        ),
        (
            {"agents/coder.yml": "role: worker\nexpected_run_cents: -5\n"},
            "agents/coder.yml: expected_run_cents",
        ),
        (
            {"agents/coder.yml": "role: worker\npermission_policy: {mode: deny, tools: [x]}\n"},
            "agents/coder.yml: permission_policy.tools",
        ),
    ],
)
def test_agent_setting_errors_name_file_and_key(
    config_dir: Path, files: dict[str, str], field: str
) -> None:
    write(config_dir, files)
    with pytest.raises(InvalidInputError) as caught:
        load_config(config_dir)
    assert caught.value.field == field


def test_export_refuses_a_non_empty_directory(
    store: Store, config_dir: Path, tmp_path: Path, now: datetime
) -> None:
    workspace_id = apply_import(store, plan_import(store, load_config(config_dir)), now)
    target = write(tmp_path / "target", {"keep.txt": "mine"})

    with pytest.raises(ConflictError):
        export_config(store, workspace_id, target)
    assert (target / "keep.txt").read_text() == "mine"
