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
from office_scheduler.store.schema import agents, run_events, runs, tasks

_LOCK_AGENT = sa.select(agents).where(agents.c.id == sa.bindparam("agent_id")).with_for_update()
_LOCK_AGENT_OF_RUN = (
    sa.select(agents.c.id, agents.c.cooldown_s)
    .where(
        agents.c.id
        == sa.select(runs.c.agent_id).where(runs.c.id == sa.bindparam("run_id")).scalar_subquery()
    )
    .with_for_update(of=agents)
)
_GET_RUN = sa.select(runs).where(runs.c.id == sa.bindparam("run_id"))
_RELEASE_CHECKOUTS = (
    sa.update(tasks)
    .where(tasks.c.checkout_run_id.in_(sa.bindparam("run_ids", expanding=True)))
    .values(checkout_agent_id=None, checkout_run_id=None, checkout_at=None)
)
_RELEASE_TASK_CHECKOUT = (
    sa.update(tasks)
    .where(tasks.c.id == sa.bindparam("task_id"), tasks.c.checkout_run_id == sa.bindparam("run_id"))
    .values(checkout_agent_id=None, checkout_run_id=None, checkout_at=None)
)
_STAMP_COOLDOWN = sa.update(agents).where(agents.c.id == sa.bindparam("agent_id"))
_INSERT_RUN_EVENT = sa.insert(run_events)


def insert_run_events(
    conn: Connection, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]
) -> None:
    """Append one ``run_events`` row, or many in one statement (caller's transaction).

    Each row has ``run_id``, ``kind``, ``message``, ``data`` and ``at``.
    """
    conn.execute(_INSERT_RUN_EVENT, rows)


def lock_agent(
    conn: Connection, agent_id: str, statement: sa.Select[Any] = _LOCK_AGENT
) -> Mapping[Any, Any]:
    """Lock and return the agent row (``FOR UPDATE`` on PostgreSQL).

    ``statement`` selects what the caller needs of it (bound parameter ``agent_id``, locking
    the row); the default reads every column.

    Raises:
        NotFoundError: no such agent.
    """
    row = conn.execute(statement, {"agent_id": agent_id}).mappings().first()
    if row is None:
        raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
    return row


def lock_agent_of_run(conn: Connection, run_id: int) -> Mapping[Any, Any] | None:
    """Lock the agent that owns run ``run_id``; its ``id`` and ``cooldown_s`` (one statement).

    ``None`` when there is no such run. Only the agent row is locked, as by
    :func:`lock_agent`.
    """
    return conn.execute(_LOCK_AGENT_OF_RUN, {"run_id": run_id}).mappings().first()


def get_run(conn: Connection, run_id: int) -> Run:
    """Return run ``run_id``.

    Raises:
        NotFoundError: no such run.
    """
    row = conn.execute(_GET_RUN, {"run_id": run_id}).mappings().first()
    if row is None:
        raise NotFoundError(f"run {run_id} not found", field="run_id")
    return run_from_row(row)


def release_checkouts(conn: Connection, run_ids: Sequence[int]) -> None:
    """Release every task checkout held by ``run_ids``."""
    conn.execute(_RELEASE_CHECKOUTS, {"run_ids": list(run_ids)})


def release_checkout_of(conn: Connection, run: Run) -> None:
    """Release the checkout ``run`` holds, if any (a run only ever checks out its own task).

    A taskless run holds none, so it costs no statement.
    """
    if run.task_id is not None:
        conn.execute(_RELEASE_TASK_CHECKOUT, {"task_id": run.task_id, "run_id": run.id})


def claim_fence(
    node_id: str | sa.BindParameter[Any] | None,
    claimed_at: datetime | sa.BindParameter[Any] | None,
) -> list[sa.ColumnElement[bool]]:
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


def stamp_cooldown(conn: Connection, agent: Mapping[Any, Any], now: datetime) -> None:
    """Record that a session of ``agent`` ended at ``now`` and start its cooldown.

    ``agent`` is the agent's row as locked by this transaction (:func:`lock_agent`,
    :func:`lock_agent_of_run`), so its ``cooldown_s`` is current.
    """
    conn.execute(
        _STAMP_COOLDOWN,
        {
            "agent_id": agent["id"],
            "last_wakeup_finished_at": now,
            "cooldown_until": now + timedelta(seconds=agent["cooldown_s"]),
        },
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
