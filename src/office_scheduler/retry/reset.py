"""Reset parsing: when a rate-limited agent CLI says it may be called again (pure).

See :func:`parse_reset` for the recognised phrasings of Claude Code, Codex and Gemini. Time
is bounded on any input: only the last :data:`SCAN_LIMIT` characters are scanned, and every
pattern is linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from email.utils import parsedate_to_datetime
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: Parsed resets further than this in the future are ignored as implausible (typo, bad clock).
MAX_RESET_HORIZON: Final = timedelta(days=31)
#: Only this many trailing characters of an error text are scanned (64 KiB).
SCAN_LIMIT: Final = 64 * 1024

_F = re.IGNORECASE


def tail(text: str) -> str:
    """The part of ``text`` that is scanned: its last :data:`SCAN_LIMIT` characters."""
    return text[-SCAN_LIMIT:]


#: One ``<number> <unit>`` component of a duration: ``41.28s``, ``5 min``, ``an hour``, ``20ms``.
_COMPONENT = (
    r"(?:\d{1,9}(?:\.\d{1,9})?|an?)\s{0,2}"
    r"(?:milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h"
    r"|days?|d|weeks?|wks?|w)(?![a-z])"
)
_COMPONENT_RE: Final = re.compile(
    r"(?P<n>\d{1,9}(?:\.\d{1,9})?|an?)\s{0,2}"
    r"(?P<u>milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h"
    r"|days?|d|weeks?|wks?|w)(?![a-z])",
    _F,
)
#: A compound duration: ``2 days 4 hours 5 minutes``, ``8h44m7s``, ``1 hour, 5 minutes``.
_DURATION_RE: Final = re.compile(
    rf"{_COMPONENT}(?:\s{{0,4}}(?:(?:,|and)\s{{0,4}})?{_COMPONENT}){{0,6}}", _F
)
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

#: ``Retry-After: 120`` / ``retry after 120`` / ``retry_after=30`` / ``retry-after-ms: 1500``
#: (Kandev rule 1; HTTP header, also as an HTTP-date). The value follows the match.
_RETRY_AFTER_RE: Final = re.compile(
    r"\bretry[-_ ]?after(?P<ms>[-_]ms)?\b\"?\s{0,4}[:=]?\s{0,4}\"?", _F
)
_NUMBER_RE: Final = re.compile(r"\d{1,12}(?:\.\d{1,9})?(?!\d|\.\d)")
_HTTP_DATE_RE: Final = re.compile(
    r"[a-z]{3},\s{1,4}\d{1,2}\s{1,4}[a-z]{3}\s{1,4}\d{4}\s{1,4}\d{2}:\d{2}:\d{2}\s{1,4}GMT", _F
)
#: Relative resets: ``try again in 5 minutes``, ``Please retry in 41.28s``, ``reset after
#: 8h44m7s``, ``"retryDelay": "41s"`` (Kandev rule 2, Codex, Gemini). The duration follows.
_RELATIVE_RE: Final = re.compile(
    r"\b(?:(?:try\s{1,4}again|retry|resets?|available(?:\s{1,4}again)?)"
    r"\s{1,4}(?:in|after)\b\s{0,4}(?:about\s{1,4}|approximately\s{1,4}|~\s{0,2})?"
    r"|retry_?delay\b\"?\s{0,4}[:=]\s{0,4}\"?)",
    _F,
)
#: ``"resets_in_seconds": 9000`` (Codex backend).
_RESETS_IN_SECONDS_RE: Final = re.compile(r"\bresets?_in_seconds\"?\s{0,4}[:=]\s{0,4}(\d{1,9})", _F)
#: Unix instants: ``reset_time: <s|ms>`` (Kandev rule 4), ``"resetsAt": <s>``, ``"resets_at"``,
#: and Claude Code's ``usage limit reached|<s>``. Values above 10**11 are milliseconds.
_UNIX_RE: Final = re.compile(
    r"(?:\breset_?time\"?\s{0,4}[:= ]\s{0,4}\"?|\bresets?_?at\"?\s{0,4}[:=]\s{0,4}\"?"
    r"|limit\s{1,4}reached\s{0,2}\|\s{0,2})(\d{10,13})(?!\d)",
    _F,
)
_MS_THRESHOLD: Final = 10**11

#: Absolute resets: ``resets 3pm``, ``reset at 3:45 PM``, ``resets on Monday at 9am``,
#: ``try again at Dec 3rd, 2026 9:00 AM`` (Kandev rule 3, Claude Code, Codex). Value follows.
_ABSOLUTE_RE: Final = re.compile(
    r"\b(?:resets?|until)\b(?:\s{1,4}(?:at|on))?(?:\s{0,4}:)?\s{0,4}"
    r"|\b(?:try\s{1,4}again|retry|available(?:\s{1,4}again)?)\s{1,4}(?:at|on)\b\s{0,4}"
    r"|\bresets?_?at\"?\s{0,4}[:=]\s{0,4}\"?",  # "resets_at": "Dec 29th, 2025 10:15 PM"
    _F,
)
#: A wall time; the lookahead demands minutes or am/pm, so a bare number is not a time.
_TIME = (
    r"(?P<h>\d{1,2})(?=:\d{2}|\s{0,2}[ap]\.?m\b)(?::(?P<mi>\d{2}))?(?::\d{2})?(?!\d)"
    r"(?:\s{0,2}(?P<ap>[ap])\.?m\b\.?)?(?![\d:])"
)
_TIME_RE: Final = re.compile(_TIME, _F)
_MONTHS: Final = (
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
)
_DATE_RE: Final = re.compile(
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?(?![a-z])"
    r"\s{1,4}(?P<d>\d{1,2})(?:st|nd|rd|th)?(?!\d)"
    r"(?:,?\s{1,4}(?P<y>\d{4})(?![\d:]))?"
    rf"(?:,?\s{{0,4}}(?:at\s{{1,4}})?{_TIME})?",
    _F,
)
_WEEKDAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEKDAY_RE: Final = re.compile(
    r"(?:(?:next|this)\s{1,4})?(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|mon|tues?|wed|thur?s?|fri|sat|sun)\.?(?![a-z])"
    rf"(?:,?\s{{0,4}}(?:at\s{{1,4}})?{_TIME})?",
    _F,
)
_ISO_RE: Final = re.compile(
    r"(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)"
    r"\s{0,2}(?P<off>Z|[+-]\d{2}:?\d{2})?(?![\d:])",
    _F,
)
_ZONE_NAME = r"[A-Za-z][A-Za-z0-9_+-]{0,40}(?:/[A-Za-z0-9_+-]{1,40}){0,3}"
_AREA_ZONE = r"[A-Za-z][A-Za-z0-9_+-]{0,40}(?:/[A-Za-z0-9_+-]{1,40}){1,3}"
#: A zone right after a wall time: ``(Europe/Berlin)``, ``(UTC)``, ``in America/New_York``,
#: ``at Asia/Tokyo``, ``UTC``, ``GMT``, ``Z``, ``Europe/Berlin``.
_ZONE_RE: Final = re.compile(
    rf"\s{{0,4}}(?:\(\s{{0,2}}(?P<p>{_ZONE_NAME})\s{{0,2}}\)"
    rf"|(?:in|at)\s{{1,4}}(?P<q>{_AREA_ZONE}|UTC|GMT)(?![\w/])"
    rf"|(?P<b>{_AREA_ZONE}|UTC|GMT|Z)(?![\w/]))"
)
_UTC_NAMES: Final = frozenset({"utc", "gmt", "z", "zulu", "etc/utc", "etc/gmt"})


def utc_now(now: datetime) -> datetime:
    """``now`` in UTC.

    Raises:
        ValueError: ``now`` is naive.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return now.astimezone(UTC)


def _zone(name: str | None) -> tzinfo:
    """Resolve an IANA zone name from a message; UTC when absent or unknown."""
    if not name or name.lower() in _UTC_NAMES:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return UTC


def _zone_after(text: str, pos: int) -> tzinfo:
    match = _ZONE_RE.match(text, pos)
    if match is None:
        return UTC
    return _zone(match.group("p") or match.group("q") or match.group("b"))


def _clock(hour_s: str | None, minute_s: str | None, ampm: str | None) -> time | None:
    """Validate a wall time: ``3pm``, ``3:45 PM``, ``12 AM`` (midnight), ``15:45``, ``04:30``.

    A bare hour without minutes or am/pm is not a time. With am/pm the hour is 1-12; without,
    0-23. Returns None for anything else (``25:00``, ``13:00 PM``).
    """
    if hour_s is None or (minute_s is None and ampm is None):
        return None
    hour, minute = int(hour_s), int(minute_s or 0)
    if minute > 59:
        return None
    if ampm is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm.lower() == "p" else 0)
    elif hour > 23:
        return None
    return time(hour, minute)


def _at(day: date, clock: time, zone: tzinfo) -> datetime:
    """The aware UTC instant of wall time ``clock`` on ``day`` in ``zone`` (fold 0 on DST)."""
    return datetime.combine(day, clock, tzinfo=zone).astimezone(UTC)


def _next_wall_time(clock: time, zone: tzinfo, now: datetime) -> datetime:
    """The first instant strictly after ``now`` whose wall time in ``zone`` is ``clock``.

    Built per calendar day in the zone (not by adding 24 h), so it is DST-correct.
    """
    today = now.astimezone(zone).date()
    for offset in range(3):
        candidate = _at(today + timedelta(days=offset), clock, zone)
        if candidate > now:
            return candidate
    return _at(today + timedelta(days=3), clock, zone)  # pragma: no cover - unreachable


def _parse_absolute_at(text: str, pos: int, now: datetime) -> datetime | None:
    """Parse the date/time that starts at ``pos`` (right after a reset trigger)."""
    iso = _ISO_RE.match(text, pos)
    if iso is not None:
        offset = iso.group("off") or ""
        parsed = datetime.fromisoformat(
            iso.group("iso").replace(" ", "T") + ("+00:00" if offset in ("z", "Z") else offset)
        )
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=_zone_after(text, iso.end()))
        return parsed.astimezone(UTC)

    dated = _DATE_RE.match(text, pos)
    if dated is not None:
        return _dated(dated, text, now)

    weekday = _WEEKDAY_RE.match(text, pos)
    if weekday is not None:
        return _weekday(weekday, text, now)

    clock_match = _TIME_RE.match(text, pos)
    if clock_match is not None:
        clock = _clock(clock_match.group("h"), clock_match.group("mi"), clock_match.group("ap"))
        if clock is not None:
            return _next_wall_time(clock, _zone_after(text, clock_match.end()), now)
    return None


def _dated(match: re.Match[str], text: str, now: datetime) -> datetime | None:
    """``Dec 3, 2026 9:00 AM`` as given; ``Apr 23 at 4pm`` at its next occurrence after now."""
    month = _MONTHS.index(match.group("mon")[:3].lower()) + 1
    day = int(match.group("d"))
    if match.group("h") is None:
        clock: time | None = time(0, 0)
    else:
        clock = _clock(match.group("h"), match.group("mi"), match.group("ap"))
    if clock is None:
        return None
    zone = _zone_after(text, match.end())
    year_s = match.group("y")
    years = [int(year_s)] if year_s else [now.astimezone(zone).year + k for k in range(3)]
    for year in years:
        try:
            candidate = _at(date(year, month, day), clock, zone)
        except ValueError:  # Feb 30, Feb 29 in a common year
            continue
        if year_s or candidate > now:
            return candidate
    return None


def _weekday(match: re.Match[str], text: str, now: datetime) -> datetime | None:
    """``resets on Monday at 9am``: the next such instant strictly after now."""
    target = _WEEKDAYS.index(match.group("wd")[:3].lower())
    if match.group("h") is None:
        clock: time | None = time(0, 0)
    else:
        clock = _clock(match.group("h"), match.group("mi"), match.group("ap"))
    if clock is None:
        return None
    zone = _zone_after(text, match.end())
    today = now.astimezone(zone).date()
    ahead = (target - today.weekday()) % 7
    for extra in (0, 7, 14):
        candidate = _at(today + timedelta(days=ahead + extra), clock, zone)
        if candidate > now:
            return candidate
    return None  # pragma: no cover - unreachable


def _after(now: datetime, seconds: float) -> datetime | None:
    """``now + seconds``, or None beyond :data:`MAX_RESET_HORIZON` (avoids overflow)."""
    if seconds > MAX_RESET_HORIZON.total_seconds():
        return None
    return now + timedelta(seconds=seconds)


def _duration_at(text: str, pos: int) -> float | None:
    """Seconds of the (compound) duration that starts at ``pos``, if one does."""
    match = _DURATION_RE.match(text, pos)
    if match is None:
        return None
    seconds = 0.0
    for part in _COMPONENT_RE.finditer(match.group(0)):
        amount_s, unit = part.group("n").lower(), part.group("u").lower()
        amount = 1.0 if amount_s in ("a", "an") else float(amount_s)
        key = "ms" if unit.startswith(("ms", "milli")) else unit[0]
        seconds += amount * _UNIT_SECONDS[key]
    return seconds


def _retry_after(match: re.Match[str], text: str, now: datetime) -> datetime | None:
    """The value after ``Retry-After``: a duration, bare seconds (or ms), or an HTTP-date."""
    pos = match.end()
    duration = _duration_at(text, pos)
    if duration is not None:
        return _after(now, duration)
    number = _NUMBER_RE.match(text, pos)
    if number is not None:
        return _after(now, float(number.group(0)) * (0.001 if match.group("ms") else 1.0))
    http_date = _HTTP_DATE_RE.match(text, pos)
    if http_date is not None:
        return parsedate_to_datetime(http_date.group(0)).astimezone(UTC)
    return None


def _candidates(text: str, now: datetime) -> list[datetime | None]:
    """Every reset the text names (None for a form that turned out unparsable)."""
    found: list[datetime | None] = []
    for match in _RETRY_AFTER_RE.finditer(text):
        found.append(_guarded(_retry_after, match, text, now))
    for match in _RELATIVE_RE.finditer(text):
        duration = _duration_at(text, match.end())
        found.append(None if duration is None else _after(now, duration))
    for match in _RESETS_IN_SECONDS_RE.finditer(text):
        found.append(_after(now, int(match.group(1))))
    for match in _UNIX_RE.finditer(text):
        value = int(match.group(1))
        found.append(datetime.fromtimestamp(value / 1000 if value > _MS_THRESHOLD else value, UTC))
    for match in _ABSOLUTE_RE.finditer(text):
        found.append(_guarded(_absolute, match, text, now))
    return found


def _absolute(match: re.Match[str], text: str, now: datetime) -> datetime | None:
    return _parse_absolute_at(text, match.end(), now)


def _guarded(
    parse: Callable[[re.Match[str], str, datetime], datetime | None],
    match: re.Match[str],
    text: str,
    now: datetime,
) -> datetime | None:
    """Run one form's parser; an out-of-range value (year 9999 west of UTC) parses as None."""
    try:
        return parse(match, text, now)
    except (ValueError, OverflowError, TypeError):
        return None


def parse_reset(text: str, now: datetime) -> datetime | None:
    """Find when a rate limit named in ``text`` resets.

    Recognised forms (case-insensitive; ``now`` as given; no :data:`RESET_MARGIN` added):

    * Wall times ``resets at 3:45 PM``, ``resets 3pm``, ``reset at 3pm``, ``resets at 15:45``,
      ``try again at 9:00 AM``, ``resets 7pm (Europe/Berlin)``, ``... at 3pm in Asia/Tokyo``,
      ``... 4:00 AM UTC``: the next occurrence strictly after ``now`` of that wall time in the
      IANA zone named right after it (parenthesised, after ``in``/``at``, or bare), else UTC;
      ``12 AM`` is midnight, ``12 PM`` noon; computed per calendar day so DST-correct.
    * Dates ``resets Dec 3, 2026 9:00 AM``, ``try again at Dec 3rd, 2026 9:00 AM`` (exact,
      possibly past), ``resets Apr 23 at 4pm`` (no year: next occurrence after ``now``),
      ``resets on Monday at 9am`` (next such instant), ISO ``reset: 2026-12-03T09:00:00Z``.
    * Durations from ``now``: ``Retry-After: N`` (seconds; also ``retry after N``,
      ``retry_after=N``, ``retry-after-ms: N`` in milliseconds, or an HTTP-date),
      ``try again in 5 minutes``, compound ``try again in 2 days 4 hours 5 minutes``,
      ``Please retry in 41.28s``, ``try again in 1.5s``/``20ms``/``30 sec``/``5 min``/``an
      hour``, ``reset after 8h44m7s``, ``"retryDelay": "41s"``, ``"resets_in_seconds": N``.
    * Unix instants ``reset_time: <s or ms>``, ``"resetsAt": <s>``, ``"resets_at": <s>`` and
      Claude Code's ``usage limit reached|<s>``: 10 to 13 digits, values above 10**11 are
      milliseconds.

    When the text names several resets, the latest wins: retrying before any stated reset
    would only burn a failure. Resets more than :data:`MAX_RESET_HORIZON` after ``now`` are
    ignored. Absolute dates and Unix instants may lie in the past; they are returned as is.
    The text is not required to look like a rate limit (see :func:`plan_retry`).

    Args:
        text: the failure text; only the last :data:`SCAN_LIMIT` characters are scanned.
        now: the current instant; must be aware (any zone, read as UTC).

    Returns:
        The reset as an aware UTC datetime, or None when nothing parsable is found.

    Raises:
        ValueError: ``now`` is naive.
    """
    now = utc_now(now)
    horizon = now + MAX_RESET_HORIZON
    found = [at for at in _candidates(tail(text), now) if at is not None and at <= horizon]
    return max(found, default=None)
