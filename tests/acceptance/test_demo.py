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
    assert "Routines: Coordinator heartbeat, Deploy hook, Nightly report" in done.stdout
    assert "Fired the 'Deploy hook' webhook: POST /api/routine-triggers/" in done.stdout
    assert "wake     routine → reviewer" in done.stdout
    (home,) = tmp_path.glob("demo-*")
    store = Store.open(f"sqlite:///{home / 'office.db'}")
    try:
        (workspace,) = store.office.list_workspaces()
        tasks = store.office.list_tasks(workspace.id, limit=100).items
        routines = {r.name: r for r in store.routines.list_routines(workspace.id)}
        agents = {a.id: a.name for a in store.office.list_agents(workspace.id)}
        hook_runs = store.routines.list_runs(routines["Deploy hook"].id)
        with store.db.read() as conn:
            statuses = [row.status for row in conn.execute(sa.select(runs.c.status))]
            ran = conn.execute(
                sa.select(sa.func.count()).select_from(runs).where(runs.c.started_at.is_not(None))
            ).scalar_one()
    finally:
        store.close()
    # The heartbeat file updated the routine installed with the coordinator: no second one.
    assert sorted(routines) == ["Coordinator heartbeat", "Deploy hook", "Nightly report"]
    assert agents[routines["Nightly report"].assignee_agent_id or ""] == "writer"
    (hook_run,) = hook_runs
    assert (hook_run.source.value, hook_run.status.value) == ("webhook", "done")
    assert hook_run.linked_run_id is not None
    starter = next(task for task in tasks if task.parent_id is None)
    assert starter.title == "Build a tiny greeting web page"
    assert starter.state is TaskState.DONE
    subtasks = [task for task in tasks if task.parent_id == starter.id]
    assert len(subtasks) >= 2
    assert all(task.state is TaskState.DONE for task in subtasks)
    assert len(statuses) >= 5  # at least 4 for the tasks, 1 for the webhook routine
    assert ran >= 5
    assert set(statuses) == {"finished"}
    written = {path.name for path in (home / "workspace").iterdir()}
    assert {"index.html", "style.css", "REVIEW.md"} <= written
    assert 'href="style.css"' in (home / "workspace" / "index.html").read_text()
    assert "Verdict: approved" in (home / "workspace" / "REVIEW.md").read_text()
