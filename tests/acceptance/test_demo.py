"""``office demo --exit-when-idle`` end to end: real server, scheduler and agent processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from office_scheduler.domain.status import TaskState
from office_scheduler.store.facade import Store
from office_scheduler.store.schema import runs


@pytest.mark.timeout(120)
def test_demo_finishes_the_starter_task(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    env["OFFICE_HOME"] = str(tmp_path)

    done = subprocess.run(
        [sys.executable, "-m", "office_scheduler", "demo", "--exit-when-idle"],
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )

    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr
    assert "The demo office finished its task." in done.stdout
    for kind in ("wake", "start", "done"):
        assert f"] {kind} " in done.stdout
    (home,) = tmp_path.glob("demo-*")
    store = Store.open(f"sqlite:///{home / 'office.db'}")
    try:
        (workspace,) = store.office.list_workspaces()
        tasks = store.office.list_tasks(workspace.id, limit=100).items
        with store.db.read() as conn:
            statuses = [row.status for row in conn.execute(sa.select(runs.c.status))]
            ran = conn.execute(
                sa.select(sa.func.count()).select_from(runs).where(runs.c.started_at.is_not(None))
            ).scalar_one()
    finally:
        store.close()
    starter = next(task for task in tasks if task.parent_id is None)
    assert starter.title == "Build a tiny greeting web page"
    assert starter.state is TaskState.DONE
    subtasks = [task for task in tasks if task.parent_id == starter.id]
    assert len(subtasks) >= 2
    assert all(task.state is TaskState.DONE for task in subtasks)
    assert len(statuses) >= 4
    assert ran >= 4
    assert set(statuses) == {"finished"}
    written = {path.name for path in (home / "workspace").iterdir()}
    assert {"index.html", "style.css", "REVIEW.md"} <= written
    assert 'href="style.css"' in (home / "workspace" / "index.html").read_text()
    assert "Verdict: approved" in (home / "workspace" / "REVIEW.md").read_text()
