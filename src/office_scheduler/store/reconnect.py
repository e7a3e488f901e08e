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


def retry_once_if_connection_lost(attempt: Callable[[bool], T], *, call: str = "") -> T:
    """Call the blocking ``attempt(False)``; after a lost connection, ``attempt(True)``.

    The flag tells the second attempt that the first one's commit may have reached the
    server before the connection died, so a compare-and-set that no longer applies may be
    its own earlier change (to recognise, not to report as a conflict). ``call`` names the
    operation in the log line.
    """
    try:
        return attempt(False)
    except Exception as exc:
        if not is_connection_lost(exc):
            raise
        name = call or attempt.__qualname__
        log.warning("database_connection_lost_retrying", call=name, error=str(exc))
        return attempt(True)


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
