"""The ``budgets:`` list of ``office.yml``: loading, validation, import and the round trip."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from office_scheduler.domain.budgets import BudgetAction, BudgetPeriod, BudgetScope
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.files import Action, apply_import, export_config, load_config, plan_import
from office_scheduler.files.model import BudgetSpec
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store

OFFICE_YML = """\
workspace:
  name: Budget Office
settings:
  default_executor: cli
executors:
  cli: {kind: command, argv: [agent]}
budgets:
  - {scope: workspace, limit_cents: 50000, on_exceed: block_new_runs}
  - {scope: agent, name: coder, limit_cents: 2000, alert_pct: 90}
  - {scope: project, name: site, limit_cents: 700, period: lifetime, on_exceed: notify}
"""


def _write(root: Path, office_yml: str) -> Path:
    files = {
        "office.yml": office_yml,
        "agents/coder.yml": "role: worker\n",
        "agents/lead.yml": "role: coordinator\n",
        "projects/site.yml": "name: site\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def store(database: Database) -> Store:
    return Store.from_database(database)


def test_budgets_load_with_defaults(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path / "office", OFFICE_YML))
    assert config.budgets == (
        BudgetSpec(scope=BudgetScope.AGENT, name="coder", limit_cents=2000, alert_pct=90),
        BudgetSpec(
            scope=BudgetScope.PROJECT,
            name="site",
            limit_cents=700,
            period=BudgetPeriod.LIFETIME,
            on_exceed=BudgetAction.NOTIFY,
        ),
        BudgetSpec(
            scope=BudgetScope.WORKSPACE, limit_cents=50000, on_exceed=BudgetAction.BLOCK_NEW_RUNS
        ),
    )


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("{scope: team, limit_cents: 5}", "office.yml: budgets[0].scope"),
        ("{scope: agent, limit_cents: 5}", "office.yml: budgets[0].name"),
        ("{scope: workspace, name: x, limit_cents: 5}", "office.yml: budgets[0].name"),
        ("{scope: workspace, limit_cents: 0}", "office.yml: budgets[0].limit_cents"),
        ("{scope: workspace, limit_cents: 5, alert_pct: 101}", "office.yml: budgets[0].alert_pct"),
        ("{scope: workspace, limit_cents: 5, cap: 1}", "office.yml: budgets[0].cap"),
        ("{scope: agent, name: ghost, limit_cents: 5}", "office.yml: budgets"),
    ],
)
def test_bad_budget_entries_name_the_key(tmp_path: Path, entry: str, field: str) -> None:
    head = OFFICE_YML.split("budgets:")[0]
    with pytest.raises(InvalidInputError) as bad:
        load_config(_write(tmp_path / "office", f"{head}budgets:\n  - {entry}\n"))
    assert bad.value.field == field


def test_import_export_round_trip_and_update(store: Store, tmp_path: Path, now: datetime) -> None:
    config = load_config(_write(tmp_path / "office", OFFICE_YML))
    plan = plan_import(store, config)
    budget_changes = {c.name: c.action for c in plan.changes if c.kind == "budget"}
    assert budget_changes == {
        "workspace": Action.CREATE,
        "agent coder": Action.CREATE,
        "project site": Action.CREATE,
    }
    workspace_id = apply_import(store, plan, now)
    policies = store.budgets.list_policies(workspace_id)
    assert [(p.scope_kind, p.limit_cents) for p in policies] == [
        (BudgetScope.WORKSPACE, 50000),
        (BudgetScope.PROJECT, 700),
        (BudgetScope.AGENT, 2000),
    ]
    assert not plan_import(store, config).has_changes

    reloaded = load_config(export_config(store, workspace_id, tmp_path / "exported"))
    assert reloaded.budgets == config.budgets
    assert not plan_import(store, reloaded).has_changes

    raised = replace(config, budgets=(replace(config.budgets[0], limit_cents=3000),))
    plan = plan_import(store, raised)
    [change] = [c for c in plan.changes if c.kind == "budget"]
    assert (change.name, change.action, change.fields) == (
        "agent coder",
        Action.UPDATE,
        ("limit_cents",),
    )
    apply_import(store, plan, now)
    coder = [p for p in store.budgets.list_policies(workspace_id) if p.scope_kind == "agent"]
    assert coder[0].limit_cents == 3000
    assert len(store.budgets.list_policies(workspace_id)) == 3  # import never deletes
