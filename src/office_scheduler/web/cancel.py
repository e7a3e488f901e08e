"""Cancelling a run from the dashboard, whatever state it is in.

* ``queued``: ended at once (``cancelled``, reason ``cancelled_by_user``).
* ``scheduled_retry``: the retry is cancelled (the store's own ``cancel_retry``).
* ``claimed``/``running`` in this process: the run's pipeline task is cancelled, which makes
  the executor stop the agent's process group, then the run is ended like any other
  (checkout released, run token revoked, :class:`RunEnded` published).

A run that has ended answers 409, as does one running in another scheduler process.
"""

from __future__ import annotations

import asyncio
import contextlib

from office_scheduler.domain.errors import ConflictError
from office_scheduler.domain.events import RunEnded
from office_scheduler.domain.models import Run
from office_scheduler.domain.status import LIVE_RUN_STATUSES, RunReason, RunStatus
from office_scheduler.service import Service
from office_scheduler.store.dashboard_cancel import cancel_queued_run

#: Seconds to wait for a cancelled pipeline to stop its agent before ending the run anyway.
STOP_WAIT_S = 15.0
REASON = RunReason.CANCELLED_BY_USER


def _pipeline_task(run_id: int) -> asyncio.Task[object] | None:
    """The runs loop's task of ``run_id`` in this process (named ``run-<id>``), if any."""
    name = f"run-{run_id}"
    return next((task for task in asyncio.all_tasks() if task.get_name() == name), None)


async def _stop_pipeline(run_id: int) -> bool:
    task = _pipeline_task(run_id)
    if task is None:
        return False
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, TimeoutError, Exception):
        await asyncio.wait_for(asyncio.shield(task), timeout=STOP_WAIT_S)
    return True


async def cancel_run(service: Service, run_id: int) -> Run:
    """Cancel ``run_id`` (see the module docstring); returns the ended run.

    Raises:
        NotFoundError: no such run.
        ConflictError: the run has already ended, or runs in another process.
    """
    store = service.store
    run = await asyncio.to_thread(store.queue.get_run, run_id)
    now = service.clock.now()
    ended: Run | None = None
    if run.status is RunStatus.QUEUED:
        ended = await asyncio.to_thread(cancel_queued_run, store.db, run_id, reason=REASON, now=now)
    elif run.status is RunStatus.SCHEDULED_RETRY:
        ended = await asyncio.to_thread(store.queue.cancel_retry, run_id, reason=REASON, now=now)
    elif run.status in LIVE_RUN_STATUSES:
        if not await _stop_pipeline(run_id):
            raise ConflictError(
                f"run {run_id} is {run.status.value} in another scheduler process "
                f"({run.claimed_by or 'unknown node'}); cancel it there",
                field="run_id",
            )
        ended = await asyncio.to_thread(
            store.queue.finish_run,
            run_id,
            status=RunStatus.CANCELLED,
            reason=REASON,
            now=service.clock.now(),
            error="cancelled from the dashboard",
        )
        await asyncio.to_thread(service.tokens.revoke_run, run_id, now=service.clock.now())
        if ended is None:
            # The pipeline ended the run itself while stopping (its executor reported the
            # session cancelled): nothing is left to do.
            current = await asyncio.to_thread(store.queue.get_run, run_id)
            if current.status is RunStatus.CANCELLED:
                return current
    if ended is None:
        current = await asyncio.to_thread(store.queue.get_run, run_id)
        raise ConflictError(
            f"run {run_id} is {current.status.value}; only queued, retrying or running runs "
            "can be cancelled",
            field="run_id",
        )
    await asyncio.to_thread(
        store.runlog.add_run_event,
        run_id,
        kind="run_cancelled",
        message="cancelled from the dashboard",
        data={"reason": REASON.value, "was": run.status.value},
        now=service.clock.now(),
    )
    await service.bus.publish(RunEnded(run=ended))
    return ended
