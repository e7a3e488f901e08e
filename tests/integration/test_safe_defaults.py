"""Safe defaults: owner-only data directory and database files, the admin token's line,
and an import that leaves pauses and stops made since the last import alone."""

from __future__ import annotations

import stat
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_harness import CLEAN_ENV
from office_scheduler.cli import office
from office_scheduler.cli.admin import admin_token_line
from office_scheduler.domain.status import AgentStatus
from office_scheduler.files import Action, load_config, plan_import, run_import
from office_scheduler.permissions import ensure_home, loose_modes
from office_scheduler.store.engine import Database, open_database
from office_scheduler.store.facade import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_database_and_its_wal_and_shm_files_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "office.db"
    db = open_database(f"sqlite:///{path}")
    try:
        with db.write() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert wal.exists()
        assert shm.exists()
        assert (mode(path), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
    finally:
        db.dispose()


def test_an_existing_database_keeps_its_mode_and_is_reported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    path = home / "office.db"
    path.touch()
    path.chmod(0o644)
    open_database(f"sqlite:///{path}").dispose()

    assert mode(path) == 0o644
    assert loose_modes(home, path) == [
        f"{home} is 0755 (want 0700)",
        f"{path} is 0644 (want 0600)",
    ]
    home.chmod(0o700)
    path.chmod(0o600)
    assert loose_modes(home, path) == []


def test_the_cli_creates_office_home_0700_and_the_database_0600(tmp_path: Path) -> None:
    home = tmp_path / "nested" / "home"
    result = CliRunner().invoke(
        office, ["db", "upgrade"], env={**CLEAN_ENV, "OFFICE_HOME": str(home)}
    )

    assert result.exit_code == 0, result.output
    assert mode(home) == 0o700
    assert mode(home / "office.db") == 0o600
    assert ensure_home(home) == home
    assert mode(home) == 0o700


def test_the_admin_token_itself_is_printed_only_on_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "admin_token"

    on_terminal = admin_token_line("s3cret", path, terminal=True)
    in_journal = admin_token_line("s3cret", path, terminal=False)

    assert "s3cret" in on_terminal
    assert str(path) in on_terminal
    assert "s3cret" not in in_journal
    assert in_journal.startswith(f"Admin token saved to {path}")


# -- import leaves statuses set since the last import alone -------------------------------

OFFICE_YML = """\
workspace: {name: Status Office}
settings: {default_executor: sample}
executors:
  sample: {kind: command, argv: ["true"]}
"""


def write_office(root: Path, status: str = "idle") -> Path:
    (root / "agents").mkdir(parents=True, exist_ok=True)
    (root / "office.yml").write_text(OFFICE_YML)
    agent = f"name: writer\nrole: worker\nstatus: {status}\n"
    (root / "agents" / "writer.yml").write_text(textwrap.dedent(agent))
    return root


@pytest.fixture
def store(database: Database) -> Store:
    return Store.from_database(database)


def writer_change(
    store: Store, root: Path, *, reset_status: bool = False
) -> tuple[Action, tuple[str, ...], str]:
    plan = plan_import(store, load_config(root), reset_status=reset_status)
    change = next(c for c in plan.changes if c.kind == "agent")
    return change.action, change.fields, change.note


@pytest.mark.parametrize("status", [AgentStatus.PAUSED, AgentStatus.STOPPED])
def test_import_keeps_a_status_set_since_the_last_import_unless_reset(
    store: Store, tmp_path: Path, now: datetime, status: AgentStatus
) -> None:
    root = write_office(tmp_path / "office")
    workspace_id = run_import(store, plan_import(store, load_config(root)), now).workspace_id
    writer = store.office.find_agent_by_name(workspace_id, "writer")
    assert writer is not None
    assert writer.imported_status is AgentStatus.IDLE
    store.office.change_agent_status(writer.id, status, now=now + timedelta(minutes=1))
    (root / "agents" / "writer.yml").write_text("name: writer\nrole: worker\ninstructions: new\n")

    action, fields, note = writer_change(store, root)
    plan = plan_import(store, load_config(root))
    run_import(store, plan, now + timedelta(minutes=2))

    assert (action, fields) == (Action.UPDATE, ("instructions",))
    assert note == (f"keeps status {status.value} (set since last import; --reset-status to apply)")
    kept = store.office.get_agent(writer.id)
    assert (kept.status, kept.instructions) == (status, "new")

    action, fields, note = writer_change(store, root, reset_status=True)
    assert "status" in fields
    assert note == ""
    run_import(store, plan_import(store, load_config(root), reset_status=True), now)
    reset = store.office.get_agent(writer.id)
    assert (reset.status, reset.imported_status) == (AgentStatus.IDLE, AgentStatus.IDLE)


def test_import_changes_a_status_the_last_import_set(
    store: Store, tmp_path: Path, now: datetime
) -> None:
    root = write_office(tmp_path / "office", status="paused")
    workspace_id = run_import(store, plan_import(store, load_config(root)), now).workspace_id
    write_office(root, status="idle")

    action, fields, note = writer_change(store, root)
    run_import(store, plan_import(store, load_config(root)), now + timedelta(minutes=1))

    assert (action, fields, note) == (Action.UPDATE, ("status",), "")
    writer = store.office.find_agent_by_name(workspace_id, "writer")
    assert writer is not None
    assert (writer.status, writer.imported_status) == (AgentStatus.IDLE, AgentStatus.IDLE)


def test_the_cli_import_plan_says_what_it_keeps_and_reset_status_applies_it(
    tmp_path: Path,
) -> None:
    home, root = tmp_path / "home", write_office(tmp_path / "office")
    env = {**CLEAN_ENV, "OFFICE_HOME": str(home)}
    runner = CliRunner()
    assert runner.invoke(office, ["import", str(root), "--yes"], env=env).exit_code == 0
    store = Store.open(f"sqlite:///{home / 'office.db'}")
    try:
        (workspace,) = store.office.list_workspaces()
        writer = store.office.find_agent_by_name(workspace.id, "writer")
        assert writer is not None
        store.office.change_agent_status(writer.id, AgentStatus.PAUSED, now=datetime.now(UTC))

        kept = runner.invoke(office, ["import", str(root), "--yes"], env=env)
        assert store.office.get_agent(writer.id).status is AgentStatus.PAUSED
        reset = runner.invoke(office, ["import", str(root), "--yes", "--reset-status"], env=env)
        assert store.office.get_agent(writer.id).status is AgentStatus.IDLE
    finally:
        store.close()

    assert kept.exit_code == 0, kept.output
    assert "keeps status paused (set since last import; --reset-status to apply)" in kept.stdout
    assert "Nothing to change." in kept.stdout
    assert reset.exit_code == 0, reset.output
    assert "Applied." in reset.stdout
