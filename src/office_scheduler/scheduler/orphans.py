"""Agent processes left behind by a scheduler process that died (kill -9, power loss).

Every agent is started with ``OFFICE_SESSION_ID`` (its session row's id, unique across
databases) in its environment, and the run records that session before the process is
spawned. Before a dead process's run goes back to the queue (on start with SQLite, or when
the maintenance leader recovers an expired lease), every process on this machine carrying
the run's session id is killed with its process group, so the run never executes twice at
once. Matching on the environment rather than on the recorded pid covers an agent
spawned just before the crash, whose pid was never written, and never signals an unrelated
process that reused a pid. Where ``/proc`` is missing (not Linux) nothing is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path

import structlog

from office_scheduler.domain.models import Run

log = structlog.get_logger(__name__)

PROC = Path("/proc")
SESSION_VARIABLE = "OFFICE_SESSION_ID"


def _environments(proc: Path) -> Iterator[tuple[int, list[bytes]]]:
    """``(pid, environment entries)`` of every process this user may inspect."""
    try:
        entries = list(proc.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            yield int(entry.name), (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue


def agent_pids(session_ids: Iterable[str], *, proc: Path = PROC) -> dict[str, list[int]]:
    """The processes on this machine whose environment names one of ``session_ids``.

    Returns:
        Session id → pids (an agent and the children that inherited its environment).
    """
    wanted = {f"{SESSION_VARIABLE}={sid}".encode(): sid for sid in session_ids if sid}
    found: dict[str, list[int]] = {}
    if not wanted:
        return found
    for pid, environ in _environments(proc):
        for entry in environ:
            sid = wanted.get(entry)
            if sid is not None:
                found.setdefault(sid, []).append(pid)
                break
    return found


def kill_orphans(runs: Iterable[Run], *, proc: Path = PROC) -> list[int]:
    """Kill the process groups of the given runs' agents that still run on this machine.

    Returns:
        The ids of the runs whose agent was killed.
    """
    by_session = {run.session_id: run.id for run in runs if run.session_id}
    own_group = os.getpgid(0)
    killed: list[int] = []
    for sid, pids in agent_pids(by_session, proc=proc).items():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group == own_group:
                    continue  # never this scheduler's own group
                os.killpg(group, signal.SIGKILL)
                log.warning("orphan_agent_killed", run_id=by_session[sid], pid=pid)
        killed.append(by_session[sid])
    return killed
