"""Failure classification, rate-limit reset parsing and retry backoff (pure).

DESIGN §6, "Failures go to ``retry.py``": an executor failure whose text says the agent CLI was
rate limited and names a parsable reset is retried at that reset plus :data:`RESET_MARGIN`
(when that lies in the future); any other failure is retried after an entry of
:data:`BACKOFF_TABLE` with ±:data:`JITTER` uniform jitter; the :data:`MAX_FAILURES`-th failure
escalates instead of retrying.

Everything here is pure: no clock (``now`` is a parameter), no I/O, no state. Only the standard
library and :mod:`zoneinfo` (with the ``tzdata`` package) are used. Every instant returned is an
aware UTC :class:`~datetime.datetime`; every duration is a :class:`~datetime.timedelta`.

Sources of the phrasings recognised (see the tests for one vector each):

* Kandev ``retry_ratelimit.go`` (Kandev behaviour reference notes §1.12 and §4.5):
  the keywords ``rate limit``, ``rate_limit``, ``429``, ``too many requests``, ``quota exceeded``;
  ``Retry-After: N``; ``try again in N minutes``; ``resets at 3:45 PM``; ``reset_time: <unix>``.
  Where Kandev differs, DESIGN wins: ``429`` must be a whole number (``14290`` is not a rate
  limit), a wall time is read in the zone the message names, and a past reset falls back to
  backoff instead of being used.
* Claude Code: ``Claude AI usage limit reached|<unix s>``, ``5-hour limit reached ∙ resets 3pm``,
  ``You've hit your limit · resets 7pm (Europe/Berlin)``, ``resets Apr 23 at 4pm (Zone)``,
  ``Claude usage limit reached. Your limit will reset at 3pm (America/New_York).``, the API's
  ``rate_limit_error`` and ``"resetsAt": <unix s>``.
* Codex CLI: ``You've hit your usage limit. ... try again in 2 days 4 hours 5 minutes.`` /
  ``... try again at 9:00 AM.`` / ``... try again at Dec 3rd, 2026 9:00 AM.``, ``stream error:
  exceeded retry limit, last status: 429 Too Many Requests``, ``Rate limit reached for gpt-5 ...
  Please try again in 1.5s.`` and the backend's ``"resets_at"`` / ``"resets_in_seconds"``.
* Gemini CLI: ``429 Too Many Requests``, ``RESOURCE_EXHAUSTED``, ``Resource has been exhausted``,
  ``Quota exceeded for quota metric '...'``, ``Please retry in 41.28s.``, ``"retryDelay": "41s"``,
  ``You have exhausted your capacity on this model. Your quota will reset after 8h44m7s.``,
  ``You have reached your daily quota limit.``.

Time is bounded on any input: only the last :data:`SCAN_LIMIT` characters of a text are
scanned, and every pattern is a literal-anchored regex whose quantifiers are bounded, so no
pattern backtracks catastrophically.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from email.utils import parsedate_to_datetime
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from office_scheduler.domain.status import ErrorFamily

__all__ = [
    "BACKOFF_TABLE",
    "JITTER",
    "MAX_FAILURES",
    "MAX_RESET_HORIZON",
    "RESET_MARGIN",
    "SCAN_LIMIT",
    "RetryPlan",
    "RetrySource",
    "backoff_delay",
    "classify_error",
    "is_rate_limited",
    "parse_reset",
    "plan_retry",
]

#: Backoff before retry number *n* (``BACKOFF_TABLE[n - 1]``, clamped to the last entry).
BACKOFF_TABLE: Final[tuple[timedelta, ...]] = (
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(minutes=30),
    timedelta(hours=2),
)
#: Relative half-width of the uniform backoff jitter: a delay lies in ``[0.75, 1.25] * base``.
JITTER: Final = 0.25
#: Added to a parsed reset so the retry lands after the provider's window has really reopened.
RESET_MARGIN: Final = timedelta(seconds=30)
#: The failure (counting from 1) that escalates instead of retrying.
MAX_FAILURES: Final = 4
#: Parsed resets further than this in the future are ignored as implausible (typo, bad clock).
MAX_RESET_HORIZON: Final = timedelta(days=31)
#: Only this many trailing characters of an error text are scanned (64 KiB).
SCAN_LIMIT: Final = 64 * 1024

RetrySource = Literal["rate_limit_parsed", "backoff"]


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What to do with a failed run.

    Attributes:
        escalate: True when the failure budget is spent: no retry; the caller fails the run
            and escalates (inbox ``agent.error``, ``agent_error`` wake to the coordinator).
        retry_at: aware UTC instant of the retry; None when escalating.
        delay: ``retry_at - now``; None when escalating.
        source: ``rate_limit_parsed`` (retry at a reset the provider named, plus
            :data:`RESET_MARGIN`) or ``backoff`` (table plus jitter); None when escalating.
        parsed_reset_at: the reset instant parsed from rate-limit text (aware UTC, without the
            margin), also when it was already past or the plan escalates, for logging; None when
            the text is not a rate limit or names no parsable reset.
        rate_limited: whether the text was recognised as a rate limit (:func:`is_rate_limited`).
    """

    escalate: bool
    retry_at: datetime | None
    delay: timedelta | None
    source: RetrySource | None
    parsed_reset_at: datetime | None
    rate_limited: bool


# --------------------------------------------------------------------------------------------
# Detection and classification
# --------------------------------------------------------------------------------------------

_F = re.IGNORECASE

_RATE_LIMIT_RE: Final = re.compile(
    r"rate[\s_-]?limit"  # rate limit, rate_limit(_error), rate-limit, RateLimitError
    r"|(?<![\w.])(?<!line )429(?!\w|\.\d|:\d)"  # whole-number 429, not 14290 nor file.py:429:1
    r"|too\s{1,4}many\s{1,4}requests"
    r"|quota[\s_]{1,4}exceeded|exceeded\s{1,4}(?:your\s{1,4})?(?:current\s{1,4})?quota"
    r"|insufficient_quota|quota\s{1,4}limit"  # OpenAI; Gemini "reached your daily quota limit"
    r"|usage[\s_]{1,4}limit|out\s{1,4}of\s{1,4}extra\s{1,4}usage"  # Claude, Codex
    r"|(?<!context )(?<!context window )(?<!turn )(?<!turns )(?<!token )limit[\s_]{1,4}reached"
    r"|hit\s{1,4}your\s{1,4}(?:\w{1,20}\s{1,4})?limit"  # "You've hit your (usage) limit"
    r"|resource[\s_]{1,4}(?:has\s{1,4}been\s{1,4})?exhausted"  # Gemini RESOURCE_EXHAUSTED
    r"|exhausted\s{1,4}your\s{1,4}capacity"  # Gemini Code Assist
    r"|\bthrottl(?:ed|ing)",  # Bedrock ThrottlingException
    _F,
)
_AUTH_RE: Final = re.compile(
    r"invalid[\s_-]{0,2}(?:x-)?api[\s_-]{0,2}key|api[\s_]key[\s_]{1,4}(?:not[\s_]{1,4}valid"
    r"|is[\s_]{1,4}missing|not[\s_]{1,4}found|missing)|(?<![\w.])401(?!\w|\.\d)"
    r"|unauthori[sz]ed|authentication[\s_]{1,4}(?:error|failed|required)|authentication_error"
    r"|not\s{1,4}logged\s{1,4}in|please\s{1,4}(?:run\s{1,4})?/login|login\s{1,4}required"
    r"|oauth\s{1,4}token\s{1,4}(?:has\s{1,4})?expired|token\s{1,4}(?:has\s{1,4})?expired"
    r"|set\s{1,4}an\s{1,4}auth\s{1,4}method|credentials?\s{1,4}(?:not\s{1,4}found|expired)",
    _F,
)
_REFUSAL_RE: Final = re.compile(
    r"\brefusal\b|usage\s{1,4}policy|content[\s_]{1,4}(?:policy|filter)"
    r"|unable\s{1,4}to\s{1,4}respond\s{1,4}to\s{1,4}this\s{1,4}request"
    r"|blocked\s{1,4}(?:by|due\s{1,4}to)\s{1,4}safety|finish_?reason\W{0,4}safety",
    _F,
)
_MAX_TURNS_RE: Final = re.compile(
    r"max(?:imum)?[\s_-]{0,2}(?:number[\s_]{1,4}of[\s_]{1,4})?turns"
    r"|turn[\s_]{1,4}limit|error_max_turns",
    _F,
)
_CONFIG_RE: Final = re.compile(
    r"command\s{1,4}not\s{1,4}found|no\s{1,4}such\s{1,4}file\s{1,4}or\s{1,4}directory"
    r"|unknown\s{1,4}(?:option|argument|flag)|unrecognized\s{1,4}(?:option|argument)"
    r"|model[\s_]{1,4}not[\s_]{1,4}found|model_not_found|invalid\s{1,4}model"
    r"|not_found_error|invalid[\s_]{1,4}config",
    _F,
)
_TRANSIENT_RE: Final = re.compile(
    r"overloaded|(?<![\w.])5(?:00|02|03|04|29)(?!\w|\.\d)|internal\s{1,4}server\s{1,4}error"
    r"|service\s{1,4}unavailable|bad\s{1,4}gateway|gateway\s{1,4}time-?out"
    r"|temporarily\s{1,4}unavailable|econn(?:reset|refused|aborted)|etimedout|eai_again"
    r"|socket\s{1,4}hang\s{1,4}up|connection\s{1,4}(?:reset|refused|error|closed|aborted)"
    r"|network\s{1,4}error|timed\s{1,4}out|stream\s{1,4}disconnected|try\s{1,4}again\s{1,4}later",
    _F,
)


def _tail(text: str) -> str:
    return text[-SCAN_LIMIT:]


def is_rate_limited(text: str) -> bool:
    """Tell whether an error text says the agent CLI or its API was rate limited.

    Case-insensitive. DESIGN §6 keywords: ``rate limit``, ``rate_limit``, ``429`` (a whole
    number: not inside ``14290``, not a ``line 429`` or ``file.py:429:3`` source position),
    ``too many requests``, ``quota exceeded``. Current CLI phrasings: ``usage limit``,
    ``limit reached`` (not ``context``/``turn``/``token limit reached``), ``hit your limit``,
    ``out of extra usage`` (Claude Code, Codex); ``resource_exhausted``, ``resource has been
    exhausted``, ``exhausted your capacity``, ``quota limit`` (Gemini); ``exceeded your current
    quota``, ``insufficient_quota`` (OpenAI); ``throttled``/``throttling`` (Bedrock).

    Args:
        text: the failure message and/or output; only the last :data:`SCAN_LIMIT` characters
            are scanned.

    Returns:
        True when any rate-limit phrasing occurs.
    """
    return _RATE_LIMIT_RE.search(_tail(text)) is not None


def classify_error(text: str) -> ErrorFamily:
    """Sort a failure text into an :class:`ErrorFamily` (checked in this order).

    * ``RATE_LIMIT``: :func:`is_rate_limited`.
    * ``AUTH``: ``invalid api key``, ``API key not valid``, ``401``, ``unauthorized``,
      ``authentication_error``, ``not logged in``, ``please run /login``, ``login required``,
      ``OAuth token has expired``, Gemini ``set an Auth method``.
    * ``REFUSAL``: ``refusal``, ``usage policy``, ``content policy``/``content_filter``, Claude
      ``unable to respond to this request``, Gemini ``blocked by safety`` / ``finishReason:
      SAFETY``.
    * ``TIMEOUT``: max turns (``max turns``, ``maximum number of turns``, ``error_max_turns``,
      ``turn limit``): the agent ran out of its turn budget, the turn analogue of a wall
      timeout (ErrorFamily has no dedicated member).
    * ``CONFIG``: ``command not found``, ``No such file or directory``, unknown options,
      unknown or invalid models.
    * ``TRANSIENT``: ``overloaded``, HTTP ``500``/``502``/``503``/``504``/``529``, connection
      resets and refusals, ``timed out``, ``stream disconnected``, ``try again later``.
    * ``CRASH``: anything else (the executor's default family for a failed session).

    Args:
        text: the failure message and/or output; only the last :data:`SCAN_LIMIT` characters
            are scanned.

    Returns:
        The first family whose phrasings match.
    """
    tail = _tail(text)
    if _RATE_LIMIT_RE.search(tail):
        return ErrorFamily.RATE_LIMIT
    if _AUTH_RE.search(tail):
        return ErrorFamily.AUTH
    if _REFUSAL_RE.search(tail):
        return ErrorFamily.REFUSAL
    if _MAX_TURNS_RE.search(tail):
        return ErrorFamily.TIMEOUT
    if _CONFIG_RE.search(tail):
        return ErrorFamily.CONFIG
    if _TRANSIENT_RE.search(tail):
        return ErrorFamily.TRANSIENT
    return ErrorFamily.CRASH


# --------------------------------------------------------------------------------------------
# Reset parsing
# --------------------------------------------------------------------------------------------

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


def _utc_now(now: datetime) -> datetime:
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
    now = _utc_now(now)
    horizon = now + MAX_RESET_HORIZON
    found = [at for at in _candidates(_tail(text), now) if at is not None and at <= horizon]
    return max(found, default=None)


# --------------------------------------------------------------------------------------------
# Backoff and the decision
# --------------------------------------------------------------------------------------------


def backoff_delay(failures: int, rng: random.Random | None = None) -> timedelta:
    """Backoff before the retry that follows failure number ``failures``.

    ``BACKOFF_TABLE[failures - 1]`` (2 min, 10 min, 30 min, then 2 h for the 4th and later),
    times a factor drawn uniformly from ``[1 - JITTER, 1 + JITTER]`` (DESIGN §6: ±25 %, unlike
    Kandev's one-sided ``[0, +25 %)``).

    Args:
        failures: failures so far including this one; at least 1.
        rng: source of the jitter; a fresh :class:`random.Random` when None.

    Returns:
        The jittered delay.

    Raises:
        ValueError: ``failures`` is below 1.
    """
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    base = BACKOFF_TABLE[min(failures, len(BACKOFF_TABLE)) - 1]
    factor = (rng or random.Random()).uniform(1 - JITTER, 1 + JITTER)
    return base * factor


def plan_retry(
    error_text: str,
    failures: int,
    now: datetime,
    rng: random.Random | None = None,
    *,
    max_failures: int = MAX_FAILURES,
) -> RetryPlan:
    """Decide whether and when a failed run is retried (DESIGN §6).

    1. ``failures >= max_failures`` → escalate: no retry.
    2. Rate-limited text (:func:`is_rate_limited`) with a reset (:func:`parse_reset`) such that
       ``reset + RESET_MARGIN > now`` → retry at ``reset + RESET_MARGIN``, source
       ``rate_limit_parsed``.
    3. Otherwise → retry after :func:`backoff_delay`, source ``backoff``; a parsed reset that
       was already past is kept in ``parsed_reset_at`` for logging.

    A reset in a text that is not a rate limit (a bare ``Retry-After: 3600``) is ignored.

    Args:
        error_text: the failure text; only the last :data:`SCAN_LIMIT` characters are scanned.
        failures: failures so far including this one (1 for the first failure).
        now: the current instant; must be aware.
        rng: source of the backoff jitter; a fresh :class:`random.Random` when None.
        max_failures: the failure count that escalates.

    Returns:
        The plan; all instants aware UTC.

    Raises:
        ValueError: ``failures`` or ``max_failures`` is below 1, or ``now`` is naive.
    """
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    if max_failures < 1:
        raise ValueError(f"max_failures must be >= 1, got {max_failures}")
    now = _utc_now(now)
    text = _tail(error_text)
    rate_limited = is_rate_limited(text)
    reset = parse_reset(text, now) if rate_limited else None
    if failures >= max_failures:
        return RetryPlan(
            escalate=True,
            retry_at=None,
            delay=None,
            source=None,
            parsed_reset_at=reset,
            rate_limited=rate_limited,
        )
    if reset is not None and reset + RESET_MARGIN > now:
        retry_at = reset + RESET_MARGIN
        return RetryPlan(
            escalate=False,
            retry_at=retry_at,
            delay=retry_at - now,
            source="rate_limit_parsed",
            parsed_reset_at=reset,
            rate_limited=True,
        )
    delay = backoff_delay(failures, rng)
    return RetryPlan(
        escalate=False,
        retry_at=now + delay,
        delay=delay,
        source="backoff",
        parsed_reset_at=reset,
        rate_limited=rate_limited,
    )
