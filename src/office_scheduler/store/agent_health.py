"""Is an agent failing? Its newest attempted runs, read for the dashboard and the CLI.

A run counts once an agent session was attempted (``started_at`` is set, or it waits in
``scheduled_retry``) and its attempt is over: ``finished`` is a success; ``failed`` and
``scheduled_retry`` (waiting to retry after a failed session) are failures; cancelled runs
and runs that never launched say
nothing about the agent's health. An agent is failing while its newest such run failed;
the streak is the failures since its last success.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.status import RunReason, RunStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import run_events, runs

#: Runs read per agent: a longer streak is shown as "50+".
STREAK_LIMIT = 50
_SETTLED = (RunStatus.FINISHED.value, RunStatus.FAILED.value, RunStatus.SCHEDULED_RETRY.value)
_FAILED = frozenset({RunStatus.FAILED.value, RunStatus.SCHEDULED_RETRY.value})


@dataclass(frozen=True, slots=True)
class FailingStreak:
    """An agent's failures since its last successful run.

    Attributes:
        run_id: the newest failed run.
        error: that run's error text (as stored: may be raw CLI output).
        reason: that run's reason.
        family: the error family its retry step recorded (``None`` when none did).
        since: when the first failure of the streak happened (UTC).
        runs: how many runs failed in a row (capped at :data:`STREAK_LIMIT`).
    """

    run_id: int
    error: str
    reason: RunReason | None
    family: str | None
    since: datetime
    runs: int


def failing_streaks(db: Database, agent_ids: Sequence[str]) -> dict[str, FailingStreak]:
    """The failing streak of each agent of ``agent_ids`` that is failing (others absent)."""
    found: dict[str, FailingStreak] = {}
    with db.read() as conn:
        for agent_id in agent_ids:
            rows = conn.execute(
                sa.select(
                    runs.c.id,
                    runs.c.status,
                    runs.c.reason,
                    runs.c.error,
                    runs.c.started_at,
                    runs.c.finished_at,
                    runs.c.requested_at,
                )
                .where(
                    runs.c.agent_id == agent_id,
                    runs.c.status.in_(_SETTLED),
                    sa.or_(
                        runs.c.started_at.is_not(None),
                        runs.c.status == RunStatus.SCHEDULED_RETRY.value,
                    ),
                )
                .order_by(runs.c.id.desc())
                .limit(STREAK_LIMIT)
            ).all()
            streak = []
            for row in rows:
                if row.status not in _FAILED:
                    break
                streak.append(row)
            if not streak:
                continue
            newest, oldest = streak[0], streak[-1]
            found[agent_id] = FailingStreak(
                run_id=int(newest.id),
                error=str(newest.error or ""),
                reason=RunReason(newest.reason) if newest.reason else None,
                family=_family(conn, int(newest.id)),
                since=oldest.finished_at or oldest.started_at or oldest.requested_at,
                runs=len(streak),
            )
    return found


def _family(conn: Any, run_id: int) -> str | None:
    """The error family of the run's newest ``retry_scheduled`` event, if it has one."""
    data = conn.execute(
        sa.select(run_events.c.data)
        .where(run_events.c.run_id == run_id, run_events.c.kind == "retry_scheduled")
        .order_by(run_events.c.id.desc())
        .limit(1)
    ).scalar()
    family = data.get("error_family") if isinstance(data, dict) else None
    return str(family) if family else None
