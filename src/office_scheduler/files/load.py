"""Reading and validating a config directory (``office.yml`` and the entity folders)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AgentStatus
from office_scheduler.executors.presets import PRESET_NAMES
from office_scheduler.files.budgets import check_budget_names, load_budgets
from office_scheduler.files.fields import Fields, read_yaml
from office_scheduler.files.limits import read_limits
from office_scheduler.files.model import (
    AgentSpec,
    EnvReference,
    OfficeConfig,
    ProjectSpec,
    RoutineSpec,
)
from office_scheduler.files.notifications import load_notifications
from office_scheduler.files.routines import load_routine
from office_scheduler.files.secret_refs import referenced_name, resolve_env_value
from office_scheduler.store.agent_rules import MAX_EXPECTED_RUN_CENTS, permission_policy

EXECUTOR_KINDS = ("command", "acp")
_DEFAULT_PASS_ENV = ExecutorConfig(name="default").pass_env


def _resolve_arg(arg: str, root: Path) -> str:
    arg = arg.replace("{python}", sys.executable)
    if arg.startswith(("./", "../")):
        return str((root / arg).resolve())
    return arg


#: Variables ``${env:NAME}`` may not read without ``--allow-env NAME``: the office's own
#: (the importer's admin token, API URL, database URL) are not meant for an agent.
OFFICE_VARIABLE_PREFIX = "OFFICE_"


def _executor(
    name: str, data: object, root: Path, allow_env: frozenset[str], refs: list[EnvReference]
) -> ExecutorConfig:
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
        variable = referenced_name(str(value))
        if variable is not None:
            if variable.startswith(OFFICE_VARIABLE_PREFIX) and variable not in allow_env:
                raise spec.error(
                    f"env.{key}",
                    f"refers to {value}, one of the office's own variables: add"
                    f" --allow-env {variable} to import it",
                )
            refs.append(EnvReference(executor=name, key=str(key), variable=variable))
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
        stall_timeout_s=spec.number("stall_timeout_s", 300.0, minimum=1),
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
        expected_run_cents=(
            None
            if spec.get("expected_run_cents") is None
            else spec.integer("expected_run_cents", 0, minimum=0, maximum=MAX_EXPECTED_RUN_CENTS)
        ),
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


#: Most errors one failed load reports (the rest are counted).
MAX_ERRORS = 20

T = TypeVar("T")


class _Errors:
    """The validation errors of one load, collected so that all are reported at once."""

    def __init__(self) -> None:
        self.found: list[InvalidInputError] = []

    def attempt(self, load: Callable[[], T]) -> T | None:
        """``load()``, or ``None`` after recording the error it raised."""
        try:
            return load()
        except InvalidInputError as exc:
            self.found.append(exc)
            return None

    def add(self, message: str, field: str) -> None:
        """Record an error found by a check across files."""
        self.found.append(InvalidInputError(message, field=field))

    def raise_any(self) -> None:
        """Raise one error listing every one recorded (one per line, at most 20).

        Raises:
            InvalidInputError: ``field`` names the first error's field.
        """
        if not self.found:
            return
        if len(self.found) == 1:
            raise self.found[0]
        lines = [line for error in self.found for line in error.message.splitlines()]
        shown = lines[:MAX_ERRORS]
        if len(lines) > MAX_ERRORS:
            shown.append(f"... and {len(lines) - MAX_ERRORS} more errors")
        raise InvalidInputError("\n".join(shown), field=self.found[0].field)


def _settings(office: Fields, executors: dict[str, ExecutorConfig]) -> WorkspaceSettings:
    declared = office.data.get("executors")
    # An executor that failed to load is reported on its own: not as undefined here too.
    names = {str(key) for key in declared} if isinstance(declared, dict) else set(executors)
    values = Fields(office.get("settings"), "office.yml", "settings.")
    settings = WorkspaceSettings(
        coalesce_window=timedelta(seconds=values.number("coalesce_window_s", 5.0)),
        recovery_lookback_hours=values.integer(
            "recovery_lookback_hours", 24, minimum=1, maximum=720
        ),
        prompt_max_wakes=values.integer("prompt_max_wakes", 20, minimum=1, maximum=500),
        prompt_max_wake_bytes=values.integer(
            "prompt_max_wake_bytes", 12_000, minimum=1000, maximum=200_000
        ),
        default_executor=values.optional_text("default_executor"),
        executors=executors,
    )
    values.done()
    if settings.default_executor is not None and settings.default_executor not in names:
        raise values.error(
            "default_executor", f"executor {settings.default_executor!r} is not defined"
        )
    return settings


def _executors(
    office: Fields,
    root: Path,
    errors: _Errors,
    allow_env: frozenset[str],
    refs: list[EnvReference],
) -> dict[str, ExecutorConfig]:
    executor_data = office.get("executors") or {}
    if not isinstance(executor_data, dict):
        raise office.error("executors", "must map executor names to definitions")
    executors: dict[str, ExecutorConfig] = {}
    for key, value in executor_data.items():
        found = errors.attempt(partial(_executor, str(key), value, root, allow_env, refs))
        if found is not None:
            executors[str(key)] = found
    return executors


def _checked_unique(items: Sequence[tuple[str, str]], kind: str, errors: _Errors) -> None:
    seen: dict[str, str] = {}
    for name, where in items:
        if name in seen:
            message = f"{where}: name: {kind} {name!r} is also defined in {seen[name]}"
            errors.add(message, f"{where}: name")
        seen.setdefault(name, where)


def load_config(directory: Path | str, *, allow_env: Iterable[str] = ()) -> OfficeConfig:
    """Read and validate the office config in ``directory``.

    Every file is checked before anything is refused: the error lists all the problems
    found (one per line, at most :data:`MAX_ERRORS`), not only the first.

    Args:
        directory: the config directory.
        allow_env: ``OFFICE_*`` variables a ``${env:NAME}`` may read (the others are
            refused: they are the importer's, not an agent's or a receiver's).

    Returns:
        The config, with machine-dependent values resolved (see the module docstring).

    Raises:
        InvalidInputError: a missing or malformed file or value; ``field`` names the file
            and key of the first problem, e.g. ``agents/coder.yml: max_concurrent_sessions``.
    """
    root = Path(directory).expanduser().resolve()
    if not root.is_dir():
        raise InvalidInputError(f"{root} is not a directory", field="directory")
    errors = _Errors()
    office = Fields(read_yaml(root / "office.yml", "office.yml"), "office.yml")
    ws = Fields(office.get("workspace"), "office.yml", "workspace.")
    name = errors.attempt(lambda: ws.text("name", required=True)) or ""
    description = errors.attempt(lambda: ws.text("description")) or ""
    errors.attempt(ws.done)
    allowed, refs = frozenset(allow_env), list[EnvReference]()
    executors = errors.attempt(lambda: _executors(office, root, errors, allowed, refs)) or {}
    settings = errors.attempt(lambda: _settings(office, executors))
    budgets = errors.attempt(lambda: load_budgets(office.get("budgets")))
    limits = errors.attempt(lambda: read_limits(office, for_agent=False))
    notifications = errors.attempt(lambda: load_notifications(office.get("notifications"), allowed))
    errors.attempt(office.done)
    agent_files = _entity_files(root, "agents")
    loaded_agents = [
        (errors.attempt(partial(_agent, path, where)), where) for path, where in agent_files
    ]
    agents = [(agent, where) for agent, where in loaded_agents if agent is not None]
    project_files = _entity_files(root, "projects")
    loaded_projects = [
        (errors.attempt(partial(_project, path, where, root)), where)
        for path, where in project_files
    ]
    projects = [(project, where) for project, where in loaded_projects if project is not None]
    _checked_unique([(a.name, w) for a, w in agents], "agent", errors)
    errors.attempt(lambda: _check_reports_to([a for a, _ in agents], [w for _, w in agents]))
    _checked_unique([(p.name, w) for p, w in projects], "project", errors)
    named = [*((a.executor, w) for a, w in agents), *((p.executor, w) for p, w in projects)]
    for executor, where in named:
        if executor is not None and executor not in executors:
            message = f"{where}: executor: {executor!r} is not defined in office.yml"
            errors.add(message, f"{where}: executor")
    routine_files = _entity_files(root, "routines")
    loaded_routines = [
        (errors.attempt(partial(load_routine, path, where)), where) for path, where in routine_files
    ]
    routines = [(routine, where) for routine, where in loaded_routines if routine is not None]
    errors.attempt(lambda: _unique_routines([r for r, _ in routines], [w for _, w in routines]))
    agent_names = {agent.name for agent, _ in agents}
    for routine, where in routines:
        if routine.assignee is not None and routine.assignee not in agent_names:
            message = f"{where}: assignee: agent {routine.assignee!r} is not defined in agents/"
            errors.add(message, f"{where}: assignee")
    if budgets is not None:
        errors.attempt(
            lambda: check_budget_names(budgets, agent_names, (p.name for p, _ in projects))
        )
    errors.raise_any()
    # Both are set, or an error about them was raised above.
    assert settings is not None
    assert budgets is not None
    assert notifications is not None
    return OfficeConfig(
        name=name,
        description=description,
        settings=settings,
        agents=tuple(sorted((a for a, _ in agents), key=lambda a: a.name)),
        projects=tuple(sorted((p for p, _ in projects), key=lambda p: p.name)),
        routines=tuple(sorted((r for r, _ in routines), key=lambda r: (r.name, r.assignee or ""))),
        budgets=budgets,
        root=str(root),
        env_references=tuple(refs),
        limits=limits,
        notifications=notifications,
    )
