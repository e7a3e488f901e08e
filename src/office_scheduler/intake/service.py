"""``enqueue_wakeup``: the single entry point of every wake (DESIGN §5)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.events import Event, WakeupReceived
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import IntakeOutcome
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.reconnect import retry_if_connection_lost

log = structlog.get_logger(__name__)

ZERO = timedelta(0)

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_KEY_CHARS = 500


def validate_request(request: WakeRequest) -> None:
    """Check a wake request before anything is written.

    Raises:
        InvalidInputError: the payload is not a JSON object, is larger than 256 KiB as
            JSON, or the idempotency key is empty or longer than 500 characters.
    """
    if not isinstance(request.payload, dict):
        raise InvalidInputError("payload must be a JSON object", field="payload")
    try:
        encoded = json.dumps(request.payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"payload is not valid JSON: {exc}", field="payload") from None
    if len(encoded.encode()) > MAX_PAYLOAD_BYTES:
        raise InvalidInputError("payload is larger than 256 KiB", field="payload")
    key: object = request.idempotency_key
    if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > 500):
        raise InvalidInputError(
            "idempotency_key must be a non-empty string of at most 500 characters",
            field="idempotency_key",
        )


Publish = Callable[[Event], Awaitable[None]]


class Poke(Protocol):
    """The runs loop's ``poke``: look at the queue now (``at=None``) or no later than ``at``."""

    def __call__(self, at: datetime | None = None) -> None:
        """Poke (``at`` aware UTC)."""


class Intake:
    """Persists wakes, merges them into in-flight runs, and pokes the runs loop.

    Args:
        store: the database.
        clock: time source for ``requested_at`` and the coalescing hold.
        poke: called after every wake that created or joined a run, with the instant the
            run may first be claimed (``None``: now), so the runs loop looks at the queue
            then instead of at its next safety tick.
        publish: receives a :class:`WakeupReceived` event per request.
    """

    def __init__(self, store: Store, clock: Clock, *, poke: Poke, publish: Publish) -> None:
        self._store = store
        self._clock = clock
        self._poke = poke
        self._publish = publish

    @retry_if_connection_lost
    async def enqueue(self, request: WakeRequest) -> IntakeResult:
        """Persist ``request`` and create or join a run (one transaction), then announce it.

        A connection lost under the call is retried once on a new one (see
        :mod:`office_scheduler.store.reconnect`).

        A duplicate idempotency key is silently rejected: the original request comes back
        with outcome ``deduplicated`` and nothing changes.

        Raises:
            NotFoundError: the agent or workspace does not exist.
            InvalidInputError: see :func:`validate_request`.
        """
        result = await asyncio.to_thread(self.persist, request)
        await self.announce(request, result)
        return result

    def persist(self, request: WakeRequest) -> IntakeResult:
        """The database half of :meth:`enqueue`, blocking; call it from a worker thread.

        Inside :meth:`~office_scheduler.store.engine.Database.transaction` it joins the
        caller's transaction, so a caller can make a wake part of a larger write (a cron
        tick's claim and dispatch). Pass the result to :meth:`announce` once committed.

        Raises:
            NotFoundError: the agent or workspace does not exist.
            InvalidInputError: see :func:`validate_request`.
        """
        validate_request(request)
        # A wake without a hold (user wakes, fire now) needs no settings read.
        hold = self._store.office.coalesce_window(request.workspace_id) if request.hold else ZERO
        return self._store.queue.enqueue(
            request, now=self._clock.now(), hold=hold, decide=decide_merge
        )

    async def announce(self, request: WakeRequest, result: IntakeResult) -> None:
        """After :meth:`persist` committed: log the outcome, poke the runs loop, publish.

        Never call it for a transaction that rolled back: subscribers would hear of a wake
        that does not exist.
        """
        log.info(
            "wakeup_" + result.outcome.value,
            wakeup_id=result.request.id,
            agent_id=request.agent_id,
            source=request.source.value,
            task_id=request.task_id,
            run_id=result.run.id if result.run else None,
            idempotency_key=request.idempotency_key,
        )
        if result.outcome is not IntakeOutcome.DEDUPLICATED:
            self._poke(result.due)
        await self._publish(
            WakeupReceived(request=result.request, run=result.run, outcome=result.outcome)
        )
