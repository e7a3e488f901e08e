"""Writes that the wakes of one intake group share, done once before the group commits.

A group of wakes written in one transaction (:meth:`Intake.persist_group`) would otherwise
record each request's outcome, refresh an agent's queue head, append a
``wakeup_coalesced`` activity entry and send a ``pg_notify`` once per wake. Collected here,
they become at most four statements per group: the outcomes as one batch of updates, one
head refresh for every agent whose queue changed, one multi-row activity insert, and one
notification carrying the earliest instant a new run may be claimed (the listeners act on
the earliest payload anyway, :func:`~office_scheduler.store.notify.earliest_due`).

Everything runs inside the group's transaction, so it commits or rolls back with the wakes.
A wake written alone collects into its own instance and writes it before it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.models import Run
from office_scheduler.store.activity import insert_activities
from office_scheduler.store.notify import notify_wake
from office_scheduler.store.queue_heads import refresh_heads
from office_scheduler.store.schema import wakeup_requests

#: A request's outcome: parameters ``wakeup_id``, ``status`` and ``run_id``.
_SET_WAKEUP_OUTCOME = sa.update(wakeup_requests).where(
    wakeup_requests.c.id == sa.bindparam("wakeup_id")
)


@dataclass
class SharedWrites:
    """The shared writes of one transaction's wakes, collected by ``QueueStore.enqueue``.

    Attributes:
        in_flight: the run the latest wake of each ``(agent_id, task_id)`` scope created or
            joined, as that write left it (the next wake of the scope starts from it; the
            merge is a compare-and-set, so a run that moved on since is read again).
        outcomes: each written request's outcome (``wakeup_id``, ``status``, ``run_id``).
        head_agents: agents whose queue head must be recomputed (a run created or made due).
        activities: activity entries (``activity_values`` dicts), in the order written.
        notify: whether idle processes must be told to look again.
        earliest: the earliest instant a changed run may be claimed (UTC); ``None`` with
            ``notify`` set means "now".
    """

    in_flight: dict[tuple[str, str | None], Run] = field(default_factory=dict)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    head_agents: set[str] = field(default_factory=set)
    activities: list[Mapping[str, Any]] = field(default_factory=list)
    notify: bool = False
    earliest: datetime | None = None

    def queue_changed(self, agent_id: str, due: datetime | None) -> None:
        """Record that ``agent_id`` has a new or newly due run, claimable from ``due``."""
        self.head_agents.add(agent_id)
        if not self.notify:
            self.notify, self.earliest = True, due
        elif self.earliest is not None:
            self.earliest = None if due is None else min(self.earliest, due)

    def write_outcomes(self, conn: Connection) -> None:
        """Write the outcomes collected so far (before reading a request back)."""
        if self.outcomes:
            conn.execute(_SET_WAKEUP_OUTCOME, self.outcomes)
            self.outcomes = []

    def flush(self, conn: Connection, schema: str | None) -> None:
        """Write what was collected, in the caller's transaction, and forget it."""
        self.write_outcomes(conn)
        refresh_heads(conn, self.head_agents)
        insert_activities(conn, self.activities)
        if self.notify:
            notify_wake(conn, schema, self.earliest)
        self.in_flight, self.head_agents, self.activities = {}, set(), []
        self.notify, self.earliest = False, None
