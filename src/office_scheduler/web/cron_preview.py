"""The routine editor's live cron preview: next fires, and the slots DST changes affect.

Validation and fire times come from :mod:`office_scheduler.cron` (the scheduler's own
rules: a wall-clock minute that does not exist is skipped, one that occurs twice fires once,
at its first instant). This module adds what the editor shows on top: each fire in the
zone and in UTC, and which matching wall-clock slots of the coming year fall into a
spring-forward gap (skipped) or a fall-back overlap (repeated, fired once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from office_scheduler.cron import parse_schedule
from office_scheduler.cron.syntax import CronFields, parse_fields
from office_scheduler.domain.errors import InvalidInputError

#: How far ahead DST changes are looked for.
LOOKAHEAD = timedelta(days=366)
_STEP = timedelta(hours=6)
_MINUTE = timedelta(minutes=1)
MAX_FLAGS = 6


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire: its UTC instant and the same instant on the zone's wall clock."""

    utc: datetime
    local: datetime


@dataclass(frozen=True, slots=True)
class Preview:
    """What the editor shows for an expression and zone.

    Attributes:
        expression: the normalised expression.
        timezone: the zone name (``UTC`` when none was given).
        fires: the next fires after ``after``.
        skipped: wall-clock slots (naive, zone time) that match but do not exist.
        repeated: wall-clock slots that match and occur twice, with the instant they fire.
        error: the validation message when the expression or zone is invalid.
    """

    expression: str
    timezone: str
    fires: list[Fire] = field(default_factory=list)
    skipped: list[datetime] = field(default_factory=list)
    repeated: list[tuple[datetime, datetime]] = field(default_factory=list)
    error: str | None = None


def _matches(fields: CronFields, wall: datetime) -> bool:
    day_of_month = wall.day in fields.days
    day_of_week = wall.isoweekday() % 7 in fields.weekdays
    day = (day_of_month or day_of_week) if fields.day_or else (day_of_month and day_of_week)
    return (
        day
        and wall.month in fields.months
        and wall.hour in fields.hours
        and wall.minute in fields.minutes
    )


def _offset(zone: tzinfo, instant: datetime) -> timedelta:
    return instant.astimezone(zone).utcoffset() or timedelta(0)


def _transitions(zone: tzinfo, start: datetime) -> list[datetime]:
    """The UTC instants (to the minute) at which the zone's offset changes within a year."""
    found: list[datetime] = []
    cursor = start.replace(second=0, microsecond=0)
    end = cursor + LOOKAHEAD
    while cursor < end:
        later = cursor + _STEP
        if _offset(zone, cursor) != _offset(zone, later):
            low, high = cursor, later
            while high - low > _MINUTE:
                middle = low + (high - low) / 2
                middle = middle.replace(second=0, microsecond=0)
                if middle <= low:
                    break
                if _offset(zone, middle) == _offset(zone, low):
                    low = middle
                else:
                    high = middle
            found.append(high)
        cursor = later
    return found


def _affected(
    fields: CronFields, zone: tzinfo, change: datetime
) -> tuple[list[datetime], list[tuple[datetime, datetime]]]:
    """Matching wall-clock minutes skipped or repeated by the change at ``change``."""
    before = _offset(zone, change - _MINUTE)
    after = _offset(zone, change)
    shift = after - before
    skipped: list[datetime] = []
    repeated: list[tuple[datetime, datetime]] = []
    if shift > timedelta(0):
        wall = (change + before).replace(tzinfo=None)
        for minute in range(int(shift / _MINUTE)):
            slot = wall + minute * _MINUTE
            if _matches(fields, slot):
                skipped.append(slot)
    else:
        wall = (change + after).replace(tzinfo=None)
        for minute in range(int(-shift / _MINUTE)):
            slot = wall + minute * _MINUTE
            if _matches(fields, slot):
                first = slot.replace(tzinfo=zone, fold=0).astimezone(UTC)
                repeated.append((slot, first))
    return skipped, repeated


def preview(
    expression: str, timezone: str, *, after: datetime, count: int = 5, flags: bool = True
) -> Preview:
    """Validate ``expression`` in ``timezone`` and describe its next fires.

    Args:
        expression: a five-field cron expression.
        timezone: an IANA zone name; empty means UTC.
        after: aware instant; fires are strictly after it.
        count: how many fires to list.
        flags: also look for DST-skipped and repeated slots in the coming year.

    Returns:
        The preview; ``error`` is set (and nothing else) when the input is invalid.
    """
    shown_zone = timezone.strip() or "UTC"
    try:
        schedule = parse_schedule(expression, timezone.strip())
        fields = parse_fields(schedule.expression)
    except InvalidInputError as exc:
        return Preview(expression=expression, timezone=shown_zone, error=exc.message)
    zone: tzinfo = ZoneInfo(schedule.timezone) if schedule.timezone else UTC
    fires: list[Fire] = []
    cursor = after
    try:
        for _ in range(count):
            cursor = schedule.next_fire(cursor)
            fires.append(Fire(utc=cursor, local=cursor.astimezone(zone)))
    except InvalidInputError as exc:
        return Preview(expression=schedule.expression, timezone=shown_zone, error=exc.message)
    skipped: list[datetime] = []
    repeated: list[tuple[datetime, datetime]] = []
    if flags and zone is not UTC:
        for change in _transitions(zone, after):
            gone, twice = _affected(fields, zone, change)
            skipped.extend(gone)
            repeated.extend(twice)
    return Preview(
        expression=schedule.expression,
        timezone=shown_zone,
        fires=fires,
        skipped=skipped[:MAX_FLAGS],
        repeated=repeated[:MAX_FLAGS],
    )
