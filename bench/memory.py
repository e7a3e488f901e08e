"""Benchmark 7: peak RSS of a real ``office serve`` process over a large database.

A SQLite database gets 1,000 idle agents and ``runs`` finished runs (default 1,000,000),
seeded in bulk; ``office serve --port 0`` (API and scheduler) then runs as a subprocess
for a while (every loop makes its first passes: runs, cron, maintenance with the recovery
sweep, and ``/healthz`` and ``/api/v1/runs?limit=50`` are each requested once). The figure
is the kernel's high-water mark of its resident set (``VmHWM``). The same is measured with
an empty runs table as the baseline: the difference is what the rows cost in memory (it
should be near zero — nothing loads a table into memory).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from bench.common import Results, migrated, progress, scratch_dir
from bench.seed import RUN_COLUMNS, copy_rows, run_row, seed_office

NOW = datetime(2026, 2, 2, 12, 0, tzinfo=UTC)


def _rss_kib(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def _serve(home: Path, url: str, seconds: float) -> dict[str, float]:
    office = Path(sys.executable).parent / "office"
    env = {**os.environ, "OFFICE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [str(office), "--db", url, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        api = None
        deadline = time.monotonic() + 120
        while api is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"office serve exited early ({proc.poll()})")
            found = re.search(r"API at (http://\S+?)[,;)]", line)
            if found:
                api = found.group(1)
        if api is None:
            raise RuntimeError("office serve did not start within 120 s")
        started = time.monotonic()
        samples = []
        token = (
            (home / "admin_token").read_text().strip() if (home / "admin_token").exists() else ""
        )
        with httpx.Client(base_url=api, timeout=30) as client:
            client.get("/healthz")
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            client.get("/api/v1/runs", params={"limit": 50}, headers=headers)
        while time.monotonic() - started < seconds:
            samples.append(_rss_kib(proc.pid, "VmRSS"))
            time.sleep(0.25)
        peak = _rss_kib(proc.pid, "VmHWM")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"peak_mib": peak / 1024, "last_mib": samples[-1] / 1024 if samples else 0.0}


def _measure(runs: int, seconds: float) -> dict[str, float]:
    with scratch_dir() as home:
        url = f"sqlite:///{home}/office.db"
        with migrated(url) as db:
            workspace, agent_ids, _ = seed_office(db, 1000, NOW - timedelta(days=30))
            rows = (
                run_row(
                    workspace,
                    agent_ids[n % 1000],
                    "finished",
                    NOW - timedelta(seconds=runs - n),
                    finished=True,
                )
                for n in range(runs)
            )
            began = time.perf_counter()
            copy_rows(db, "runs", RUN_COLUMNS, rows)
            if runs:
                progress(f"memory: seeded {runs:,} runs in {time.perf_counter() - began:.1f} s")
        figures = _serve(home, url, seconds)
        figures["db_mib"] = (home / "office.db").stat().st_size / 2**20
        return figures


def run(results: Results, *, runs: int, smoke: bool) -> None:
    seconds = 1.5 if smoke else 12.0
    empty = _measure(0, seconds)
    full = _measure(runs, seconds)
    progress(
        f"memory: peak {full['peak_mib']:.0f} MiB with {runs:,} runs, "
        f"{empty['peak_mib']:.0f} MiB without"
    )
    extra = full["peak_mib"] - empty["peak_mib"]
    results.details["memory"] = {"runs": runs, "seconds": seconds, "empty": empty, "full": full}
    results.add(
        "7 memory",
        "office serve peak RSS, no runs, 1,000 agents",
        empty["peak_mib"],
        "MiB",
        note="baseline",
    )
    results.add(
        "7 memory",
        f"office serve peak RSS, {runs:,} runs, 1,000 agents",
        full["peak_mib"],
        "MiB",
        note=f"+{extra:.1f} MiB vs none; db {full['db_mib']:.0f} MiB",
    )
