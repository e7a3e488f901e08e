"""The runs loop: claims due runs and drives each through the pipeline (DESIGN §7).

A claim or lease renewal that fails (the database went away) is retried with backoff; the
loop itself never ends on a database error, and no wake is lost: a wake is a committed row,
claimed by whichever pass succeeds next.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.config import Settings
from office_scheduler.domain.models import Run
from office_scheduler.domain.status import LIVE_RUN_STATUSES, RunReason
from office_scheduler.scheduler.loop import LoopHealth, log_failure
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)

Process = Callable[[Run], Coroutine[Any, Any, None]]
#: Shortest wait before a look the database says is due (a past instant is due now).
_MIN_WAIT = timedelta(milliseconds=10)


class RunsLoop:
    """Claims eligible runs (on a poke or a safety tick) and runs their pipelines concurrently.

    At most ``settings.max_parallel_runs`` pipelines run at once in this process. Leases
    of running pipelines are renewed every third of the lease. A renewal that finds a lease
    of its own already past its end (the process was frozen, the clock jumped) or a run no
    longer held by this claim (the leader requeued it) abandons that attempt
    (:meth:`abandon`): its pipeline is cancelled, which stops the agent's process group,
    and the pipeline's driver records ``attempt_abandoned`` instead of ending the run.
    The first case applies only when ``shared`` (PostgreSQL: another node may have requeued
    the run); a lone SQLite process renews its own lease after a sleep and goes on.
    ``stop()`` stops claiming,
    gives running sessions ``shutdown_grace``, then cancels them (their executors kill the
    process groups) and puts their runs back to ``queued`` with reason ``interrupted``.
    ``cancel(run_id)`` stops one pipeline for good: the run ends ``cancelled``.
    """

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        settings: Settings,
        process: Process,
        shared: bool = True,
    ) -> None:
        self._store = store
        #: Whether another process may requeue this node's runs once their leases expire
        #: (PostgreSQL). On SQLite this process is the only scheduler and its maintenance
        #: never requeues its own live runs: a lease found past its end there (the laptop
        #: slept) is renewed, not abandoned.
        self.shared = shared
        self._clock = clock
        self._settings = settings
        self._process = process
        self._poked = asyncio.Event()
        #: Set by a poke for work due now; a poke that only brings the next look forward
        #: (a wake due later) wakes the waiter without it, to move its deadline.
        self._due_now = False
        #: The earliest "due later" instant poked since the last pass (aware UTC).
        self._hint: datetime | None = None
        #: When the waiting loop will look next (aware UTC), while it waits.
        self._deadline: datetime | None = None
        #: The instant the last claim pass looked at the queue with (aware UTC).
        self._looked_at: datetime | None = None
        self._inflight: dict[int, asyncio.Task[None]] = {}
        self._cancelling: set[int] = set()
        #: Run id → (its claim's ``claimed_at``, when this node's lease on it ends).
        self._claims: dict[int, tuple[datetime | None, datetime]] = {}
        #: Run id → why its attempt was abandoned (while its pipeline winds down).
        self._lost: dict[int, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._claiming = False
        self.health = LoopHealth()

    @property
    def inflight(self) -> int:
        """Pipelines running now in this process."""
        return len(self._inflight)

    def poke(self, at: datetime | None = None) -> None:
        """Ask the loop to look at the queue now, or no later than ``at``.

        Intake calls this after every wake that created a run or made one due sooner,
        with ``at`` = when that run may first be claimed (its coalescing hold or the
        agent's cooldown); ``None`` or a past instant means now. A future ``at`` costs no
        claim attempt: it only moves the loop's next look forward when it is earlier.
        """
        if at is None or at <= self._clock.now():
            self._due_now = True
            self._poked.set()
            return
        if self._hint is None or at < self._hint:
            self._hint = at
            if self._deadline is None or at < self._deadline:
                self._poked.set()  # the waiter moves its deadline and waits on

    def start(self) -> asyncio.Task[None]:
        """Start the loop (idempotent); returns its task."""
        if self._task is None:
            self._claiming = True
            self.health.state = "running"
            self._task = asyncio.create_task(self._loop(), name="runs-loop")
        return self._task

    @property
    def inflight_run_ids(self) -> list[int]:
        """Ids of the runs whose pipelines run in this process now."""
        return list(self._inflight)

    def cancel_requested(self, run_id: int) -> bool:
        """True while :meth:`cancel` is stopping ``run_id``'s pipeline.

        The pipeline's driver asks this when the run's task is cancelled: a cancel ends
        the run ``cancelled`` (reason ``cancelled_by_user``), a shutdown leaves it to be
        requeued.
        """
        return run_id in self._cancelling

    def lost_reason(self, run_id: int) -> str | None:
        """Why ``run_id``'s attempt in this process was abandoned, or ``None`` if it was not.

        ``lease_expired``: this node's lease on the run ended before it was renewed;
        ``claim_lost``: the run is no longer held by this attempt's claim (requeued by
        the maintenance leader, maybe claimed and run elsewhere).
        """
        return self._lost.get(run_id)

    def abandon(self, run_id: int, reason: str) -> bool:
        """Give up this process's attempt at ``run_id``: cancel its pipeline (idempotent).

        The executor stops the agent's process group; the pipeline's driver sees
        :meth:`lost_reason` and writes nothing for the attempt but its
        ``attempt_abandoned`` event.

        Returns:
            False when no pipeline of ``run_id`` runs here.
        """
        task = self._inflight.get(run_id)
        if task is None or task.done():
            return False
        if run_id not in self._lost:
            self._lost[run_id] = reason
            log.warning("attempt_abandoning", run_id=run_id, reason=reason)
            task.cancel()
        return True

    async def cancel(self, run_id: int) -> bool:
        """Stop the pipeline of ``run_id`` in this process and wait until it has ended.

        Cancelling the run's task makes its executor stop the agent (process group
        terminated, then killed), and the pipeline then ends the run ``cancelled`` with
        reason ``cancelled_by_user`` (the run token is revoked with it and
        :class:`~office_scheduler.domain.events.RunEnded` published).

        Returns:
            False when no pipeline of ``run_id`` runs in this process (never claimed here,
            already ended, or claimed by another process).
        """
        task = self._inflight.get(run_id)
        if task is None or task.done():
            return False
        self._cancelling.add(run_id)
        task.cancel()
        # wait() neither raises the task's outcome nor cancels it if our caller gives up.
        await asyncio.wait([task])
        return True

    async def stop(self) -> None:
        """Stop claiming, let sessions finish within the grace period, requeue the rest."""
        self._claiming = False
        if self._task is not None:
            # The loop leaves on its own at the next check, so a claim transaction that
            # is in flight is never abandoned with its runs stuck in `claimed`.
            self.poke()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.health.state = "stopped"
        if not self._inflight:
            return
        pending = list(self._inflight.values())
        grace = self._settings.shutdown_grace.total_seconds()
        _, still_running = await asyncio.wait(pending, timeout=grace)
        interrupted = [run_id for run_id, task in self._inflight.items() if task in still_running]
        for task in still_running:
            task.cancel()
        await asyncio.gather(*still_running, return_exceptions=True)
        if interrupted:
            count = await asyncio.to_thread(
                self._store.queue.requeue,
                interrupted,
                reason=RunReason.INTERRUPTED,
                now=self._clock.now(),
            )
            log.warning("runs_interrupted", run_ids=interrupted, requeued=count)

    async def claim_once(self) -> int:
        """Claim as many due runs as there are free slots and start their pipelines."""
        free = self._settings.max_parallel_runs - len(self._inflight)
        now = self._clock.now()
        self._looked_at = now
        if free <= 0:
            return 0
        runs = await asyncio.to_thread(
            self._store.queue.claim,
            now=now,
            node_id=self._settings.node_id,
            lease=self._settings.lease,
            limit=free,
        )
        for run in runs:
            until = run.lease_expires_at or now + self._settings.lease
            self._claims[run.id] = (run.claimed_at, until)
            task = asyncio.create_task(self._process(run), name=f"run-{run.id}")
            self._inflight[run.id] = task
            task.add_done_callback(self._forget(run.id))
        return len(runs)

    def _forget(self, run_id: int) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            if self._inflight.get(run_id) is task:
                del self._inflight[run_id]
                self._cancelling.discard(run_id)
                self._claims.pop(run_id, None)
                self._lost.pop(run_id, None)
            # A finished run frees a slot of its agent: look at the queue again.
            self.poke()

        return done

    async def drain(self) -> None:
        """Process everything due at the clock's current time, then return (tests, demo)."""
        while True:
            claimed = await self.claim_once()
            if self._inflight:
                await asyncio.wait(list(self._inflight.values()), return_when="FIRST_COMPLETED")
            elif claimed == 0:
                return

    async def renew_leases(self) -> list[int]:
        """Renew the leases of the runs in flight here; abandon the attempts found lost.

        A lease whose end, as this node last wrote it, has already passed is not renewed
        (the run may be requeued and running elsewhere by now): the attempt is abandoned
        with reason ``lease_expired``. A run the renewal no longer finds held by this
        attempt's claim is abandoned with reason ``claim_lost``.

        Returns:
            The ids of the runs whose attempts were abandoned.
        """
        if not self._inflight:
            return []
        now = self._clock.now()
        node = self._settings.node_id
        lost: dict[int, str] = {}
        current: list[int] = []
        for run_id in list(self._inflight):
            claim = self._claims.get(run_id)
            if run_id in self._lost or claim is None:
                continue
            if claim[1] <= now and self.shared:
                lost[run_id] = "lease_expired"
            else:
                current.append(run_id)
        renewed = await asyncio.to_thread(
            self._store.queue.renew_leases,
            current,
            node_id=node,
            now=now,
            lease=self._settings.lease,
        )
        for run_id in renewed:
            claim = self._claims.get(run_id)
            if claim is not None:
                self._claims[run_id] = (claim[0], now + self._settings.lease)
        missing = sorted(set(current) - set(renewed))
        if missing:
            rows = await asyncio.to_thread(self._store.queue.runs_by_id, missing)
            for run_id in missing:
                run = rows.get(run_id)
                claim = self._claims.get(run_id)
                if run is None or claim is None or not _still_ours(run, claim[0], node):
                    lost[run_id] = "claim_lost"
        for run_id, reason in sorted(lost.items()):
            self.abandon(run_id, reason)
        return sorted(lost)

    async def _wait_for_work(self) -> None:
        now = self._clock.now()
        deadline = now + self._settings.safety_tick
        # Asked from the last claim's instant: a run that became due since that claim looked
        # comes back as already due (a look 10 ms from now), not as neither due nor future.
        since = min(self._looked_at or now, now)
        next_wake = await asyncio.to_thread(self._store.queue.next_wake_at, now=since)
        if next_wake is not None:
            deadline = min(deadline, max(next_wake, now + _MIN_WAIT))
        if self._inflight:
            deadline = min(deadline, now + self._settings.lease / 3)
        try:
            while self._claiming:
                if self._hint is not None:
                    deadline = min(deadline, max(self._hint, now + _MIN_WAIT))
                self._deadline = deadline
                remaining = (deadline - self._clock.now()).total_seconds()
                if remaining <= 0:
                    return
                try:
                    await asyncio.wait_for(self._poked.wait(), remaining)
                except TimeoutError:
                    return
                if self._due_now:
                    return
                self._poked.clear()  # a "due later" poke: new deadline, keep waiting
        finally:
            self._deadline = None

    async def _loop(self) -> None:
        last_renewal = asyncio.get_running_loop().time()
        while self._claiming:
            # This pass and the next_wake_at read after it see every committed run.
            self._poked.clear()
            self._due_now = False
            self._hint = None
            try:
                claimed = await self.claim_once()
                now = asyncio.get_running_loop().time()
                if now - last_renewal >= self._settings.lease.total_seconds() / 3:
                    await self.renew_leases()
                    last_renewal = now
                self.health.passed()
                if claimed == 0:
                    await self._wait_for_work()
            except Exception as exc:
                pause = self.health.failed(exc)
                log_failure("runs-loop", self.health, pause)
                if self._claiming:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._poked.wait(), pause)


def _still_ours(run: Run, claimed_at: datetime | None, node_id: str) -> bool:
    """Whether ``run`` is still (or was last) held by the claim ``(node_id, claimed_at)``.

    A run this attempt has just ended (or parked for a retry) keeps its ``claimed_at``;
    a run requeued by the maintenance leader lost it, and a run claimed again has a new one.
    """
    if run.claimed_at != claimed_at:
        return False
    return run.status not in LIVE_RUN_STATUSES or run.claimed_by == node_id


_WHY = {
    "lease_expired": "its lease ended before this node renewed it (frozen, or its clock jumped)",
    "claim_lost": "the run was taken from this attempt's claim (requeued after its lease expired)",
}


def abandoned_attempt(
    run: Run, current: Run, *, node_id: str, reason: str
) -> dict[str, Any] | None:
    """The ``attempt_abandoned`` event of this node's attempt at ``run``, if it was lost.

    Args:
        run: the run as this attempt claimed it.
        current: the run as it is now.
        node_id: this node.
        reason: ``lease_expired`` or ``claim_lost`` (see :meth:`RunsLoop.lost_reason`).

    Returns:
        ``{"message", "data"}`` of the event, or ``None`` when the attempt was not lost
        after all: its own end committed (the run ended or was parked under this claim),
        or, for ``claim_lost``, the run is still held by this claim.
    """
    same_claim = current.claimed_at == run.claimed_at
    if same_claim and current.status not in LIVE_RUN_STATUSES:
        return None  # this attempt's own end or retry committed
    if reason == "claim_lost" and _still_ours(current, run.claimed_at, node_id):
        return None
    data = {
        "node_id": node_id,
        "reason": reason,
        "claimed_at": None if run.claimed_at is None else run.claimed_at.isoformat(),
        "status_now": current.status.value,
        "claimed_by_now": current.claimed_by,
    }
    message = f"attempt on {node_id} abandoned: {_WHY.get(reason, reason)}"
    return {"message": message, "data": data}
