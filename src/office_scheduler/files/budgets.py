"""The ``budgets:`` list of ``office.yml``: load, export, plan and apply.

Each entry names its scope: ``scope: workspace``, or ``scope: project``/``agent`` with the
project's or agent's ``name``; then ``limit_cents``, ``period`` (``monthly``), ``alert_pct``
(80) and ``on_exceed`` (``pause_agent``). Import matches a policy by (scope, name), creates
or updates it, and never deletes one (like every other record).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from office_scheduler.domain.budgets import (
    SUBCENTS_PER_CENT,
    BudgetAction,
    BudgetPeriod,
    BudgetPolicy,
    BudgetScope,
)
from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.files.fields import Fields
from office_scheduler.files.model import Action, BudgetSpec, Change
from office_scheduler.store.facade import Store

#: Largest limit a file may set, in cents.
MAX_LIMIT_CENTS = 10**12


def load_budgets(data: object) -> tuple[BudgetSpec, ...]:
    """Read the ``budgets`` list of ``office.yml`` (absent: none).

    Raises:
        InvalidInputError: a malformed entry or a scope listed twice (``field`` names
            ``office.yml: budgets[i].key``).
    """
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InvalidInputError("office.yml: budgets: must be a list", field="office.yml: budgets")
    found: list[BudgetSpec] = []
    for index, item in enumerate(data):
        spec = Fields(item, "office.yml", f"budgets[{index}].")
        scope = BudgetScope(spec.choice("scope", BudgetScope))
        name = spec.optional_text("name")
        if (scope is BudgetScope.WORKSPACE) != (name is None):
            message = "is only for project and agent budgets (and required there)"
            raise spec.error("name", message)
        budget = BudgetSpec(
            scope=scope,
            name=name,
            limit_cents=spec.integer("limit_cents", 0, minimum=1, maximum=MAX_LIMIT_CENTS),
            period=BudgetPeriod(spec.choice("period", BudgetPeriod, BudgetPeriod.MONTHLY.value)),
            alert_pct=spec.integer("alert_pct", 80, minimum=1, maximum=100),
            on_exceed=BudgetAction(
                spec.choice("on_exceed", BudgetAction, BudgetAction.PAUSE_AGENT.value)
            ),
        )
        spec.done()
        if any(other.key == budget.key for other in found):
            raise spec.error("scope", f"{budget.label} already has a budget above")
        found.append(budget)
    return tuple(sorted(found, key=lambda b: b.key))


def check_budget_names(
    budgets: Iterable[BudgetSpec], agents: Iterable[str], projects: Iterable[str]
) -> None:
    """Every budget names an agent or project defined in the config.

    Raises:
        InvalidInputError: naming ``office.yml: budgets``.
    """
    known = {BudgetScope.AGENT: set(agents), BudgetScope.PROJECT: set(projects)}
    for budget in budgets:
        if budget.name is not None and budget.name not in known[budget.scope]:
            folder = "agents/" if budget.scope is BudgetScope.AGENT else "projects/"
            message = f"office.yml: budgets: {budget.label} is not defined in {folder}"
            raise InvalidInputError(message, field="office.yml: budgets")


def budgets_data(store: Store, workspace_id: str) -> list[dict[str, Any]]:
    """The workspace's policies as ``budgets`` entries of ``office.yml``."""
    agents = {agent.id: agent.name for agent in store.office.list_agents(workspace_id)}
    projects = {project.id: project.name for project in store.office.list_projects(workspace_id)}
    entries: list[dict[str, Any]] = []
    for policy in store.budgets.list_policies(workspace_id):
        entry: dict[str, Any] = {"scope": policy.scope_kind.value}
        if policy.scope_kind is not BudgetScope.WORKSPACE:
            names = agents if policy.scope_kind is BudgetScope.AGENT else projects
            entry["name"] = names.get(policy.scope_id, policy.scope_id)
        entry |= {
            "limit_cents": policy.limit_cents,
            "period": policy.period.value,
            "alert_pct": policy.alert_threshold_pct,
            "on_exceed": policy.action_on_exceed.value,
        }
        entries.append(entry)
    return entries


def _scope_ids(store: Store, workspace_id: str) -> dict[tuple[BudgetScope, str], str]:
    ids = {(BudgetScope.AGENT, a.name): a.id for a in store.office.list_agents(workspace_id)}
    for project in store.office.list_projects(workspace_id):
        ids[(BudgetScope.PROJECT, project.name)] = project.id
    return ids


def _existing(store: Store, workspace_id: str) -> dict[tuple[BudgetScope, str], BudgetPolicy]:
    return {(p.scope_kind, p.scope_id): p for p in store.budgets.list_policies(workspace_id)}


def _diff(policy: BudgetPolicy, budget: BudgetSpec) -> list[str]:
    pairs: list[tuple[str, object, object]] = [
        ("limit_cents", policy.limit_cents, budget.limit_cents),
        ("period", policy.period, budget.period),
        ("alert_pct", policy.alert_threshold_pct, budget.alert_pct),
        ("on_exceed", policy.action_on_exceed, budget.on_exceed),
    ]
    return [key for key, before, after in pairs if before != after]


def _target(
    workspace_id: str, budget: BudgetSpec, ids: Mapping[tuple[BudgetScope, str], str]
) -> str | None:
    if budget.name is None:
        return workspace_id
    return ids.get((budget.scope, budget.name))


def plan_budgets(
    store: Store, workspace_id: str | None, budgets: Iterable[BudgetSpec]
) -> list[Change]:
    """One change per budget entry (``kind`` ``budget``, ``name`` its label)."""
    ids = {} if workspace_id is None else _scope_ids(store, workspace_id)
    existing = {} if workspace_id is None else _existing(store, workspace_id)
    changes = []
    for budget in budgets:
        target = None if workspace_id is None else _target(workspace_id, budget, ids)
        policy = None if target is None else existing.get((budget.scope, target))
        if policy is None:
            changes.append(Change(kind="budget", name=budget.label, action=Action.CREATE))
        else:
            fields = tuple(_diff(policy, budget))
            action = Action.UPDATE if fields else Action.UNCHANGED
            changes.append(Change(kind="budget", name=budget.label, action=action, fields=fields))
    return changes


def apply_budgets(
    store: Store, workspace_id: str, budgets: Iterable[BudgetSpec], now: datetime
) -> None:
    """Create or update the policies of ``budgets`` (after agents and projects exist).

    Raises:
        NotFoundError: a named agent or project does not exist.
    """
    ids = _scope_ids(store, workspace_id)
    existing = _existing(store, workspace_id)
    for budget in budgets:
        target = _target(workspace_id, budget, ids)
        if target is None:
            raise NotFoundError(f"{budget.label} not found", field="budgets")
        policy = existing.get((budget.scope, target))
        values: dict[str, Any] = {
            "limit_subcents": budget.limit_cents * SUBCENTS_PER_CENT,
            "period": budget.period,
            "alert_threshold_pct": budget.alert_pct,
            "action_on_exceed": budget.on_exceed,
        }
        if policy is None:
            store.budgets.create_policy(
                workspace_id=workspace_id,
                scope_kind=budget.scope,
                scope_id=target,
                now=now,
                **values,
            )
        elif _diff(policy, budget):
            store.budgets.update_policy(policy.id, now=now, **values)
