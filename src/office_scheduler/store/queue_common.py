"""Helpers shared by the run-queue store modules (each runs inside a caller's transaction)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import Run
from office_scheduler.domain.status import LIVE_RUN_STATUSES, RunStatus
from office_scheduler.store.rows import run_from_row
from office_scheduler.store.schema import agents, runs, tasks


def lock_agent(conn: Connection, agent_id: str) -> Mapping[Any, Any]:
    """Lock and return the agent row (``FOR UPDATE`` on PostgreSQL).

    Raises:
        NotFoundError: no such agent.
    """
    row = (
        conn.execute(sa.select(agents).where(agents.c.id == agent_id).with_for_update())
        .mappings()
        .first()
    )
    if row is None:
        raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
    return row


def get_run(conn: Connection, run_id: int) -> Run:
    """Return run ``run_id``.

    Raises:
        NotFoundError: no such run.
    """
    row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
    if row is None:
        raise NotFoundError(f"run {run_id} not found", field="run_id")
    return run_from_row(row)


def release_checkouts(conn: Connection, run_ids: Sequence[int]) -> None:
    """Release every task checkout held by ``run_ids``."""
    conn.execute(
        sa.update(tasks)
        .where(tasks.c.checkout_run_id.in_(list(run_ids)))
        .values(checkout_agent_id=None, checkout_run_id=None, checkout_at=None)
    )


def claim_fence(node_id: str | None, claimed_at: datetime | None) -> list[sa.ColumnElement[bool]]:
    """Conditions that hold only while the claim ``(node_id, claimed_at)`` is the current one.

    A pipeline ends its run through these, so the late result of an attempt whose lease was
    lost (the run went back to the queue, maybe claimed again) never overwrites anything.
    """
    fence: list[sa.ColumnElement[bool]] = []
    if node_id is not None:
        fence.append(runs.c.claimed_by == node_id)
    if claimed_at is not None:
        fence.append(runs.c.claimed_at == claimed_at)
    return fence


def stamp_cooldown(conn: Connection, agent_id: str, now: datetime) -> None:
    """Record that a session of ``agent_id`` ended at ``now`` and start its cooldown."""
    cooldown_s = conn.execute(
        sa.select(agents.c.cooldown_s).where(agents.c.id == agent_id)
    ).scalar_one()
    conn.execute(
        sa.update(agents)
        .where(agents.c.id == agent_id)
        .values(last_wakeup_finished_at=now, cooldown_until=now + timedelta(seconds=cooldown_s))
    )


def live_run_exists(run_id: sa.ColumnElement[Any]) -> sa.Exists:
    """``EXISTS`` a claimed or running run whose id is ``run_id``."""
    return sa.exists().where(
        runs.c.id == run_id, runs.c.status.in_([s.value for s in LIVE_RUN_STATUSES])
    )


def release_stale_checkout(conn: Connection, task_id: str, agent_id: str) -> None:
    """Clear ``agent_id``'s checkout of ``task_id`` unless a live run of it holds the lock."""
    conn.execute(
        sa.update(tasks)
        .where(
            tasks.c.id == task_id,
            tasks.c.checkout_agent_id == agent_id,
            ~live_run_exists(tasks.c.checkout_run_id),
        )
        .values(checkout_agent_id=None, checkout_run_id=None, checkout_at=None)
    )


def earliest_not_before(conn: Connection, status: RunStatus) -> datetime | None:
    """The earliest ``not_before`` of the runs in ``status``, or ``None`` when there are none."""
    value: datetime | None = conn.execute(
        sa.select(sa.func.min(runs.c.not_before)).where(runs.c.status == status.value)
    ).scalar()
    return value
