"""Queue heads: ``agents.next_queued_at``, the earliest ``not_before`` of an agent's queued runs.

The claim walks agents in the order of their head or, when later, their cooldown's end
(:data:`~office_scheduler.store.schema.AGENT_CLAIMABLE_AT`, an expression index) and stops
after the batch limit, so its cost follows the number of agents with due work it passes
(those at their concurrency limit), not the number of agents or queued runs. Every
transaction that queues a run, makes one due sooner or claims one recomputes the heads of
the agents it touched (one index probe each). Paths that take runs out of the queue
otherwise (cancellations, budget stops) leave a head that is too early, which is harmless:
the claim finds nothing for that agent and recomputes it. A head that is too late would
hide work, so the maintenance loop corrects every late head on each pass
(:func:`reconcile_heads`); runs written outside the store (bulk loads) are picked up the
same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.status import RunStatus
from office_scheduler.store.schema import agents, runs


def _head_of_agent_row() -> sa.ScalarSelect[Any]:
    """The earliest ``not_before`` of the enclosing agent row's queued runs (or NULL)."""
    return (
        sa.select(sa.func.min(runs.c.not_before))
        .where(runs.c.agent_id == agents.c.id, runs.c.status == RunStatus.QUEUED.value)
        .scalar_subquery()
    )


_REFRESH_HEADS = (
    sa.update(agents)
    .where(agents.c.id.in_(sa.bindparam("agent_ids", expanding=True)))
    .values(next_queued_at=_head_of_agent_row())
)


def refresh_heads(conn: Connection, agent_ids: Iterable[str]) -> None:
    """Recompute the queue heads of ``agent_ids`` inside the caller's transaction.

    The agents are updated in id order, so two transactions that refresh overlapping sets
    lock the rows in the same order (no deadlock on PostgreSQL).
    """
    ids = sorted(set(agent_ids))
    if not ids:
        return
    conn.execute(_REFRESH_HEADS, {"agent_ids": ids})


def lock_agents_of_runs(conn: Connection, run_ids: Iterable[int]) -> list[str]:
    """Lock the agent rows of ``run_ids`` in id order (``FOR UPDATE`` on PostgreSQL).

    Transitions that put runs of several agents back in the queue take the same agent locks
    as intake and the claim first, so a head is never computed from a snapshot that misses
    another transaction's queued run.

    Returns:
        The locked agent ids, sorted.
    """
    ids = list(set(run_ids))
    if not ids:
        return []
    owners = sa.select(runs.c.agent_id).where(runs.c.id.in_(ids))
    query = (
        sa.select(agents.c.id)
        .where(agents.c.id.in_(owners))
        .order_by(agents.c.id)
        .with_for_update()
    )
    return list(conn.execute(query).scalars())


def reconcile_heads(conn: Connection) -> int:
    """Move every queue head that is later than the runs table says back to the truth.

    Only late (or missing) heads are corrected: they would hide due work from the claim.
    An early head is left alone (the next claim that reaches it recomputes it), and a head
    computed here from a snapshot that misses a concurrent change can only be early.

    Returns:
        How many heads were late (0 when every transaction kept them right).
    """
    head = _head_of_agent_row()
    result = conn.execute(
        sa.update(agents)
        .where(
            head.is_not(None),
            sa.or_(agents.c.next_queued_at.is_(None), agents.c.next_queued_at > head),
        )
        .values(next_queued_at=head)
    )
    return int(result.rowcount or 0)
