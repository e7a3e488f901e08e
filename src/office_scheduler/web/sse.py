"""``GET /events``: a Server-Sent Events stream telling open pages that something changed.

Each stream polls one cheap fingerprint query
(:meth:`~office_scheduler.store.dashboard.DashboardStore.change_stamp`) every
``POLL_INTERVAL_S`` and sends a ``change`` event when it moved; pages then re-fetch their
live regions (htmx). Polling the database rather than listening to this process's event
bus means changes made by every scheduler process show (PostgreSQL scale-out), and the
stream owns no background task: it is a generator that ends with its connection, so
nothing outlives a client or a restart. The session is checked again periodically, so a
revoked token also ends the stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import Request
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from office_scheduler.domain.errors import AuthError
from office_scheduler.web.pages.common import page_router
from office_scheduler.web.session import COOKIE, SessionDep, service_of, session_admin
from office_scheduler.web.sources import dashboard_store

router = page_router()

#: Seconds between two fingerprint checks of one stream.
POLL_INTERVAL_S = 1.0
#: Polls between two checks that the session's token is still valid.
REAUTH_EVERY = 30
#: Seconds between keep-alive comments.
PING_S = 15


@router.get("/events")
async def events(request: Request, _: SessionDep) -> Response:
    """The change stream of the dashboard (401 without a session)."""
    service = service_of(request)
    store = dashboard_store(service)
    secret = request.cookies.get(COOKIE, "")
    interval = float(getattr(request.app.state, "dashboard_poll_s", POLL_INTERVAL_S))

    async def stream() -> AsyncIterator[dict[str, str]]:
        last = await asyncio.to_thread(store.change_stamp)
        yield {"event": "hello", "data": "{}"}
        polls = 0
        while not await request.is_disconnected():
            await asyncio.sleep(interval)
            polls += 1
            if polls % REAUTH_EVERY == 0:
                try:
                    await session_admin(secret, service)
                except AuthError:
                    yield {"event": "signed-out", "data": "{}"}
                    return
            stamp = await asyncio.to_thread(store.change_stamp)
            if stamp != last:
                last = stamp
                yield {"event": "change", "data": json.dumps([str(part) for part in stamp])}

    return EventSourceResponse(stream(), ping=PING_S)
