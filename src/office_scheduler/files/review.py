"""What an import plan shows before anything is applied: every value, and the warnings.

A config directory can be hostile (downloaded, or written by someone else): applying it
runs its executors' ``argv`` as agents, gives them the ``env`` it names and the
``pass_env`` variables of the server, and works in its project directories. So the plan
lists every field of a new record and the new value of every changed field (``env`` by
name only: values are secrets), and flags, as warnings:

- a path outside the config folder: an executor ``argv`` item or ``cwd``, a project
  ``directory`` or ``repos`` entry (the running interpreter, ``{python}``, excepted);
- an executor that starts a shell with ``-c``;
- an ``env`` value read from the importing process (``${env:NAME}``);
- a ``pass_env`` name beyond the default ones.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, fields, is_dataclass, replace
from datetime import timedelta
from enum import Enum
from pathlib import Path

from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.files.model import (
    Action,
    AgentSpec,
    BudgetSpec,
    Change,
    ImportPlan,
    OfficeConfig,
    ProjectSpec,
    RoutineSpec,
)
from office_scheduler.files.routine_sync import routine_label

_DEFAULT_PASS_ENV = frozenset(ExecutorConfig(name="default").pass_env)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})
#: Longest value shown on one line of a plan (the rest is elided).
MAX_SHOWN = 300


def review(plan: ImportPlan) -> ImportPlan:
    """``plan`` with the details and warnings of each created or updated record."""
    reviewed = []
    for change in plan.changes:
        if change.action is Action.UNCHANGED:
            reviewed.append(change)
            continue
        lines = list(_details(plan.config, change))
        details = tuple(f"{key}: {_shown(value)}" for key, value in lines)
        warnings = tuple(_warnings(plan.config, change, [key for key, _ in lines]))
        reviewed.append(replace(change, details=details, warnings=warnings))
    return replace(plan, changes=tuple(reviewed))


def _plain(value: object) -> object:
    """A JSON-able form of a plan value: a spec as its set fields, an enum as its value."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: v for k, v in asdict(value).items() if v not in (None, "", (), [], {})}
    if isinstance(value, Enum):
        return value.value
    return str(value)


def _shown(value: object) -> str:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, timedelta):
        value = value.total_seconds()
    # Strings with line breaks or control characters are quoted with escapes: a value
    # must not forge plan lines or hide text with terminal escape sequences.
    if isinstance(value, str) and value.isprintable():
        text = value
    else:
        text = json.dumps(value, default=_plain)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"…(+{len(text) - MAX_SHOWN})"


def _wanted(change: Change, key: str) -> bool:
    return change.action is Action.CREATE or key in change.fields


def _details(config: OfficeConfig, change: Change) -> Iterator[tuple[str, object]]:
    """``(key, value)`` of every field of a new record, or of the changed fields."""
    if change.kind == "workspace":
        settings = config.settings
        for key, value in (
            ("description", config.description),
            ("coalesce_window_s", settings.coalesce_window),
            ("recovery_lookback_hours", settings.recovery_lookback_hours),
            ("default_executor", settings.default_executor),
        ):
            if _wanted(change, key):
                yield key, value
        for name, executor in sorted(settings.executors.items()):
            if _wanted(change, f"executors.{name}"):
                yield from _executor_lines(config, name, executor)
        return
    spec = _spec(config, change)
    if spec is None:
        return
    for item in fields(spec):
        if item.name != "name" and _wanted(change, item.name):
            yield item.name, getattr(spec, item.name)


def _spec(
    config: OfficeConfig, change: Change
) -> AgentSpec | ProjectSpec | RoutineSpec | BudgetSpec | None:
    if change.kind == "agent":
        return next((a for a in config.agents if a.name == change.name), None)
    if change.kind == "project":
        return next((p for p in config.projects if p.name == change.name), None)
    if change.kind == "routine":
        specs = config.routines
        return next((r for r in specs if routine_label(r, specs) == change.name), None)
    if change.kind == "budget":
        return next((b for b in config.budgets if b.label == change.name), None)
    return None


def _executor_lines(
    config: OfficeConfig, name: str, executor: ExecutorConfig
) -> Iterator[tuple[str, object]]:
    refs = {ref.key: ref.variable for ref in config.env_references if ref.executor == name}
    env = [f"{key}=${{env:{refs[key]}}}" if key in refs else key for key in sorted(executor.env)]
    prefix = f"executors.{name}."
    yield prefix + "kind", executor.kind
    yield prefix + "argv", list(executor.argv)
    if executor.preset is not None:
        yield prefix + "preset", executor.preset
        yield prefix + "preset_args", list(executor.preset_args)
    yield prefix + "env", env
    yield prefix + "pass_env", list(executor.pass_env)
    yield prefix + "cwd", executor.cwd
    yield prefix + "timeout_s", executor.timeout_s
    yield prefix + "inactivity_timeout_s", executor.inactivity_timeout_s


def _warnings(config: OfficeConfig, change: Change, keys: Iterable[str]) -> Iterator[str]:
    shown = set(keys)
    if change.kind == "workspace":
        for name, executor in sorted(config.settings.executors.items()):
            if f"executors.{name}.argv" in shown:
                yield from _executor_warnings(config, name, executor)
    elif change.kind == "project":
        spec = next((p for p in config.projects if p.name == change.name), None)
        if spec is not None:
            if spec.directory and "directory" in shown:
                yield from _outside(config, "directory", spec.directory)
            for repo in spec.repos if "repos" in shown else ():
                yield from _outside(config, "repos", repo)


def _executor_warnings(config: OfficeConfig, name: str, executor: ExecutorConfig) -> Iterator[str]:
    prefix = f"executors.{name}."
    argv = executor.argv
    if argv and Path(argv[0]).name in _SHELLS and "-c" in argv[1:]:
        yield f"{prefix}argv starts a shell: {_shown(' '.join(argv))}"
    for arg in argv:
        if arg.startswith("/") and arg != sys.executable:
            yield from _outside(config, prefix + "argv", arg)
    if executor.cwd and executor.cwd.startswith("/"):
        yield from _outside(config, prefix + "cwd", executor.cwd)
    for ref in config.env_references:
        if ref.executor == name:
            yield (
                f"{prefix}env.{ref.key} is read from your environment: ${{env:{ref.variable}}}"
                " goes into the agent's environment"
            )
    extra = [variable for variable in executor.pass_env if variable not in _DEFAULT_PASS_ENV]
    if extra:
        yield (
            f"{prefix}pass_env copies {', '.join(extra)} from the server's environment into"
            " the agent's"
        )


def _outside(config: OfficeConfig, key: str, path: str) -> Iterator[str]:
    """A warning when ``path`` is not inside the config folder."""
    if config.root is None:
        return
    root = Path(config.root)
    resolved = Path(path).expanduser()
    if resolved == root or root in resolved.parents:
        return
    yield f"{key}: {_shown(path)} is outside the config folder {root}"
