"""Catch-up planning for one due schedule trigger (DESIGN §8), pure.

``enqueue_missed_with_cap`` fires the newest ``catch_up_max`` due ticks, each its own routine
run; older ones are dropped and summarised into the first fired tick's wake context.
``skip_missed`` fires only the newest due tick, when it is no older than the misfire grace,
and records the rest as one skipped routine run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from office_scheduler.cron import CronSchedule
from office_scheduler.domain.routines import CatchUpPolicy

MISFIRE_GRACE = timedelta(minutes=10)
#: Ticks sit on whole minutes, so nothing lies between this far before a tick and the tick.
_BEFORE_TICK = timedelta(seconds=1)


@dataclass(frozen=True, kw_only=True, slots=True)
class TickPlan:
    """What one cron pass does with a trigger.

    Attributes:
        fire: the ticks to fire, oldest first (aware UTC).
        missed: the ticks not fired: how many, the oldest, whether the count is exact.
        next_run_at: the trigger's next tick strictly after ``now``.
    """

    fire: tuple[datetime, ...]
    missed_count: int
    missed_since: datetime | None
    missed_exact: bool
    next_run_at: datetime

    def missed_summary(self) -> dict[str, object] | None:
        """``{"count", "since", "exact"}`` for the wake context, or ``None``."""
        if not self.missed_count or self.missed_since is None:
            return None
        return {
            "count": self.missed_count,
            "since": self.missed_since.isoformat().replace("+00:00", "Z"),
            "exact": self.missed_exact,
        }


def plan_ticks(
    schedule: CronSchedule,
    *,
    due_from: datetime,
    now: datetime,
    policy: CatchUpPolicy,
    cap: int,
    grace: timedelta = MISFIRE_GRACE,
) -> TickPlan:
    """Plan the ticks of a trigger whose stored ``next_run_at`` (``due_from``) has passed.

    Args:
        schedule: the trigger's schedule.
        due_from: the first unfired tick (the stored ``next_run_at``), aware UTC.
        now: the current instant; ticks up to and including it are due.
        policy: the routine's catch-up policy.
        cap: ``catch_up_max`` (used by ``enqueue_missed_with_cap``).
        grace: how late the newest tick may be and still fire under ``skip_missed``.
    """
    limit = cap if policy is CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP else 1
    due = schedule.fires_between(due_from - _BEFORE_TICK, now, cap=limit)
    fire = due.fire
    missed = due.dropped
    since = due.oldest_dropped
    if policy is CatchUpPolicy.SKIP_MISSED and fire and now - fire[-1] > grace:
        missed += 1
        since = since or fire[-1]
        fire = ()
    return TickPlan(
        fire=tuple(fire),
        missed_count=missed,
        missed_since=since,
        missed_exact=due.dropped_exact,
        next_run_at=schedule.next_fire(now),
    )
