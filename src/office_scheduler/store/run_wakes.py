"""A run's merged wakes, read bounded: the wakeup requests whose ``run_id`` is the run.

A hot agent's run may absorb thousands of wakes. Merging one costs a row and a counter
(``store/queue.py``); reading them for a prompt costs one statement that returns a bounded
set of rows with the per-source tallies computed by the database (window functions, which
SQLite has had since 3.25 and PostgreSQL for ever):

- the newest ``newest`` wakes;
- the decision-carrying wakes, newest first, up to :data:`MAX_DECISION_WAKES`: approval
  results (``approval_resolved``), rejections (a payload with ``rejection``), agent errors
  (``agent_error``), budget alerts (``budget_alert``) and missed-tick summaries (a
  ``routine`` payload with ``missed_ticks``), as
  :func:`~office_scheduler.domain.models.carries_decision` says;
- the oldest wake of each source (the continuation summary's scope is a run's first
  routine wake, and each source's tally rides on it);
- with every row: its source's count, first and last instant, and whether any wake of the
  run is a review-stage wake.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.models import DECISION_SOURCES, ContextEntry, RunWakes, SourceTally
from office_scheduler.domain.status import WakeSource
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import wakeup_requests

#: Most decision-carrying wakes a bounded read returns (the newest); the others still
#: count in their source's tally.
MAX_DECISION_WAKES = 20


def _has(key: str) -> sa.ColumnElement[bool]:
    """The payload has ``key`` with a non-null value (JSON on SQLite, JSONB on PostgreSQL)."""
    found: sa.ColumnElement[bool] = wakeup_requests.c.payload[key].as_string().is_not(None)
    return found


def _flag(condition: sa.ColumnElement[bool]) -> sa.Case[Any]:
    return sa.case((condition, 1), else_=0)


def _bounded_query() -> sa.Select[Any]:
    w = wakeup_requests
    decision = sa.or_(
        w.c.source.in_(sorted(source.value for source in DECISION_SOURCES)),
        _has("rejection"),
        sa.and_(w.c.source == WakeSource.ROUTINE.value, _has("missed_ticks")),
    )
    by_source: dict[str, Any] = {"partition_by": w.c.source}
    ranked = (
        sa.select(
            w.c.id,
            w.c.source,
            w.c.payload,
            w.c.requested_at,
            _flag(decision).label("decision"),
            sa.func.row_number().over(order_by=w.c.id.desc()).label("recency"),
            sa.func.row_number()
            .over(partition_by=_flag(decision), order_by=w.c.id.desc())
            .label("decision_rank"),
            sa.func.row_number().over(**by_source, order_by=w.c.id).label("nth_of_source"),
            sa.func.count().over(**by_source).label("of_source"),
            sa.func.min(w.c.requested_at).over(**by_source).label("first_at"),
            sa.func.max(w.c.requested_at).over(**by_source).label("last_at"),
            sa.func.max(_flag(w.c.payload["role"].as_string() == "reviewer"))
            .over()
            .label("reviewer"),
        )
        .where(w.c.run_id == sa.bindparam("run_id"))
        .subquery()
    )
    return (
        sa.select(ranked)
        .where(
            sa.or_(
                ranked.c.recency <= sa.bindparam("newest"),
                sa.and_(ranked.c.decision == 1, ranked.c.decision_rank <= MAX_DECISION_WAKES),
                ranked.c.nth_of_source == 1,
            )
        )
        .order_by(ranked.c.id)
    )


_BOUNDED = _bounded_query()


def _entry(row: sa.RowMapping) -> ContextEntry:
    return ContextEntry(
        request_id=row["id"],
        source=WakeSource(row["source"]),
        payload=dict(row["payload"] or {}),
        requested_at=row["requested_at"],
    )


def read_run_wakes(conn: Connection, run_id: int, *, newest: int) -> RunWakes:
    """The bounded view of run ``run_id``'s merged wakes (one statement, see the module).

    Args:
        conn: a connection inside the caller's transaction or snapshot.
        run_id: the run.
        newest: how many of the newest wakes to return whatever their kind (at least 1).
    """
    rows = conn.execute(_BOUNDED, {"run_id": run_id, "newest": max(1, newest)}).mappings()
    entries: list[ContextEntry] = []
    tallies: list[SourceTally] = []
    decisions: set[int] = set()
    reviewer = False
    for row in rows:
        entry = _entry(row)
        entries.append(entry)
        if row["decision"]:
            decisions.add(entry.request_id)
        if row["nth_of_source"] == 1:
            tallies.append(
                SourceTally(
                    source=entry.source,
                    count=int(row["of_source"]),
                    first_at=row["first_at"],
                    last_at=row["last_at"],
                )
            )
        reviewer = reviewer or bool(row["reviewer"])
    return RunWakes(
        run_id=run_id,
        total=sum(tally.count for tally in tallies),
        tallies=tuple(tallies),
        entries=tuple(entries),
        decisions=frozenset(decisions),
        reviewer=reviewer,
    )


class RunWakesQueries:
    """Reads of a run's merged wakes; mixed into the run-queue store."""

    _db: Database

    def run_wakes(self, run_id: int, *, newest: int = 20) -> RunWakes:
        """The bounded view of run ``run_id``'s merged wakes (:func:`read_run_wakes`).

        Inside the caller's transaction or snapshot, if any. An unknown run has none.
        """
        with self._db.read() as conn:
            return read_run_wakes(conn, run_id, newest=newest)
