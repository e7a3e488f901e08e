"""Re-drive the wakes a crash lost between a decision's commit and its wake.

Two decisions commit first and queue a wake afterwards: an approval decision
(``approval_resolved`` for the requesting agent, key ``approval_resolved:<approval_id>``)
and a budget warn alert (``budget_alert`` for the coordinator, key
``budget_alert:<policy_id>:<period>``). Should the process die in between, nothing else
would ever queue them; :func:`redrive_decisions` finds such decisions through the wakes'
unique keys and queues what is missing. The keys make a late original and a re-drive one
wake, so running it often (every maintenance pass) or from several processes is harmless.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from office_scheduler.budgets.notify import BudgetNotifier, Enqueue
from office_scheduler.clock import Clock
from office_scheduler.domain.events import Event
from office_scheduler.office.approvals import redrive_wakes
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)

Publish = Callable[[Event], Awaitable[None]]


async def redrive_decisions(
    store: Store, clock: Clock, publish: Publish, enqueue: Enqueue | None
) -> int:
    """Queue the lost ``approval_resolved`` and ``budget_alert`` wakes (see the module doc).

    Args:
        store: the database.
        clock: time source; approvals decided in the last 24 hours and alerts of the
            current budget period (UTC) are looked at.
        publish: the event bus's ``publish`` (the approval wake goes through the Office
            subscriber of :class:`~office_scheduler.domain.events.ApprovalResolved`).
        enqueue: intake, for the coordinator's budget wake (``None`` skips budgets).

    Returns:
        How many wakes were re-driven.
    """
    now = clock.now()
    count = await redrive_wakes(store, publish, now)
    count += await BudgetNotifier(store, clock, enqueue=enqueue, publish=publish).redrive(now)
    if count:
        log.warning("decision_wakes_redriven", count=count)
    return count
