"""The demo office switched to ACP with its one-line change (``sample: *acp``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from office_scheduler.store.facade import Store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWITCH = ("  sample: *stdin\n", "  sample: *acp\n")

RUN_DEMO = """
import sys
from pathlib import Path

import office_scheduler.cli.demo as demo
from office_scheduler.cli import main

demo.EXAMPLES = Path(sys.argv[1])
sys.argv = ["office", "demo", "--exit-when-idle"]
main()
"""


@pytest.mark.timeout(150)
def test_the_demo_runs_through_acp_after_the_one_line_switch(tmp_path: Path) -> None:
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES / "demo-office", copy / "demo-office")
    shutil.copytree(EXAMPLES / "agents", copy / "agents")
    office_yml = copy / "demo-office" / "office.yml"
    text = office_yml.read_text()
    assert text.count(SWITCH[0]) == 1, "office.yml lost its documented ACP switch"
    office_yml.write_text(text.replace(*SWITCH))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    env["OFFICE_HOME"] = str(tmp_path / "home")

    done = subprocess.run(
        [sys.executable, "-c", RUN_DEMO, str(copy / "demo-office")],
        env=env,
        capture_output=True,
        text=True,
        timeout=140,
        check=False,
    )

    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "The demo office finished its task." in done.stdout
    (home,) = (tmp_path / "home").glob("demo-*")
    store = Store.open(f"sqlite:///{home / 'office.db'}")
    try:
        (workspace,) = store.office.list_workspaces()
        runs = store.listing.list_runs(workspace_id=workspace.id, limit=100).items
        kinds = {e.kind for run in runs for e in store.runlog.list_run_events(run.id)}
    finally:
        store.close()
    assert "acp_session_new" in kinds
    assert "acp_session_loaded" in kinds  # the coordinator's later runs resumed its session
    assert "acp_session_fallback" not in kinds
    assert 'href="style.css"' in (home / "workspace" / "index.html").read_text()
