"""Planning and applying an import: match by name, create or update, never delete records."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import Agent, Project, WorkspaceSettings
from office_scheduler.domain.status import AgentStatus
from office_scheduler.files.budgets import apply_budgets, plan_budgets
from office_scheduler.files.limits import (
    agent_limits_changed,
    apply_limits,
    workspace_limits_changed,
)
from office_scheduler.files.model import (
    Action,
    AgentSpec,
    Change,
    ImportPlan,
    ImportResult,
    OfficeConfig,
    ProjectSpec,
)
from office_scheduler.files.notifications import apply_notifications, plan_notifications
from office_scheduler.files.review import review
from office_scheduler.files.routine_sync import apply_routines, plan_routines
from office_scheduler.store.facade import Store


def _settings_diff(old: WorkspaceSettings, new: WorkspaceSettings) -> list[str]:
    changed = [
        key
        for key, before, after in (
            ("coalesce_window_s", old.coalesce_window, new.coalesce_window),
            ("recovery_lookback_hours", old.recovery_lookback_hours, new.recovery_lookback_hours),
            ("prompt_max_wakes", old.prompt_max_wakes, new.prompt_max_wakes),
            ("prompt_max_wake_bytes", old.prompt_max_wake_bytes, new.prompt_max_wake_bytes),
            ("default_executor", old.default_executor, new.default_executor),
        )
        if before != after
    ]
    names = sorted(set(old.executors) | set(new.executors))
    changed += [
        f"executors.{name}" for name in names if old.executors.get(name) != new.executors.get(name)
    ]
    return changed


def _agent_values(spec: AgentSpec) -> dict[str, object]:
    """The store values of an agent file, but ``reports_to`` (a name, resolved later)."""
    return {
        "role": spec.role,
        "status": spec.status,
        "instructions": spec.instructions,
        "max_concurrent_sessions": spec.max_concurrent_sessions,
        "cooldown": timedelta(seconds=spec.cooldown_s),
        "skip_idle_wakeups": spec.skip_idle_wakeups,
        "executor": spec.executor,
        "permission_policy": spec.permission_policy,
        "paused_reason": spec.paused_reason,
        "expected_run_cents": spec.expected_run_cents,
    }


#: Store field → config key, where they differ (plans speak the config's language).
_CONFIG_KEYS = {"cooldown": "cooldown_s"}
_STORE_KEYS = {config: store for store, config in _CONFIG_KEYS.items()}


def _agent_diff(agent: Agent, spec: AgentSpec, names: dict[str, str]) -> list[str]:
    """Config keys whose value differs; ``names`` maps agent ids to names."""
    changed = [
        _CONFIG_KEYS.get(key, key)
        for key, value in _agent_values(spec).items()
        if getattr(agent, key) != value
    ]
    if names.get(agent.reports_to or "") != spec.reports_to:
        changed.append("reports_to")
    return changed


#: Statuses an import leaves alone when the system or a person set them.
_HELD_STATUSES = frozenset({AgentStatus.PAUSED, AgentStatus.STOPPED})
_STATUS_FIELDS = ("status", "paused_reason")


def _status_kept(agent: Agent, diff: list[str]) -> tuple[list[str], str]:
    """Drop status changes that would undo a pause or stop made since the last import.

    The rule: an agent ``paused`` or ``stopped`` with a status other than the one the last
    import set (or set by no import at all) keeps its status and ``paused_reason``.

    Returns:
        The remaining changed keys and the plan's note ("" when nothing is kept).
    """
    held = agent.status in _HELD_STATUSES and agent.status != agent.imported_status
    if not held or not any(key in diff for key in _STATUS_FIELDS):
        return diff, ""
    note = f"keeps status {agent.status.value} (set since last import; --reset-status to apply)"
    return [key for key in diff if key not in _STATUS_FIELDS], note


def _project_values(spec: ProjectSpec) -> dict[str, object]:
    return {
        "description": spec.description,
        "directory": spec.directory,
        "executor": spec.executor,
        "repos": spec.repos,
    }


def _project_diff(project: Project, spec: ProjectSpec) -> list[str]:
    return [key for key, value in _project_values(spec).items() if getattr(project, key) != value]


def _change(kind: str, name: str, fields: Sequence[str] | None, note: str = "") -> Change:
    if fields is None:
        return Change(kind=kind, name=name, action=Action.CREATE)
    action = Action.UPDATE if fields else Action.UNCHANGED
    return Change(kind=kind, name=name, action=action, fields=tuple(fields), note=note)


def plan_import(store: Store, config: OfficeConfig, *, reset_status: bool = False) -> ImportPlan:
    """Compare ``config`` with the store and list what an import would create or update.

    Records are matched by workspace name, then agent, project and routine name in that
    workspace (see :mod:`office_scheduler.files.routine_sync` for routines and triggers).
    Each created or updated record carries its values and warnings
    (:func:`office_scheduler.files.review.review`).

    An agent that is ``paused`` or ``stopped`` by the system or a person since the last
    import (its status is not the one the last import set) keeps that status and its
    ``paused_reason``, and the plan's ``note`` says so; ``reset_status`` applies the file's
    status anyway.
    """
    office = store.office
    workspace = office.find_workspace_by_name(config.name)
    changes: list[Change] = []
    if workspace is None:
        changes.append(_change("workspace", config.name, None))
    else:
        fields = ["description"] if workspace.description != config.description else []
        fields += _settings_diff(workspace.settings, config.settings)
        if workspace_limits_changed(store, workspace.id, config.limits):
            fields.append("limits")
        changes.append(_change("workspace", config.name, fields))
    names = (
        {}
        if workspace is None
        else {agent.id: agent.name for agent in office.list_agents(workspace.id)}
    )
    for agent_spec in config.agents:
        agent = (
            None if workspace is None else office.find_agent_by_name(workspace.id, agent_spec.name)
        )
        diff = None if agent is None else _agent_diff(agent, agent_spec, names)
        if (
            agent is not None
            and diff is not None
            and agent_limits_changed(store, agent.id, agent_spec)
        ):
            diff.append("limits")
        note = ""
        if agent is not None and diff is not None and not reset_status:
            diff, note = _status_kept(agent, diff)
        changes.append(_change("agent", agent_spec.name, diff, note))
    for project_spec in config.projects:
        project = (
            None
            if workspace is None
            else office.find_project_by_name(workspace.id, project_spec.name)
        )
        diff = None if project is None else _project_diff(project, project_spec)
        changes.append(_change("project", project_spec.name, diff))
    workspace_id = None if workspace is None else workspace.id
    changes += plan_routines(store, workspace_id, config.routines)
    changes += plan_budgets(store, workspace_id, config.budgets)
    changes += plan_notifications(store, workspace_id, config.notifications)
    return review(
        ImportPlan(
            config=config,
            workspace_id=None if workspace is None else workspace.id,
            changes=tuple(changes),
        )
    )


def apply_import(store: Store, plan: ImportPlan, now: datetime) -> str:
    """:func:`run_import`, returning only the workspace id.

    Secrets of webhook triggers created by the import are lost: use :func:`run_import` to
    show them.
    """
    return run_import(store, plan, now).workspace_id


def _apply_reports_to(
    store: Store,
    workspace_id: str,
    specs: Sequence[AgentSpec],
    by_key: dict[tuple[str, str], Change],
    now: datetime,
) -> None:
    """Set ``reports_to`` once every agent exists (a file may name one created later).

    Links are cleared first, then set, so a config that reverses a reporting line never
    meets a transient cycle.
    """
    office = store.office
    ids = {agent.name: agent.id for agent in office.list_agents(workspace_id)}
    todo = []
    for spec in specs:
        change = by_key[("agent", spec.name)]
        created = change.action is Action.CREATE and spec.reports_to is not None
        if created or "reports_to" in change.fields:
            todo.append(spec)
    for spec in todo:
        office.update_agent(ids[spec.name], now=now, reports_to=None)
    for spec in todo:
        if spec.reports_to is not None:
            office.update_agent(ids[spec.name], now=now, reports_to=ids[spec.reports_to])


def run_import(store: Store, plan: ImportPlan, now: datetime) -> ImportResult:
    """Create or update the records of ``plan`` (one store transaction per record or trigger).

    Project directories are created when missing. Routines come last, so a routine can name
    an agent the same import creates.

    Returns:
        The id of the imported workspace and the webhook triggers created, with their
        secrets: shown this once, the store never returns them.

    Raises:
        ConflictError: the store changed since the plan was made (a record it means to
            create now exists).
        NotFoundError: a record the plan means to update was removed meanwhile.
    """
    office, config = store.office, plan.config
    by_key = {(change.kind, change.name): change for change in plan.changes}
    head = by_key[("workspace", config.name)]
    if head.action is Action.CREATE:
        workspace_id = office.create_workspace(
            name=config.name, description=config.description, settings=config.settings, now=now
        ).id
    else:
        if plan.workspace_id is None:
            raise NotFoundError(f"workspace {config.name!r} not found", field="workspace")
        workspace_id = plan.workspace_id
        if head.action is Action.UPDATE:
            settings_changed = any(name not in ("description", "limits") for name in head.fields)
            office.update_workspace(
                workspace_id,
                now=now,
                description=config.description if "description" in head.fields else None,
                settings=config.settings if settings_changed else None,
            )
    for agent_spec in config.agents:
        change = by_key[("agent", agent_spec.name)]
        values = _agent_values(agent_spec)
        if change.action is Action.CREATE:
            office.create_agent(
                workspace_id=workspace_id,
                name=agent_spec.name,
                role=agent_spec.role,
                now=now,
                instructions=agent_spec.instructions,
                max_concurrent_sessions=agent_spec.max_concurrent_sessions,
                cooldown=timedelta(seconds=agent_spec.cooldown_s),
                skip_idle_wakeups=agent_spec.skip_idle_wakeups,
                executor=agent_spec.executor,
                status=agent_spec.status,
                permission_policy=agent_spec.permission_policy,
                expected_run_cents=agent_spec.expected_run_cents,
            )
            created = office.find_agent_by_name(workspace_id, agent_spec.name)
            assert created is not None
            marks: dict[str, object] = {"imported_status": agent_spec.status}
            if agent_spec.paused_reason is not None:
                marks["paused_reason"] = agent_spec.paused_reason
            office.update_agent(created.id, now=now, **marks)
        elif change.action is Action.UPDATE:
            agent = office.find_agent_by_name(workspace_id, agent_spec.name)
            if agent is None:
                raise NotFoundError(f"agent {agent_spec.name!r} not found", field="agent")
            changes = {
                _STORE_KEYS.get(k, k): values[_STORE_KEYS.get(k, k)]
                for k in change.fields
                if k not in ("reports_to", "limits")
            }
            if "status" in changes:
                changes["imported_status"] = agent_spec.status
            if changes:
                office.update_agent(agent.id, now=now, **changes)
    _apply_reports_to(store, workspace_id, config.agents, by_key, now)
    for project_spec in config.projects:
        change = by_key[("project", project_spec.name)]
        if project_spec.directory is not None:
            Path(project_spec.directory).mkdir(parents=True, exist_ok=True)
        project_values = _project_values(project_spec)
        if change.action is Action.CREATE:
            office.create_project(
                workspace_id=workspace_id,
                name=project_spec.name,
                now=now,
                description=project_spec.description,
                directory=project_spec.directory,
                executor=project_spec.executor,
                repos=project_spec.repos,
            )
        elif change.action is Action.UPDATE:
            project = office.find_project_by_name(workspace_id, project_spec.name)
            if project is None:
                raise NotFoundError(f"project {project_spec.name!r} not found", field="project")
            office.update_project(
                project.id, now=now, **{k: project_values[k] for k in change.fields}
            )
    routine_changes = [change for change in plan.changes if change.kind == "routine"]
    webhooks = apply_routines(store, workspace_id, config.routines, routine_changes, now)
    apply_budgets(store, workspace_id, config.budgets, now)
    apply_limits(store, workspace_id, config.limits, config.agents, plan.changes, now)
    apply_notifications(store, workspace_id, config.notifications, now)
    return ImportResult(workspace_id=workspace_id, new_webhooks=tuple(webhooks))
