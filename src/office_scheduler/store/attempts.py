"""Run events that mark the end of a run attempt: requeue, lease expiry, orphan kill.

Each launch of a run is an attempt with its own run token (DESIGN §4); these rows go into
the run's log in the transaction that ends the attempt, so the log shows every one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from office_scheduler.domain.models import Run
from office_scheduler.domain.status import RunReason


def lease_expired_event(run: Run, now: datetime) -> dict[str, Any]:
    """The ``lease_expired`` run event of a run whose node stopped renewing its claim."""
    expired_at = run.lease_expires_at.isoformat() if run.lease_expires_at else None
    return {
        "run_id": run.id,
        "kind": "lease_expired",
        "message": f"the lease of {run.claimed_by or 'its node'} expired (attempt {run.attempt})",
        "data": {"node": run.claimed_by, "lease_expires_at": expired_at, "attempt": run.attempt},
        "at": now,
    }


def orphan_events(
    killed: Collection[int], run_ids: Sequence[int], now: datetime
) -> list[dict[str, Any]]:
    """``orphan_killed`` run events of the requeued runs whose agent process was killed."""
    message = "the agent process left behind by a dead scheduler process was killed"
    return [
        {"run_id": run_id, "kind": "orphan_killed", "message": message, "data": {}, "at": now}
        for run_id in run_ids
        if run_id in killed
    ]


def requeued_event(run_id: int, attempt: int, reason: RunReason, now: datetime) -> dict[str, Any]:
    """The ``requeued`` run event: the run is queued again and ``attempt`` is over."""
    return {
        "run_id": run_id,
        "kind": "requeued",
        "message": f"back to the queue ({reason.value}); attempt {attempt} is over",
        "data": {"reason": reason.value, "attempt": attempt},
        "at": now,
    }
