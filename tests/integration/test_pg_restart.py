"""A real PostgreSQL restart under a running scheduler (issue 10, item 5).

The server is restarted with ``pg_ctlcluster`` while a scheduler process (a
:class:`Service` with its loops) works through wakes taken in by another one. Every
connection dies at once: the pool's, the wake listener's and the maintenance leader's
advisory-lock session. Afterwards no wake is lost, every loop is still running, the
listener and the leadership are back, and a new wake is claimed without the safety tick.

It is ``serial``: a restart cuts every other test's connections, so it runs alone after
the parallel suite (``make pytest``).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest
import sqlalchemy as sa

from integration.test_scale_nodes import _Nodes, _settled, nodes, pg_schema
from office_scheduler.domain.status import RunStatus, WakeupStatus

__all__ = ["nodes", "pg_schema"]  # fixtures used from the scale-out node tests

CLUSTER = ("15", "main")


def _restart_postgres() -> None:
    """Restart the local cluster and wait until it accepts connections again."""
    pg_ctlcluster = shutil.which("pg_ctlcluster")
    assert pg_ctlcluster is not None, "pg_ctlcluster (postgresql-common) is needed"
    subprocess.run(
        [pg_ctlcluster, "--skip-systemctl-redirect", *CLUSTER, "restart", "-m", "fast"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    deadline = time.monotonic() + 60
    while subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode != 0:
        assert time.monotonic() < deadline, "PostgreSQL did not come back"
        time.sleep(0.2)


def _listening(nodes: _Nodes) -> bool:
    listener = nodes.worker.listener
    return listener is not None and listener.connected


@pytest.mark.postgres
@pytest.mark.serial
@pytest.mark.pg_restart
@pytest.mark.timeout(240)
async def test_the_scheduler_survives_a_postgresql_restart_and_loses_no_wake(
    nodes: _Nodes, pg_admin_engine: sa.Engine
) -> None:
    api, worker = nodes.api, nodes.worker
    before = [(await api.wake(agent.id)).run for agent in nodes.agents]
    await asyncio.sleep(0.1)  # some sessions are running now
    await asyncio.to_thread(_restart_postgres)
    pg_admin_engine.dispose()  # its pooled connections died with the server
    after = [(await api.wake(agent.id)).run for agent in nodes.agents]
    run_ids = sorted({run.id for run in (*before, *after) if run is not None})
    await _settled(api.store, run_ids, timeout=90)

    deadline = time.monotonic() + 30
    while not (worker.node_status()["maintenance_leader"] and _listening(nodes)):
        assert time.monotonic() < deadline, worker.node_status()
        await asyncio.sleep(0.2)
    late = await api.wake(nodes.agents[0].id)
    assert late.run is not None
    await _settled(api.store, [late.run.id], timeout=10)
    run = await asyncio.to_thread(api.store.queue.get_run, late.run.id)
    assert run.claimed_at is not None
    assert (run.claimed_at - run.requested_at).total_seconds() < 2.0, "claimed on a NOTIFY"

    for agent in nodes.agents:
        wakeups = api.store.listing.list_wakeups(agent_id=agent.id, limit=100).items
        assert {w.status for w in wakeups} <= {WakeupStatus.CLAIMED, WakeupStatus.COALESCED}
        runs = api.store.listing.list_runs(agent_id=agent.id, limit=100).items
        assert any(r.status is RunStatus.FINISHED for r in runs), agent.name
    assert worker.failed is not None
    assert not worker.failed.done(), "no loop ended"
    loops = worker.node_status()["loops"]
    assert {name: loop["state"] for name, loop in loops.items()} == dict.fromkeys(
        ("runs", "cron", "maintenance", "leader", "notifications", "wake_listener"), "running"
    )
