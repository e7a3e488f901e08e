"""Who is acting: the context a wake's cause is taken from (DESIGN §15).

An API request made with a run token acts for that run; one made with an admin token (the
CLI, the dashboard, a script) acts for a person. The entry point sets the actor once per
request (:func:`act_as_run`, :func:`act_as_person`); every wake enqueued while handling
it — directly, or by an event subscriber the change woke — takes its cause from there
(:func:`stamp`), so the routes and services in between need not carry it. Anything else
(the cron loop, the recovery sweep, a webhook delivery) acts for nobody: its wakes start a
chain at depth 0 with no person at the root, unless their source is a person's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import WakeSource

#: ``int``: the run whose token made the call; ``True``: a person; ``False``: the system.
_ACTOR: ContextVar[int | bool | None] = ContextVar("office_actor", default=None)

#: Sources only a person's action sends when nobody else is known to act.
PERSON_SOURCES = frozenset({WakeSource.USER, WakeSource.QUEUE_RUN})


def act_as_run(run_id: int) -> None:
    """Wakes enqueued from here on in this context are caused by run ``run_id``."""
    _ACTOR.set(run_id)


def act_as_person() -> None:
    """Wakes enqueued from here on in this context are a person's (depth 0)."""
    _ACTOR.set(True)


@contextmanager
def acting(actor: int | bool) -> Iterator[None]:
    """Within the block, act for a run, a person or the system.

    ``actor``: a run id (``int``), a person (``True``) or the system (``False``: depth 0,
    no person at the root). The previous actor comes back after the block.
    """
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)


def stamp(request: WakeRequest) -> WakeRequest:
    """``request`` with its cause taken from the current actor, unless it names one.

    A request that names ``caused_by_run_id`` or ``by_person`` keeps them.
    """
    if request.caused_by_run_id is not None or request.by_person is not None:
        return request
    actor = _ACTOR.get()
    if actor is None:
        if request.source in PERSON_SOURCES:
            return replace(request, by_person=True)
        return request
    if isinstance(actor, bool):
        return replace(request, by_person=actor)
    return replace(request, caused_by_run_id=actor)
