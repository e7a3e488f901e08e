"""The ``notifications:`` mapping of ``office.yml``: validation, import, export as references."""

from __future__ import annotations

import base64
import textwrap
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.files import Action, apply_import, export_config, load_config, plan_import
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store

SECRET = "whsec_" + base64.b64encode(b"k" * 24).decode()
OFFICE_YML = """\
workspace:
  name: Loud Office
executors:
  cli: {kind: command, argv: [agent]}
notifications:
  ops:
    kind: webhook
    url: ${env:OPS_HOOK_URL}
    secret: ${env:OPS_HOOK_SECRET}
    events: [approval.requested, run.failed]
  team:
    kind: slack
    url: https://hooks.slack.example/services/T/B/X
"""


@pytest.fixture
def store(database: Database) -> Store:
    return Store.from_database(database)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOOK_URL", "http://127.0.0.1:9000/hooks")
    monkeypatch.setenv("OPS_HOOK_SECRET", SECRET)


def _write(root: Path, office_yml: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "office.yml").write_text(textwrap.dedent(office_yml))
    return root


@pytest.mark.usefixtures("env")
def test_channels_import_and_export_their_credentials_as_references(
    store: Store, tmp_path: Path, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(_write(tmp_path / "office", OFFICE_YML))
    plan = plan_import(store, config)
    changes = {c.name: c.action for c in plan.changes if c.kind == "notification"}
    assert changes == {"ops": Action.CREATE, "team": Action.CREATE}
    workspace_id = apply_import(store, plan, now)
    ops, team = store.notifications.list_channels(workspace_id)
    assert (ops.url, ops.secret, ops.events) == (
        "http://127.0.0.1:9000/hooks",
        SECRET,
        ("approval.requested", "run.failed"),
    )
    assert (team.kind.value, team.secret, team.events) == ("slack", None, ())
    assert not plan_import(store, config).has_changes

    exported = export_config(store, workspace_id, tmp_path / "exported")
    text = (exported / "office.yml").read_text()
    assert SECRET not in text
    assert "127.0.0.1:9000" not in text
    data = yaml.safe_load(text)["notifications"]
    assert data["ops"]["url"] == "${env:NOTIFY_OPS_URL}"
    assert data["ops"]["secret"] == "${env:NOTIFY_OPS_SECRET}"
    assert data["team"] == {"kind": "slack", "url": "${env:NOTIFY_TEAM_URL}"}

    monkeypatch.setenv("NOTIFY_OPS_URL", "http://127.0.0.1:9000/hooks")
    monkeypatch.setenv("NOTIFY_OPS_SECRET", SECRET)
    monkeypatch.setenv("NOTIFY_TEAM_URL", "https://hooks.slack.example/services/T/B/X")
    assert not plan_import(store, load_config(exported)).has_changes

    monkeypatch.setenv("NOTIFY_TEAM_URL", "https://hooks.slack.example/services/T/B/Y")
    [change] = [c for c in plan_import(store, load_config(exported)).changes if c.name == "team"]
    assert (change.action, change.fields) == (Action.UPDATE, ("url",))


def test_channel_names_that_read_alike_export_distinct_references(
    store: Store, tmp_path: Path, now: datetime
) -> None:
    workspace = store.office.create_workspace(
        name="Loud Office", settings=WorkspaceSettings(), now=now
    )
    workspace_id = workspace.id
    names = ("ops-team", "ops.team", "ops_team")
    for index, name in enumerate(names):
        values: dict[str, object] = {"kind": "slack", "secret": None, "events": []}
        values |= {"url": f"https://hooks.slack.example/{index}", "enabled": True}
        store.notifications.put_channel(workspace_id, name, values, now=now)

    exported = export_config(store, workspace_id, tmp_path / "exported")
    data = yaml.safe_load((exported / "office.yml").read_text())["notifications"]
    assert [data[name]["url"] for name in names] == [
        "${env:NOTIFY_OPS_TEAM_URL}",
        "${env:NOTIFY_OPS_TEAM_2_URL}",
        "${env:NOTIFY_OPS_TEAM_3_URL}",
    ]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("ops: {kind: pager, url: 'http://x', secret: S}", "office.yml: notifications.ops.kind"),
        ("ops: {url: 'http://x'}", "office.yml: notifications.ops.secret"),
        ("ops: {url: 'ftp://x', secret: S}", "office.yml: notifications.ops.url"),
        (
            "ops: {url: 'http://x', secret: S, events: [nope]}",
            "office.yml: notifications.ops.events",
        ),
        ("ops: {url: 'http://x', secret: S, colour: red}", "office.yml: notifications.ops.colour"),
        ("ops: {url: '${env:NOT_SET_ANYWHERE}', secret: S}", "office.yml: notifications.ops.url"),
        ("'bad name': {url: 'http://x', secret: S}", "office.yml: notifications.bad name"),
        ("ops: {url: '${env:OFFICE_TOKEN}', secret: S}", "office.yml: notifications.ops.url"),
    ],
)
def test_bad_channel_entries_name_the_key(tmp_path: Path, entry: str, field: str) -> None:
    head = OFFICE_YML.split("notifications:")[0]
    body = entry.replace("secret: S", f"secret: '{SECRET}'")
    with pytest.raises(InvalidInputError) as bad:
        load_config(_write(tmp_path / "office", f"{head}notifications:\n  {body}\n"))
    assert bad.value.field == field


def test_office_variables_need_allow_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFICE_HOOK_URL", "http://127.0.0.1:9/h")
    head = OFFICE_YML.split("notifications:")[0]
    root = _write(
        tmp_path / "office",
        f"{head}notifications:\n  ops: {{url: '${{env:OFFICE_HOOK_URL}}', secret: '{SECRET}'}}\n",
    )
    with pytest.raises(InvalidInputError, match="--allow-env OFFICE_HOOK_URL"):
        load_config(root)
    [channel] = load_config(root, allow_env=["OFFICE_HOOK_URL"]).notifications
    assert channel.values["url"] == "http://127.0.0.1:9/h"
