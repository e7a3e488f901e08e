"""Time source. Everything below ``service.py`` receives a :class:`Clock` or a ``now`` value.

Instants are aware UTC :class:`datetime.datetime` values; durations are :class:`timedelta`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of the current instant, and a way to wait on it."""

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        ...

    async def sleep(self, delay: timedelta) -> None:
        """Wait until ``delay`` has passed on this clock (at once for non-positive delays)."""
        ...


class SystemClock:
    """The real wall clock (UTC) with :func:`asyncio.sleep` for waiting."""

    def now(self) -> datetime:
        """Return ``datetime.now(UTC)``."""
        return datetime.now(UTC)

    async def sleep(self, delay: timedelta) -> None:
        """Sleep for ``delay`` of real time."""
        await asyncio.sleep(max(0.0, delay.total_seconds()))


def ensure_utc(value: datetime) -> datetime:
    """Return ``value`` converted to UTC.

    Raises:
        ValueError: ``value`` is naive (has no time zone), which would be ambiguous.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} has no time zone")
    return value.astimezone(UTC)
