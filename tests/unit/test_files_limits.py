"""Runaway limits in the config files: load, import (plan and apply), export round trip."""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.files import Action, apply_import, export_config, load_config, plan_import
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store

OFFICE_YML = """\
workspace:
  name: Limited
limits:
  max_causation_depth: 8
  max_routine_runs_per_day: null
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def store(database: Database) -> Store:
    return Store.from_database(database)


def test_limits_load_import_and_export(store: Store, tmp_path: Path, now: datetime) -> None:
    root = _write(
        tmp_path / "office",
        {
            "office.yml": OFFICE_YML,
            "agents/ann.yml": "role: worker\nlimits:\n  max_runs_per_hour: 5\n",
            "agents/bob.yml": "role: worker\n",
        },
    )
    config = load_config(root)
    assert config.limits == {"max_causation_depth": 8, "max_routine_runs_per_day": None}
    assert [a.limits for a in config.agents] == [{"max_runs_per_hour": 5}, None]

    workspace_id = apply_import(store, plan_import(store, config), now)
    assert store.runaway.workspace_limits(workspace_id) == config.limits
    ann = store.office.find_agent_by_name(workspace_id, "ann")
    assert ann is not None
    assert store.runaway.agent_limits(ann.id) == {"max_runs_per_hour": 5}
    assert not plan_import(store, config).has_changes

    (root / "agents" / "ann.yml").write_text("role: worker\nlimits: {}\n")
    plan = plan_import(store, load_config(root))
    [change] = [c for c in plan.changes if c.name == "ann"]
    assert (change.action, change.fields) == (Action.UPDATE, ("limits",))
    apply_import(store, plan, now)
    assert store.runaway.agent_limits(ann.id) == {}

    exported = load_config(export_config(store, workspace_id, tmp_path / "exported"))
    assert exported.limits == config.limits
    assert [a.limits for a in exported.agents] == [None, None]


@pytest.mark.parametrize(
    ("files", "field"),
    [
        ({"office.yml": OFFICE_YML + "  max_loops: 1\n"}, "office.yml: limits.max_loops"),
        (
            {"office.yml": OFFICE_YML.replace("8", "-8")},
            "office.yml: limits.max_causation_depth",
        ),
        (
            {
                "office.yml": OFFICE_YML,
                "agents/ann.yml": "role: worker\nlimits:\n  max_workspace_runs_per_hour: 1\n",
            },
            "agents/ann.yml: limits.max_workspace_runs_per_hour",
        ),
        ({"office.yml": "workspace: {name: x}\nlimits: 3\n"}, "office.yml: limits"),
    ],
)
def test_bad_limits_name_file_and_key(tmp_path: Path, files: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_config(_write(tmp_path / "office", files))
    assert caught.value.field == field
