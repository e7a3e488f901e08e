"""One retry for calls that failed because the database connection was lost.

A PostgreSQL restart or failover kills every pooled connection at once; the pool learns of
it from the first failure and discards them all, so a second attempt runs on a new
connection. Only calls that are safe to repeat use this: reads, intake (a repeated intake
is deduplicated by its idempotency key or merged into the same run, while a wake dropped on
a dead connection would be lost), and ending a run (fenced by its claim, while a run whose
end is lost would be requeued and its finished session run again).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import structlog

from office_scheduler.store.engine import is_connection_lost

log = structlog.get_logger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def call_retrying_if_connection_lost(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call the blocking ``fn``; once more after a lost connection (see the module doc).

    For transitions fenced by their claim (ending a run): a second attempt after one whose
    commit did reach the server finds the run no longer held and changes nothing.
    """
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if not is_connection_lost(exc):
            raise
        log.warning("database_connection_lost_retrying", call=fn.__qualname__, error=str(exc))
        return fn(*args, **kwargs)


def retry_if_connection_lost(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Wrap the coroutine function ``fn`` so it runs once more after a lost connection.

    Any other error, and a second lost connection, propagate unchanged.
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not is_connection_lost(exc):
                raise
            log.warning("database_connection_lost_retrying", call=fn.__qualname__, error=str(exc))
            return await fn(*args, **kwargs)

    return wrapper
