"""Five-field cron schedules evaluated in an IANA zone's wall clock (pure: no I/O, no DB).

Syntax (crontab(5)): five whitespace-separated fields ``minute hour day-of-month month
day-of-week``; each field is a comma list of ``*``, ``N``, ``N-M``, ``*/S``, ``N-M/S`` or
``N/S`` (``N/S`` means ``N-max/S``, as in cronsim and robfig/cron). Months accept
``jan``..``dec`` and weekdays ``sun``..``sat`` (case-insensitive, also in ranges); ``0``
and ``7`` are both Sunday. Extensions outside the standard syntax are rejected: six or
seven fields, ``@daily``-style descriptors, ``L``, ``W``, ``#``, ``?`` and ``H``.

Day rule (crontab(5)): day-of-month and day-of-week are ORed when both fields are
restricted, ANDed otherwise; a field is restricted when its text does not start with ``*``
(so ``*/2`` is unrestricted, as in Vixie cron, cronie and cronsim).

Time zones: the fields are matched against the wall clock of the schedule's zone (``""``
means UTC); every instant this module returns is an aware ``datetime`` in UTC. A wall-clock
minute that does not exist (spring-forward gap) is skipped; a wall-clock minute that occurs
twice (fall-back) fires once, at its first instant (``fold=0``), for every expression
including ``*/5 * * * *``. Zones with a 30-minute shift (Australia/Lord_Howe) lose no
existing minute.

The search runs cronsim 2.8 on a *naive* wall-clock cursor (which disables its Debian-cron
DST emulation) and applies the policy above to each candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim

from office_scheduler.cron.syntax import MAX_EXPRESSION_LENGTH, invalid, parse_fields
from office_scheduler.domain.errors import InvalidInputError

__all__ = [
    "HORIZON_YEARS",
    "MAX_EXPRESSION_LENGTH",
    "MISSED_COUNT_LIMIT",
    "CronSchedule",
    "MissedTicks",
    "next_fire",
    "parse_schedule",
]

#: :meth:`CronSchedule.next_fire` gives up (``InvalidInputError``) after this many years.
HORIZON_YEARS = 30
#: :meth:`CronSchedule.fires_between` counts dropped ticks exactly up to this many.
MISSED_COUNT_LIMIT = 100_000

_COUNT_MAX_DAYS = 366 * 40  # calendar days walked when counting dropped ticks
_ONE_DAY = timedelta(days=1)
_ONE_SECOND = timedelta(seconds=1)
_LAST_MINUTE = time(23, 59)


@cache
def _iana_zone_names() -> frozenset[str]:
    """Zone names of the IANA database shipped in ``tzdata`` (canonical and backward links).

    The operating system's zoneinfo directory also holds files that are not zones of the
    database (``localtime``, ``posixrules``) and differ from machine to machine, so the
    accepted names come from the pinned ``tzdata`` package instead.
    """
    return frozenset(resources.files("tzdata").joinpath("zones").read_text().split())


def _load_zone(name: str) -> tzinfo:
    if name in ("", "UTC"):
        return UTC
    try:
        if name not in _iana_zone_names():
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInputError(
            f"timezone {name!r} is not a known IANA time zone", field="timezone"
        ) from None


def _check_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got naive {value.isoformat()}")


def _later(value: datetime, delta: timedelta) -> datetime:
    """``value + delta``, saturating at ``datetime.max`` (both naive)."""
    try:
        return value + delta
    except OverflowError:
        return datetime.max


@dataclass(frozen=True)
class MissedTicks:
    """The ticks of a schedule in a downtime window ``(after, until]``, newest first kept.

    Attributes:
        fire: the newest ``cap`` ticks ``t`` with ``after < t <= until``, ascending, aware UTC.
        dropped: how many older ticks in the window are not in ``fire`` (0 if none). A lower
            bound when ``dropped_exact`` is false.
        dropped_exact: false when counting stopped at :data:`MISSED_COUNT_LIMIT` ticks (or
            after about 40 years of calendar days).
        oldest_dropped: the oldest dropped tick (the first tick after ``after``), aware UTC,
            for a summary such as "missed N ticks since T"; ``None`` when nothing was dropped.
    """

    fire: tuple[datetime, ...]
    dropped: int
    dropped_exact: bool
    oldest_dropped: datetime | None


@dataclass(frozen=True)
class CronSchedule:
    """A validated five-field cron expression bound to an IANA time zone.

    Build it with :func:`parse_schedule` (constructing it directly validates the same way).
    Instances are immutable, hashable and compare by ``(expression, timezone)``.

    Attributes:
        expression: the normalised expression (stripped, fields separated by single spaces;
            letter case as given).
        timezone: the IANA zone name the fields are evaluated in; ``""`` means UTC.

    Raises:
        InvalidInputError: at construction, ``field="cron_expression"`` for an empty,
            malformed, non-standard or never-firing expression, ``field="timezone"`` for an
            unknown zone.
    """

    expression: str
    timezone: str = ""
    _zone: tzinfo = field(init=False, repr=False, compare=False)
    _minutes: frozenset[int] = field(init=False, repr=False, compare=False)
    _hours: frozenset[int] = field(init=False, repr=False, compare=False)
    _days: frozenset[int] = field(init=False, repr=False, compare=False)
    _months: frozenset[int] = field(init=False, repr=False, compare=False)
    _weekdays: frozenset[int] = field(init=False, repr=False, compare=False)  # 0 = Sunday
    _day_or: bool = field(init=False, repr=False, compare=False)
    _cronsim_text: str = field(init=False, repr=False, compare=False)
    _slots: tuple[time, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise invalid("cron_expression must be a string")
        if not isinstance(self.timezone, str):
            raise InvalidInputError("timezone must be a string", field="timezone")
        expression = " ".join(self.expression.split())
        timezone_name = self.timezone.strip()
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "timezone", timezone_name)
        self._parse(expression)
        object.__setattr__(self, "_zone", _load_zone(timezone_name))

    def _parse(self, expression: str) -> None:
        fields = parse_fields(expression)
        object.__setattr__(self, "_minutes", fields.minutes)
        object.__setattr__(self, "_hours", fields.hours)
        object.__setattr__(self, "_days", fields.days)
        object.__setattr__(self, "_months", fields.months)
        object.__setattr__(self, "_weekdays", fields.weekdays)
        object.__setattr__(self, "_day_or", fields.day_or)
        object.__setattr__(self, "_cronsim_text", fields.cronsim_text)
        slots = tuple(time(h, m) for h in sorted(fields.hours) for m in sorted(fields.minutes))
        object.__setattr__(self, "_slots", slots)

    # -- wall-clock helpers ---------------------------------------------------------------

    def _day_matches(self, day: date) -> bool:
        if day.month not in self._months:
            return False
        dom = day.day in self._days
        dow = day.isoweekday() % 7 in self._weekdays
        return (dom or dow) if self._day_or else (dom and dow)

    def _matches(self, wall: datetime) -> bool:
        """Whether a naive wall-clock minute matches every field (the re-check)."""
        return (
            wall.second == 0
            and wall.minute in self._minutes
            and wall.hour in self._hours
            and self._day_matches(wall.date())
        )

    def _instant(self, wall: datetime) -> datetime | None:
        """The first UTC instant showing naive ``wall`` in the zone; ``None`` in a gap."""
        if self._zone is UTC:
            return wall.replace(tzinfo=UTC)
        instant = wall.replace(tzinfo=self._zone, fold=0).astimezone(UTC)
        if instant.astimezone(self._zone).replace(tzinfo=None) != wall:
            return None
        return instant

    def _wall(self, instant: datetime) -> datetime:
        return instant.astimezone(self._zone).replace(tzinfo=None, fold=0)

    # -- searching ------------------------------------------------------------------------

    def _search_forward(self, after: datetime, horizon: datetime) -> datetime | None:
        """The first tick strictly after ``after`` whose wall time is at most ``horizon``."""
        cursor = CronSim(self._cronsim_text, self._wall(after))
        try:
            for wall in cursor:
                if wall > horizon:
                    return None
                instant = self._instant(wall)
                # Gap minutes are skipped; first occurrences already behind ``after`` (when
                # ``after`` lies in the repeated hour) are dropped.
                if instant is None or instant <= after or not self._matches(wall):
                    continue
                return instant
        except OverflowError:
            return None
        return None

    def next_fire(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``.

        Args:
            after: an aware instant, any zone (exclusive bound).

        Returns:
            An aware UTC ``datetime`` at a whole minute that exists in the zone, is the first
            occurrence of its wall-clock minute and matches every field.

        Raises:
            ValueError: ``after`` is naive.
            InvalidInputError: (``field="cron_expression"``) nothing fires within
                :data:`HORIZON_YEARS` years of ``after``.
        """
        _check_aware(after, "after")
        after = after.astimezone(UTC)
        start = self._wall(after)
        found = self._search_forward(after, _later(start, timedelta(days=366 * HORIZON_YEARS)))
        if found is None:
            raise invalid(
                f"cron_expression {self.expression!r} does not fire within {HORIZON_YEARS}"
                f" years after {after.isoformat()}"
            )
        return found

    def _newest(self, after: datetime, until: datetime, wanted: int) -> list[datetime]:
        """Up to ``wanted`` ticks in ``(after, until]``, newest first."""
        local = until.astimezone(self._zone)
        shift = (local.replace(fold=0).utcoffset() or timedelta(0)) - (
            local.replace(fold=1).utcoffset() or timedelta(0)
        )
        # When ``until`` lies in a repeated (fall-back) span, first occurrences of later wall
        # minutes are already behind it: start the backward walk that much later.
        start = self._wall(until).replace(microsecond=0) + max(shift, timedelta(0))
        found: list[datetime] = []
        try:
            for wall in CronSim(self._cronsim_text, start + _ONE_SECOND, reverse=True):
                instant = self._instant(wall)
                if instant is None or instant > until or not self._matches(wall):
                    continue
                if instant <= after:
                    break
                found.append(instant)
                if len(found) >= wanted:
                    break
        except OverflowError:  # pragma: no cover - only at datetime.min
            pass
        return found

    def _uniform_day(self, day: date) -> bool:
        """Whether the zone's UTC offset is the same all day (no transition on ``day``)."""
        if self._zone is UTC:
            return True
        first = datetime.combine(day, time(), tzinfo=self._zone)
        last = datetime.combine(day, _LAST_MINUTE, tzinfo=self._zone)
        offset = first.utcoffset()
        return (
            first.replace(fold=1).utcoffset() == offset
            and last.utcoffset() == offset
            and last.replace(fold=1).utcoffset() == offset
        )

    def _count(self, after: datetime, until: datetime, limit: int) -> tuple[int, bool]:
        """Count ticks in ``(after, until]`` by calendar day; ``(count, exact)``."""
        day = self._wall(after).date() - _ONE_DAY
        end = self._wall(until).date() + _ONE_DAY
        per_day = len(self._slots)
        first_slot, last_slot = self._slots[0], self._slots[-1]
        count = 0
        walked = 0
        while day <= end:
            walked += 1
            if walked > _COUNT_MAX_DAYS:
                return count, False
            if day.month not in self._months:
                next_month = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
                walked += (next_month - day).days - 1
                day = next_month
                continue
            if self._day_matches(day):
                # On a day without a transition every slot exists and the slots are in order,
                # so the first and last slot decide; otherwise look at each slot.
                uniform = self._uniform_day(day)
                first = self._instant(datetime.combine(day, first_slot)) if uniform else None
                last = self._instant(datetime.combine(day, last_slot)) if uniform else None
                if first is None or last is None:
                    count += self._count_day(day, after, until)
                elif first > after and last <= until:
                    count += per_day
                elif last > after and first <= until:
                    count += self._count_day(day, after, until)
                if count >= limit:
                    return count, False
            day += _ONE_DAY
        return count, True

    def _count_day(self, day: date, after: datetime, until: datetime) -> int:
        count = 0
        for slot in self._slots:
            instant = self._instant(datetime.combine(day, slot))
            if instant is not None and after < instant <= until:
                count += 1
        return count

    def fires_between(self, after: datetime, until: datetime, *, cap: int) -> MissedTicks:
        """The ticks in ``(after, until]``: the newest ``cap`` to fire, the rest counted.

        Bounded in time for any window: the newest ticks come from a backward walk from
        ``until``; the older ones are counted per calendar day (exactly up to
        :data:`MISSED_COUNT_LIMIT`, then ``dropped_exact`` is false).

        Args:
            after: aware instant, exclusive (e.g. the last tick already handled).
            until: aware instant, inclusive (e.g. now).
            cap: how many of the newest ticks to return, ``>= 0``.

        Returns:
            :class:`MissedTicks`; empty (``fire=()``, ``dropped=0``) when ``until <= after``
            or nothing fires in the window.

        Raises:
            ValueError: ``after`` or ``until`` is naive, or ``cap`` is negative.
        """
        _check_aware(after, "after")
        _check_aware(until, "until")
        if cap < 0:
            raise ValueError(f"cap must be >= 0, got {cap}")
        after, until = after.astimezone(UTC), until.astimezone(UTC)
        empty = MissedTicks(fire=(), dropped=0, dropped_exact=True, oldest_dropped=None)
        if until <= after:
            return empty
        first = self._search_forward(after, _later(self._wall(until), _ONE_DAY))
        if first is None or first > until:
            return empty
        newest = self._newest(after, until, cap + 1) if cap else [first]
        if len(newest) <= cap:
            return MissedTicks(
                fire=tuple(reversed(newest)), dropped=0, dropped_exact=True, oldest_dropped=None
            )
        kept = newest[:cap]
        # Count the ticks in (after, oldest kept]; the oldest kept one itself is not dropped.
        boundary, kept_in_window = (kept[-1], 1) if kept else (until, 0)
        total, exact = self._count(after, boundary, MISSED_COUNT_LIMIT + kept_in_window)
        dropped = max(total - kept_in_window, 1)  # the backward walk saw at least one more
        return MissedTicks(
            fire=tuple(reversed(kept)),
            dropped=dropped,
            dropped_exact=exact,
            oldest_dropped=first,
        )


def parse_schedule(expression: str, timezone: str = "") -> CronSchedule:
    """Validate a five-field cron expression and an IANA zone into a :class:`CronSchedule`.

    Args:
        expression: ``minute hour day-of-month month day-of-week`` (see the module docstring
            for the accepted syntax); surrounding and repeated whitespace is normalised.
        timezone: IANA zone name the fields are evaluated in; ``""`` (default) means UTC.

    Returns:
        The schedule; ``schedule.expression`` is the normalised text.

    Raises:
        InvalidInputError: ``field="cron_expression"`` for an empty, malformed (wrong field
            count, out-of-range value, reversed range, zero step), non-standard (``@daily``,
            ``L``, ``W``, ``#``, ``?``, ``H``, seconds field) or never-firing expression
            (e.g. ``0 0 30 2 *``); ``field="timezone"`` for an unknown zone. The message
            names the problem.
    """
    return CronSchedule(expression, timezone)


def next_fire(expression: str, timezone: str, after: datetime) -> datetime:
    """``parse_schedule(expression, timezone).next_fire(after)``: aware UTC, strictly after.

    Args:
        expression: a five-field cron expression.
        timezone: IANA zone name; ``""`` means UTC.
        after: an aware instant (exclusive bound).

    Returns:
        The first tick strictly after ``after``, as an aware UTC ``datetime``.

    Raises:
        InvalidInputError: see :func:`parse_schedule` and :meth:`CronSchedule.next_fire`.
        ValueError: ``after`` is naive.
    """
    return parse_schedule(expression, timezone).next_fire(after)
