"""Runaway limits at intake (DESIGN §15): find a wake's cause and hold it past a limit.

Called by :class:`~office_scheduler.intake.service.Intake` inside each wake's intake
transaction, before the wake is written. The limits hold wakes that runs caused (a loop
of agents waking agents) and a routine's wakes past its daily cap; a wake a person made
directly (depth 0, a person at the root) is never held, and neither it nor a system wake
costs anything here. A run's wake costs a few indexed reads: the causing run (by key),
the limits (one join by key) and, by source, bounded counts over the last hour or day.
A held wake is written ``held`` with the limit as its ``status_reason``, makes or joins
no run, and leaves a ``wake_held`` activity entry and one open inbox item per agent and
limit for a person to release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.runaway import Causation, RunawayLimits
from office_scheduler.domain.status import (
    Classification,
    HoldReason,
    IntakeOutcome,
    WakeSource,
)
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """What the limits decided about one wake.

    Attributes:
        causation: the wake's cause, stored with it and with the run it makes.
        reason: the limit that holds it; ``None``: it goes on.
        detail: why, in words, when held.
    """

    causation: Causation
    reason: HoldReason | None = None
    detail: str = ""


#: One limit's check: the wake, its cause, the agent's limits, now → a hold or ``None``.
Check = Callable[[WakeRequest, Causation, RunawayLimits, datetime], Verdict | None]


class RunawayLimiter:
    """Judges wakes against the runaway limits of their agent and workspace."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def causation(self, request: WakeRequest) -> Causation:
        """The cause of ``request`` (one read of the causing run, if any)."""
        run_id = request.caused_by_run_id
        if run_id is None:
            return Causation(human_rooted=bool(request.by_person))
        row = self._store.runaway.run_cause(run_id)
        if row is None:
            return Causation(caused_by_run_id=run_id, depth=1)
        return Causation(
            caused_by_run_id=run_id,
            depth=int(row["causation_depth"]) + 1,
            human_rooted=bool(row["human_rooted"]),
            causing_agent_id=row["agent_id"],
        )

    def judge(self, request: WakeRequest, *, now: datetime) -> Verdict:
        """Decide whether ``request`` is held, inside the caller's transaction."""
        cause = self.causation(request)
        checks: tuple[Check, ...]
        if cause.caused_by_run_id is not None:
            checks = (self._depth, self._self_wakes, self._no_progress, self._rates, self._routine)
        elif (
            request.source in (WakeSource.ROUTINE, WakeSource.TASK_ASSIGNED)
            and not cause.by_person_directly
        ):
            # A routine's wake (lightweight) or, maybe, its task's (heavy).
            checks = (self._routine,)
        else:
            # A person's wake, or one the system sends on its own (a cron tick of a
            # heavy routine's task, recovery, an error report): no loop of agents.
            return Verdict(causation=cause)
        workspace, agent = self._store.runaway.limit_settings(request.agent_id)
        limits = RunawayLimits.resolve(workspace, agent)
        for check in checks:
            verdict = check(request, cause, limits, now)
            if verdict is not None:
                return verdict
        return Verdict(causation=cause)

    def after(
        self, request: WakeRequest, verdict: Verdict, result: IntakeResult, *, now: datetime
    ) -> None:
        """Once written: a held wake's activity entry and inbox item."""
        if result.outcome is not IntakeOutcome.HELD:
            return
        chain = self._store.runaway.chain(verdict.causation.caused_by_run_id)
        self._store.held_notes.record(
            result.request,
            detail=verdict.detail,
            chain=[link.as_json() for link in chain],
            now=now,
        )

    @staticmethod
    def _depth(
        request: WakeRequest, cause: Causation, limits: RunawayLimits, now: datetime
    ) -> Verdict | None:
        most = limits.max_causation_depth
        if most is None or cause.depth <= most:
            return None
        return Verdict(
            causation=cause,
            reason=HoldReason.DEPTH_LIMIT,
            detail=f"causation depth {cause.depth} is past max_causation_depth {most}",
        )

    def _self_wakes(
        self, request: WakeRequest, cause: Causation, limits: RunawayLimits, now: datetime
    ) -> Verdict | None:
        most = limits.max_self_wakes_per_hour
        if most is None or request.source is not WakeSource.SELF:
            return None
        count = self._store.runaway.count_self_wakes(request.agent_id, since=now - HOUR, cap=most)
        if count < most:
            return None
        return Verdict(
            causation=cause,
            reason=HoldReason.SELF_WAKE_LIMIT,
            detail=f"{most} self-wakes in the last hour reach max_self_wakes_per_hour {most}",
        )

    def _no_progress(
        self, request: WakeRequest, cause: Causation, limits: RunawayLimits, now: datetime
    ) -> Verdict | None:
        count = limits.no_progress_runs
        if (
            not count
            or request.task_id is None
            or request.classification is not Classification.EVENT
            or cause.caused_by_run_id is None
        ):
            return None
        store = self._store.runaway
        recent = store.recent_task_runs(request.agent_id, request.task_id, count=count)
        if len(recent) < count:
            return None
        causers = {run.causing_agent_id for run in recent}
        if None in causers or causers != {cause.causing_agent_id}:
            return None
        since = min(run.since for run in recent)
        if store.task_progressed(request.task_id, request.agent_id, since=since):
            return None
        return Verdict(
            causation=cause,
            reason=HoldReason.NO_PROGRESS,
            detail=(
                f"the last {count} runs on task {request.task_id} (runs "
                f"{', '.join(str(run.id) for run in reversed(recent))}) changed nothing"
            ),
        )

    def _rates(
        self, request: WakeRequest, cause: Causation, limits: RunawayLimits, now: datetime
    ) -> Verdict | None:
        store = self._store.runaway
        most = limits.max_runs_per_hour
        if (
            most is not None
            and store.count_agent_runs(request.agent_id, since=now - HOUR, cap=most) >= most
        ):
            return Verdict(
                causation=cause,
                reason=HoldReason.RUN_RATE_LIMIT,
                detail=f"the agent had {most} runs in the last hour (max_runs_per_hour {most})",
            )
        most = limits.max_workspace_runs_per_hour
        if (
            most is not None
            and store.count_workspace_runs(request.workspace_id, since=now - HOUR, cap=most) >= most
        ):
            return Verdict(
                causation=cause,
                reason=HoldReason.RUN_RATE_LIMIT,
                detail=(
                    f"the workspace had {most} runs in the last hour "
                    f"(max_workspace_runs_per_hour {most})"
                ),
            )
        return None

    def _routine(
        self, request: WakeRequest, cause: Causation, limits: RunawayLimits, now: datetime
    ) -> Verdict | None:
        most = limits.max_routine_runs_per_day
        if most is None:
            return None
        store = self._store.runaway
        besides: int | None = None
        routine_id = request.payload.get("routine_id")
        if request.source is WakeSource.TASK_ASSIGNED:
            # A heavy routine's run created the task (and is linked to it already).
            found = store.routine_of_task(request.task_id) if request.task_id else None
            if found is None or cause.caused_by_run_id is not None:
                return None
            routine_id, besides = found
        elif request.source is not WakeSource.ROUTINE:
            return None
        if not isinstance(routine_id, str):
            return None
        if store.count_routine_runs(routine_id, since=now - DAY, cap=most, besides=besides) < most:
            return None
        return Verdict(
            causation=cause,
            reason=HoldReason.ROUTINE_DAILY_LIMIT,
            detail=(
                f"routine {routine_id} made {most} runs in the last 24 hours "
                f"(max_routine_runs_per_day {most})"
            ),
        )
