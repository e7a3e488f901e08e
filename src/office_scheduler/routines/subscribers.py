"""End routine runs when what they created ends (DESIGN §4).

A heavy routine run ends with its task (``done`` when the task is done, ``cancelled`` when
it is cancelled or archived); a lightweight one with its run (``finished`` → ``done``,
``failed`` → ``failed``, ``cancelled`` → ``cancelled``). The concurrency policies read the
task or run state directly, so a missed event never lets a live instance look inactive.
"""

from __future__ import annotations

import asyncio

from office_scheduler.clock import Clock
from office_scheduler.domain.events import RunEnded, TaskUpdated
from office_scheduler.domain.routines import RoutineRunStatus
from office_scheduler.domain.status import RunStatus, TaskState, WakeSource
from office_scheduler.events.bus import EventBus
from office_scheduler.store.facade import Store

_RUN_ENDINGS = {
    RunStatus.FINISHED: RoutineRunStatus.DONE,
    RunStatus.FAILED: RoutineRunStatus.FAILED,
    RunStatus.CANCELLED: RoutineRunStatus.CANCELLED,
}


class RoutineRunSubscribers:
    """Keeps routine-run statuses in step with their tasks and runs."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def register(self, bus: EventBus) -> None:
        """Subscribe the handlers to ``bus``."""
        bus.subscribe(self.task_updated, TaskUpdated)
        bus.subscribe(self.run_ended, RunEnded)

    async def task_updated(self, event: TaskUpdated) -> None:
        """A heavy routine's task reached done, cancelled, or was archived."""
        task = event.after
        if task.archived_at is not None and event.before.archived_at is None:
            status, reason = RoutineRunStatus.CANCELLED, "task archived"
        elif task.state is TaskState.DONE and event.before.state is not TaskState.DONE:
            status, reason = RoutineRunStatus.DONE, None
        elif task.state is TaskState.CANCELLED and event.before.state is not TaskState.CANCELLED:
            status, reason = RoutineRunStatus.CANCELLED, "task cancelled"
        else:
            return
        await asyncio.to_thread(
            self._store.routines.end_linked,
            status,
            now=self._clock.now(),
            task_id=task.id,
            reason=reason,
        )

    async def run_ended(self, event: RunEnded) -> None:
        """A lightweight routine's run ended."""
        run = event.run
        status = _RUN_ENDINGS.get(run.status)
        if run.task_id is not None or status is None:
            return
        sources = event.wake_sources
        if sources is not None and WakeSource.ROUTINE not in sources:
            return  # only a run a routine's wake landed in is linked to a routine run
        reason = run.reason.value if run.reason else None
        await asyncio.to_thread(
            self._store.routines.end_linked,
            status,
            now=self._clock.now(),
            run_id=run.id,
            reason=reason,
        )
