"""Benchmark: how long ``office --help`` and ``office task --help`` take, as processes.

An agent runs the CLI many times, and ``--help`` is what it runs first: neither form may
import the server (FastAPI, SQLAlchemy, uvicorn). The figure is the process's wall time
(median of ``samples`` runs) minus that of ``python -c pass`` on the same interpreter, so
it is the CLI's own cost on this machine. Goal: < 0.3 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Results, progress

OFFICE = Path(sys.executable).parent / "office"
GOAL_S = 0.3


def _wall_s(argv: list[str], samples: int) -> float:
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
        times.append(time.perf_counter() - began)
    return float(statistics.median(times))


def run(results: Results, *, samples: int = 7) -> None:
    """Add one row per command line: wall time above ``python -c pass``."""
    progress(f"cli help: {samples} runs each")
    base = _wall_s([sys.executable, "-c", "pass"], samples)
    for args in (["--help"], ["task", "--help"]):
        wall = _wall_s([str(OFFICE), *args], samples)
        cost = wall - base
        results.add(
            "cli_help",
            f"office {' '.join(args)} (above python -c pass)",
            cost,
            "s",
            goal=f"< {GOAL_S} s",
            ok=cost < GOAL_S,
            note=f"wall {wall:.2f} s, python -c pass {base:.2f} s",
        )
