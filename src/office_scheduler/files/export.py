"""Writing a workspace back as a config directory that :func:`load_config` reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from office_scheduler.domain.errors import ConflictError
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.domain.routines import Routine, RoutineTrigger, RoutineVariable, TriggerKind
from office_scheduler.files.budgets import budgets_data
from office_scheduler.files.limits import limits_data
from office_scheduler.files.notifications import notifications_data
from office_scheduler.files.routines import trigger_order
from office_scheduler.files.secret_refs import env_reference
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


def _write(path: Path, data: Mapping[str, Any], header: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    path.write_text(header + text, encoding="utf-8")


def _executor_data(config: ExecutorConfig) -> dict[str, Any]:
    return {
        "kind": config.kind,
        "argv": list(config.argv),
        # Values are secrets: written as references, read back from the environment.
        "env": {name: env_reference(name) for name in config.env},
        "cwd": config.cwd,
        "timeout_s": _number(config.timeout_s),
        "inactivity_timeout_s": _number(config.inactivity_timeout_s),
        "stall_timeout_s": _number(config.stall_timeout_s),
        "pass_env": list(config.pass_env),
        **({"preset": config.preset} if config.preset else {}),
        **({"preset_args": list(config.preset_args)} if config.preset_args else {}),
    }


def _variable_data(variable: RoutineVariable) -> dict[str, Any]:
    data: dict[str, Any] = {"name": variable.name, "type": variable.type.value}
    if variable.default is not None:
        data["default"] = variable.default
    if variable.required:
        data["required"] = True
    if variable.options:
        data["options"] = list(variable.options)
    if variable.path:
        data["path"] = variable.path
    return data


def _trigger_data(trigger: RoutineTrigger) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": trigger.kind.value}
    if trigger.kind is TriggerKind.SCHEDULE:
        data |= {"cron": trigger.cron_expression, "timezone": trigger.timezone or "UTC"}
    elif trigger.kind is TriggerKind.WEBHOOK and trigger.signing_mode is not None:
        data["signing_mode"] = trigger.signing_mode.value
        if trigger.events is not None:
            data["events"] = trigger.events
    data["enabled"] = trigger.enabled
    return data


def _routine_data(
    routine: Routine, triggers: list[RoutineTrigger], agent_names: Mapping[str, str]
) -> tuple[dict[str, Any], str]:
    """A routine file's data and its header comment (the webhooks' URLs, never secrets)."""
    template = routine.task_template
    data = {
        "name": routine.name,
        "description": routine.description,
        "assignee": agent_names.get(routine.assignee_agent_id or ""),
        "status": routine.status.value,
        "concurrency_policy": routine.concurrency_policy.value,
        "catch_up_policy": routine.catch_up_policy.value,
        "catch_up_max": routine.catch_up_max,
        "task_template": (
            None
            if template is None
            else {"title": template.title, "description": template.description}
        ),
        "variables": [_variable_data(variable) for variable in routine.variables],
        "triggers": [_trigger_data(trigger) for trigger in triggers],
    }
    hooks = [
        f"#   triggers[{index}]: POST /api/routine-triggers/{trigger.public_id}/fire\n"
        for index, trigger in enumerate(triggers)
        if trigger.kind is TriggerKind.WEBHOOK and trigger.public_id
    ]
    header = ""
    if hooks:
        header = (
            "# Webhook URLs (import keeps a matching webhook trigger, its URL and its secret;\n"
            "# secrets are never exported):\n" + "".join(hooks)
        )
    return data, header


def _limits_entry(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"limits": ...}`` when runaway limits are set, else nothing."""
    data = limits_data(values)
    return {} if data is None else {"limits": data}


def export_config(store: Store, workspace_id: str, directory: Path | str) -> Path:
    """Write the workspace's config to ``directory`` in the format :func:`load_config` reads.

    Executor ``env`` values are never written: each is the reference ``${env:NAME}``,
    which ``office import`` reads from its own environment. Routine files name their
    assignee by agent name; webhook secrets are not written, and public ids only in a
    comment.

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
    office_data: dict[str, Any] = {
        "workspace": {"name": workspace.name, "description": workspace.description},
        "settings": {
            "coalesce_window_s": _number(settings.coalesce_window.total_seconds()),
            "recovery_lookback_hours": settings.recovery_lookback_hours,
            "prompt_max_wakes": settings.prompt_max_wakes,
            "prompt_max_wake_bytes": settings.prompt_max_wake_bytes,
            "default_executor": settings.default_executor,
        },
        "executors": {name: _executor_data(cfg) for name, cfg in settings.executors.items()},
        "budgets": budgets_data(store, workspace_id),
        **_limits_entry(store.runaway.workspace_limits(workspace_id)),
    }
    channels = notifications_data(store, workspace_id)
    if channels:
        office_data["notifications"] = channels
    _write(root / "office.yml", office_data)
    taken: set[str] = set()
    all_agents = office.list_agents(workspace_id)
    names = {agent.id: agent.name for agent in all_agents}
    for agent in all_agents:
        data: dict[str, Any] = {
            "name": agent.name,
            "role": agent.role.value,
            "status": agent.status.value,
            "instructions": agent.instructions,
            "max_concurrent_sessions": agent.max_concurrent_sessions,
            "cooldown_s": _number(agent.cooldown.total_seconds()),
            "skip_idle_wakeups": agent.skip_idle_wakeups,
            "executor": agent.executor,
            "reports_to": names.get(agent.reports_to or ""),
            "permission_policy": agent.permission_policy,
        }
        if agent.paused_reason is not None:
            data["paused_reason"] = agent.paused_reason
        if agent.expected_run_cents is not None:
            data["expected_run_cents"] = agent.expected_run_cents
        data |= _limits_entry(store.runaway.agent_limits(agent.id))
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
    taken.clear()
    agent_names = {agent.id: agent.name for agent in office.list_agents(workspace_id)}
    for routine in store.routines.list_routines(workspace_id):
        triggers = sorted(
            store.routines.list_triggers(routine.id),
            key=lambda t: trigger_order(t.kind, t.cron_expression, t.timezone, t.signing_mode),
        )
        data, header = _routine_data(routine, triggers, agent_names)
        _write(root / "routines" / f"{_slug(routine.name, taken)}.yml", data, header)
    return root
