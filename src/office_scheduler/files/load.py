"""Reading and validating a config directory (``office.yml`` and the entity folders)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AgentStatus
from office_scheduler.executors.presets import PRESET_NAMES
from office_scheduler.files.budgets import check_budget_names, load_budgets
from office_scheduler.files.fields import Fields, read_yaml
from office_scheduler.files.limits import read_limits
from office_scheduler.files.model import AgentSpec, OfficeConfig, ProjectSpec, RoutineSpec
from office_scheduler.files.notifications import load_notifications
from office_scheduler.files.routines import load_routine
from office_scheduler.files.secret_refs import resolve_env_value
from office_scheduler.store.agent_rules import permission_policy

EXECUTOR_KINDS = ("command", "acp")
_DEFAULT_PASS_ENV = ExecutorConfig(name="default").pass_env


def _resolve_arg(arg: str, root: Path) -> str:
    arg = arg.replace("{python}", sys.executable)
    if arg.startswith(("./", "../")):
        return str((root / arg).resolve())
    return arg


def _executor(name: str, data: object, root: Path) -> ExecutorConfig:
    spec = Fields(data, "office.yml", f"executors.{name}.")
    kind = spec.text("kind", "command")
    if kind not in EXECUTOR_KINDS:
        raise spec.error("kind", f"must be one of {', '.join(EXECUTOR_KINDS)}")
    argv = tuple(_resolve_arg(arg, root) for arg in spec.strings("argv"))
    env_data = spec.get("env") or {}
    if not isinstance(env_data, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int | float) and not isinstance(v, bool)
        for k, v in env_data.items()
    ):
        raise spec.error("env", "must map names to string values")
    env: dict[str, str] = {}
    for key, value in env_data.items():
        # ``${env:NAME}`` (what export writes) is read from the importing process.
        resolved = resolve_env_value(str(value), os.environ)
        if resolved is None:
            raise spec.error(f"env.{key}", f"refers to {value}, which is not set")
        env[str(key)] = resolved
    config = ExecutorConfig(
        name=name,
        kind=kind,
        argv=argv,
        env=env,
        cwd=spec.optional_text("cwd"),
        timeout_s=spec.number("timeout_s", 3600.0, minimum=1),
        inactivity_timeout_s=spec.number("inactivity_timeout_s", 600.0, minimum=1),
        pass_env=spec.strings("pass_env", _DEFAULT_PASS_ENV),
        preset=spec.optional_text("preset"),
        preset_args=spec.strings("preset_args"),
    )
    spec.done()
    if config.preset is not None and config.preset not in PRESET_NAMES:
        raise spec.error("preset", f"must be one of {', '.join(PRESET_NAMES)}")
    if kind == "command" and not argv and config.preset is None:
        raise spec.error("argv", "a command executor needs a non-empty argv or a preset")
    return config


def _agent(path: Path, where: str) -> AgentSpec:
    spec = Fields(read_yaml(path, where), where)
    role = AgentRole(spec.choice("role", AgentRole))
    agent = AgentSpec(
        name=spec.text("name", path.stem).strip() or path.stem,
        role=role,
        instructions=spec.text("instructions"),
        max_concurrent_sessions=spec.integer("max_concurrent_sessions", 1, minimum=1, maximum=100),
        cooldown_s=spec.number("cooldown_s", 10.0),
        skip_idle_wakeups=spec.boolean("skip_idle_wakeups", role.default_skip_idle_wakeups),
        executor=spec.optional_text("executor"),
        status=AgentStatus(spec.choice("status", AgentStatus, AgentStatus.IDLE.value)),
        reports_to=spec.optional_text("reports_to"),
        permission_policy=_permission_policy(spec),
        paused_reason=spec.optional_text("paused_reason"),
        limits=read_limits(spec, for_agent=True),
    )
    spec.done()
    return agent


def _permission_policy(spec: Fields) -> dict[str, Any] | None:
    try:
        return permission_policy(spec.get("permission_policy"))
    except InvalidInputError as exc:
        key = exc.field or "permission_policy"
        raise spec.error(key, exc.message.removeprefix(f"{key} ").strip()) from None


def _check_reports_to(agents: Sequence[AgentSpec], wheres: Sequence[str]) -> None:
    """``reports_to`` names another agent of the config and never closes a cycle."""
    boss = {agent.name: agent.reports_to for agent in agents}
    for agent, where in zip(agents, wheres, strict=True):
        if agent.reports_to is None:
            continue
        field = f"{where}: reports_to"
        if agent.reports_to not in boss:
            message = f"{field}: agent {agent.reports_to!r} is not defined in agents/"
            raise InvalidInputError(message, field=field)
        seen: set[str] = set()
        current: str | None = agent.reports_to
        while current is not None and current not in seen:
            if current == agent.name:
                raise InvalidInputError(f"{field}: makes a reporting cycle", field=field)
            seen.add(current)
            current = boss.get(current)


def _project(path: Path, where: str, root: Path) -> ProjectSpec:
    spec = Fields(read_yaml(path, where), where)
    directory = spec.optional_text("directory")
    if directory is not None:
        directory = str((root / Path(directory).expanduser()).resolve())
    project = ProjectSpec(
        name=spec.text("name", path.stem).strip() or path.stem,
        description=spec.text("description"),
        directory=directory,
        executor=spec.optional_text("executor"),
        repos=spec.strings("repos"),
    )
    spec.done()
    return project


def _entity_files(root: Path, folder: str) -> list[tuple[Path, str]]:
    base = root / folder
    if not base.is_dir():
        return []
    paths = sorted([*base.glob("*.yml"), *base.glob("*.yaml")])
    return [(path, f"{folder}/{path.name}") for path in paths]


def _unique(items: Sequence[tuple[str, str]], kind: str) -> None:
    seen: dict[str, str] = {}
    for name, where in items:
        if name in seen:
            message = f"{where}: name: {kind} {name!r} is also defined in {seen[name]}"
            raise InvalidInputError(message, field=f"{where}: name")
        seen[name] = where


def _unique_routines(routines: Sequence[RoutineSpec], wheres: Sequence[str]) -> None:
    """Routine names are unique per assignee (each coordinator has a "Coordinator heartbeat")."""
    seen: dict[tuple[str, str | None], str] = {}
    for routine, where in zip(routines, wheres, strict=True):
        key = (routine.name, routine.assignee)
        if key in seen:
            owner = f"for {routine.assignee!r}" if routine.assignee else "without an assignee"
            message = (
                f"{where}: name: routine {routine.name!r} {owner} is also defined in {seen[key]}"
            )
            raise InvalidInputError(message, field=f"{where}: name")
        seen[key] = where


def load_config(directory: Path | str) -> OfficeConfig:
    """Read and validate the office config in ``directory``.

    Returns:
        The config, with machine-dependent values resolved (see the module docstring).

    Raises:
        InvalidInputError: a missing or malformed file or value; ``field`` names the file
            and key, e.g. ``agents/coder.yml: max_concurrent_sessions``.
    """
    root = Path(directory).expanduser().resolve()
    if not root.is_dir():
        raise InvalidInputError(f"{root} is not a directory", field="directory")
    office = Fields(read_yaml(root / "office.yml", "office.yml"), "office.yml")
    ws = Fields(office.get("workspace"), "office.yml", "workspace.")
    name, description = ws.text("name", required=True), ws.text("description")
    ws.done()
    executor_data = office.get("executors") or {}
    if not isinstance(executor_data, dict):
        raise office.error("executors", "must map executor names to definitions")
    executors = {str(key): _executor(str(key), value, root) for key, value in executor_data.items()}
    values = Fields(office.get("settings"), "office.yml", "settings.")
    settings = WorkspaceSettings(
        coalesce_window=timedelta(seconds=values.number("coalesce_window_s", 5.0)),
        recovery_lookback_hours=values.integer(
            "recovery_lookback_hours", 24, minimum=1, maximum=720
        ),
        default_executor=values.optional_text("default_executor"),
        executors=executors,
    )
    values.done()
    budgets = load_budgets(office.get("budgets"))
    limits = read_limits(office, for_agent=False)
    notifications = load_notifications(office.get("notifications"))
    office.done()
    if settings.default_executor is not None and settings.default_executor not in executors:
        raise values.error(
            "default_executor", f"executor {settings.default_executor!r} is not defined"
        )
    agent_files = _entity_files(root, "agents")
    agents = [_agent(path, where) for path, where in agent_files]
    project_files = _entity_files(root, "projects")
    projects = [_project(path, where, root) for path, where in project_files]
    _unique([(a.name, w) for a, (_, w) in zip(agents, agent_files, strict=True)], "agent")
    _check_reports_to(agents, [where for _, where in agent_files])
    _unique([(p.name, w) for p, (_, w) in zip(projects, project_files, strict=True)], "project")
    named = [
        *((a.executor, w) for a, (_, w) in zip(agents, agent_files, strict=True)),
        *((p.executor, w) for p, (_, w) in zip(projects, project_files, strict=True)),
    ]
    for executor, where in named:
        if executor is not None and executor not in executors:
            message = f"{where}: executor: {executor!r} is not defined in office.yml"
            raise InvalidInputError(message, field=f"{where}: executor")
    routine_files = _entity_files(root, "routines")
    routines = [load_routine(path, where) for path, where in routine_files]
    _unique_routines(routines, [where for _, where in routine_files])
    agent_names = {agent.name for agent in agents}
    for routine, (_, where) in zip(routines, routine_files, strict=True):
        if routine.assignee is not None and routine.assignee not in agent_names:
            message = f"{where}: assignee: agent {routine.assignee!r} is not defined in agents/"
            raise InvalidInputError(message, field=f"{where}: assignee")
    check_budget_names(budgets, agent_names, (project.name for project in projects))
    return OfficeConfig(
        name=name,
        description=description,
        settings=settings,
        agents=tuple(sorted(agents, key=lambda a: a.name)),
        projects=tuple(sorted(projects, key=lambda p: p.name)),
        routines=tuple(sorted(routines, key=lambda r: (r.name, r.assignee or ""))),
        budgets=budgets,
        limits=limits,
        notifications=notifications,
    )
