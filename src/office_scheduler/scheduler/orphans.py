"""Agent processes left behind by a scheduler process that died (kill -9, power loss).

An agent runs as the leader of its own process group with ``OFFICE_RUN_ID`` in its
environment. Before a dead process's run goes back to the queue, its agent is killed, so
the run never executes twice at once. A recorded pid is trusted only when the live process
with that pid carries the run's ``OFFICE_RUN_ID``: pids are reused, and an unrelated
process must never be signalled. Where ``/proc`` is missing (not Linux) nothing is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

PROC = Path("/proc")


def runs_agent(pid: int, run_id: int, *, proc: Path = PROC) -> bool:
    """True when process ``pid`` is alive here and is the agent of run ``run_id``."""
    if pid <= 1:
        return False
    try:
        environ = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"OFFICE_RUN_ID={run_id}".encode() in environ.split(b"\0")


def kill_orphans(runs: Iterable[tuple[int, int | None]], *, proc: Path = PROC) -> list[int]:
    """Kill the process groups of the given ``(run_id, pid)`` agents that still run here.

    Returns:
        The run ids whose agent was killed.
    """
    killed = []
    for run_id, pid in runs:
        if pid is None or not runs_agent(pid, run_id, proc=proc):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            killed.append(run_id)
            log.warning("orphan_agent_killed", run_id=run_id, pid=pid)
    return killed
