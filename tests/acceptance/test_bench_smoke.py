"""The benchmark harness runs end to end with tiny sizes (``python -m bench --smoke``).

It keeps ``make bench`` from rotting: every benchmark must run, print its table and write
its results file, and the three throughput contenders must agree on the work they did.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "1 throughput sqlite",
    "2 claim sqlite",
    "4 cron",
    "5 recovery sqlite",
    "6 event->launch",
    "7 memory",
)
PG_SECTIONS = (
    "3 throughput postgres",
    "3 claim postgres",
    "3 scale-out postgres",
    "3 peer procrastinate",
    "5 recovery postgres",
)


@pytest.mark.timeout(300)
def test_bench_smoke_runs_every_benchmark(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    postgres = bool(os.environ.get("TEST_DATABASE_URL"))
    argv = [sys.executable, "-m", "bench", "--smoke", "--output", str(output)]
    if not postgres:
        argv.append("--no-postgres")
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "| benchmark" in done.stdout

    results = json.loads(output.read_text())
    assert results["errors"] == {}
    sections = {row["bench"] for row in results["rows"]}
    expected = SECTIONS + (PG_SECTIONS if postgres else ())
    assert set(expected) <= sections, sorted(sections)
    for row in results["rows"]:
        assert math.isfinite(row["value"]), row
        assert row["value"] > 0, row
        assert (row["ok"] is None) == (row["goal"] == ""), row

    runs = results["details"]["throughput_sqlite"]["runs"]
    assert runs["product"] == runs["store"] == runs["raw"] > 0, runs

    plans = results["plans"]
    claim_plan = "\n".join(plans["claim sqlite blocked 2000"])
    assert "ix_runs_agent_status" in claim_plan, claim_plan
    assert plans["recovery sweep sqlite"], plans.keys()
    if postgres:
        assert any(
            line.lstrip().startswith("Limit") for line in plans["claim postgres blocked 2000"]
        )
