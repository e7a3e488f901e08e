"""Helpers shared by the run-queue store modules (each runs inside a caller's transaction)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import Run
from office_scheduler.store.rows import run_from_row
from office_scheduler.store.schema import agents, runs, tasks


def insert(conn: Connection) -> Any:
    """The dialect's INSERT construct (both support ``ON CONFLICT`` and ``RETURNING``)."""
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


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
