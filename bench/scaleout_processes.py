"""Benchmark 3b: the scale-out pace goal with real processes.

Four ``office serve`` processes on one PostgreSQL schema take in 10,000 wakes over 200
agents (explicit wakes in batches, task assignments, comments, finished subtasks and
blockers) while the maintenance leader is SIGKILLed halfway; the goal is that all of them
are taken in (answered) within 120 seconds. It runs the acceptance test
``tests/acceptance/test_scale_out.py`` at that size (the test itself runs a smaller load in
CI and asserts only what must hold whatever the machine's speed), after waiting for a quiet
machine, and reports the seconds the sender needed and how long the office took to settle.
It takes about five minutes; ``--smoke`` skips it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import Results, pg_url, progress

ROOT = Path(__file__).resolve().parent.parent
TEST = ROOT / "tests" / "acceptance" / "test_scale_out.py"
#: The goal: this many wakes over this many agents within this many seconds.
WAKES = 10_000
AGENTS = 200
WINDOW_S = 120.0


def run(results: Results, *, wakes: int = WAKES, window_s: float = WINDOW_S) -> None:
    """Run the scale-out scenario at ``wakes`` / ``window_s`` and add its row.

    Raises:
        RuntimeError: the scenario's invariants failed (the test's output is included).
    """
    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as scratch:
        report = Path(scratch) / "figures.json"
        env = {
            **os.environ,
            "TEST_DATABASE_URL": pg_url(),
            "OFFICE_SCALE_WAKES": str(wakes),
            "OFFICE_SCALE_AGENTS": str(AGENTS),
            "OFFICE_SCALE_SEND_S": str(window_s),
            "OFFICE_SCALE_QUIET": "1",
            "OFFICE_SCALE_REPORT": str(report),
        }
        progress(f"scale-out processes: {wakes:,} wakes through 4 servers (a few minutes)")
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rP", "-p", "no:cacheprovider", str(TEST)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not report.exists():
            raise RuntimeError(f"the scale-out scenario failed:\n{done.stdout}\n{done.stderr}")
        figures: dict[str, float] = json.loads(report.read_text())
    results.details["scaleout_processes"] = figures
    sent_s = float(figures["sent_s"])
    results.add(
        "3b scale-out processes",
        f"{int(figures['wakes']):,} wakes taken in, 4 processes, 1 SIGKILLed",
        sent_s,
        "s",
        goal=f"<= {window_s:.0f} s",
        ok=sent_s <= window_s,
        note=(
            f"{figures['wakes'] / sent_s:,.0f} wakes/s; settled {figures['settled_s']:.0f} s "
            f"later; {int(figures['runs']):,} runs"
        ),
    )
