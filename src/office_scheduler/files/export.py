"""Writing a workspace back as a config directory that :func:`load_config` reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from office_scheduler.domain.errors import ConflictError
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.store.facade import Store


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks, for readable instructions."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _slug(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "item"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _write(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    path.write_text(text, encoding="utf-8")


def _executor_data(config: ExecutorConfig) -> dict[str, Any]:
    return {
        "kind": config.kind,
        "argv": list(config.argv),
        "env": dict(config.env),
        "cwd": config.cwd,
        "timeout_s": _number(config.timeout_s),
        "inactivity_timeout_s": _number(config.inactivity_timeout_s),
        "pass_env": list(config.pass_env),
    }


def export_config(store: Store, workspace_id: str, directory: Path | str) -> Path:
    """Write the workspace's config to ``directory`` in the format :func:`load_config` reads.

    Executor ``env`` values are written as stored.

    Returns:
        The directory written.

    Raises:
        NotFoundError: no such workspace.
        ConflictError: ``directory`` exists and is not empty.
    """
    office = store.office
    workspace = office.get_workspace(workspace_id)
    root = Path(directory).expanduser().resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ConflictError(f"{root} exists and is not an empty directory", field="directory")
    settings = workspace.settings
    _write(
        root / "office.yml",
        {
            "workspace": {"name": workspace.name, "description": workspace.description},
            "settings": {
                "coalesce_window_s": _number(settings.coalesce_window.total_seconds()),
                "recovery_lookback_hours": settings.recovery_lookback_hours,
                "default_executor": settings.default_executor,
            },
            "executors": {name: _executor_data(cfg) for name, cfg in settings.executors.items()},
        },
    )
    taken: set[str] = set()
    for agent in office.list_agents(workspace_id):
        data: dict[str, Any] = {
            "name": agent.name,
            "role": agent.role.value,
            "status": agent.status.value,
            "instructions": agent.instructions,
            "max_concurrent_sessions": agent.max_concurrent_sessions,
            "cooldown_s": _number(agent.cooldown.total_seconds()),
            "skip_idle_wakeups": agent.skip_idle_wakeups,
            "executor": agent.executor,
        }
        _write(root / "agents" / f"{_slug(agent.name, taken)}.yml", data)
    taken.clear()
    for project in office.list_projects(workspace_id):
        data = {
            "name": project.name,
            "description": project.description,
            "directory": project.directory,
            "executor": project.executor,
            "repos": list(project.repos),
        }
        _write(root / "projects" / f"{_slug(project.name, taken)}.yml", data)
    return root
