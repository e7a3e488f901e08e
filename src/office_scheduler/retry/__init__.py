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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from office_scheduler.domain.status import ErrorFamily
from office_scheduler.retry.reset import (
    MAX_RESET_HORIZON,
    SCAN_LIMIT,
    parse_reset,
    tail,
    utc_now,
)

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
#: The failure (counting from 1) that escalates instead of retrying: the fifth, so that each of
#: the four :data:`BACKOFF_TABLE` entries is used once (the original system's schedule).
MAX_FAILURES: Final = 5

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
#: Words of a CLI that started and refused its arguments or model. ``command not found`` and
#: ``No such file or directory`` are not here: an agent's own tools print them in its stderr
#: all the time; a program that could not be started is known from the spawn itself (the
#: executor's ``config_failure``), not from words.
_CONFIG_RE: Final = re.compile(
    r"unknown\s{1,4}(?:option|argument|flag)|unrecognized\s{1,4}(?:option|argument)"
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
    return _RATE_LIMIT_RE.search(tail(text)) is not None


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
    * ``CONFIG``: unknown options, unknown or invalid models (the CLI refused its
      arguments). Never ``command not found`` or ``No such file or directory``: those are
      the agent's tools talking; a missing program or working directory is known from the
      failed spawn, which the executor reports as ``config`` itself.
    * ``TRANSIENT``: ``overloaded``, HTTP ``500``/``502``/``503``/``504``/``529``, connection
      resets and refusals, ``timed out``, ``stream disconnected``, ``try again later``.
    * ``CRASH``: anything else (the executor's default family for a failed session).

    Args:
        text: the failure message and/or output; only the last :data:`SCAN_LIMIT` characters
            are scanned.

    Returns:
        The first family whose phrasings match.
    """
    scanned = tail(text)
    if _RATE_LIMIT_RE.search(scanned):
        return ErrorFamily.RATE_LIMIT
    if _AUTH_RE.search(scanned):
        return ErrorFamily.AUTH
    if _REFUSAL_RE.search(scanned):
        return ErrorFamily.REFUSAL
    if _MAX_TURNS_RE.search(scanned):
        return ErrorFamily.TIMEOUT
    if _CONFIG_RE.search(scanned):
        return ErrorFamily.CONFIG
    if _TRANSIENT_RE.search(scanned):
        return ErrorFamily.TRANSIENT
    return ErrorFamily.CRASH


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
    now = utc_now(now)
    text = tail(error_text)
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
