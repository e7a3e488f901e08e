"""In-process event bus: typed subscriptions, each handler isolated from the others."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from office_scheduler.domain.events import Event

E = TypeVar("E", bound=Event)
Handler = Callable[[Any], Awaitable[None]]

log = structlog.get_logger(__name__)


class EventBus:
    """Delivers each published event to the handlers subscribed to its type.

    Handlers run in subscription order. A handler that raises is logged with the event
    and does not stop the others; the publisher never sees the error, so the change that
    caused the event (already committed) is never rolled back by a subscriber.
    """

    def __init__(self) -> None:
        self._handlers: list[tuple[tuple[type[Event], ...], Handler]] = []

    def subscribe(self, handler: Callable[[E], Awaitable[None]], *types: type[E]) -> None:
        """Call ``handler`` for every published event that is an instance of ``types``."""
        self._handlers.append((types, handler))

    async def publish(self, event: Event) -> None:
        """Deliver ``event`` to its handlers, logging (not raising) their failures."""
        for types, handler in self._handlers:
            if not isinstance(event, types):
                continue
            try:
                await handler(event)
            except Exception:
                log.exception(
                    "event_handler_failed",
                    event_type=type(event).__name__,
                    handler=getattr(handler, "__qualname__", repr(handler)),
                )
