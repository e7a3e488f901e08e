"""The dashboard's one queue write: cancelling a run that has not been claimed yet.

Claimed and running runs end through
:meth:`~office_scheduler.store.run_transitions.RunTransitions.finish_run` and scheduled
retries through ``cancel_retry``; a ``queued`` run has no transition of its own, so this
module adds it (a conditional update: a claim that wins the race leaves it untouched).
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from office_scheduler.domain.models import Run
from office_scheduler.domain.status import RunReason, RunStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.rows import run_from_row
from office_scheduler.store.schema import runs
from office_scheduler.store.sql import first_row


def cancel_queued_run(db: Database, run_id: int, *, reason: RunReason, now: datetime) -> Run | None:
    """Cancel ``run_id`` if it is still ``queued`` (one write transaction).

    Args:
        db: the database.
        run_id: the run.
        reason: the terminal reason recorded (e.g. ``cancelled_by_user``).
        now: the end instant (aware UTC).

    Returns:
        The cancelled run, or ``None`` when it was no longer queued.
    """
    with db.write() as conn:
        row = first_row(
            conn,
            sa.update(runs)
            .where(runs.c.id == run_id, runs.c.status == RunStatus.QUEUED.value)
            .values(status=RunStatus.CANCELLED.value, reason=reason.value, finished_at=now)
            .returning(*runs.c),
        )
    return None if row is None else run_from_row(row)
