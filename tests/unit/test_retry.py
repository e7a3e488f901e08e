from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest

from office_scheduler.domain.status import ErrorFamily
from office_scheduler.retry import (
    BACKOFF_TABLE,
    JITTER,
    MAX_FAILURES,
    RESET_MARGIN,
    RetryPlan,
    backoff_delay,
    classify_error,
    is_rate_limited,
    parse_reset,
    plan_retry,
)

# Sunday 2026-11-29 14:10:00 UTC; Europe/Berlin is CET (+1), America/New_York EST (-5).
NOW = datetime(2026, 11, 29, 14, 10, tzinfo=UTC)
NOW_UNIX = 1795961400
AT_19_UNIX = 1795978800  # 2026-11-29T19:00:00Z


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


# (id, text, expected reset) for NOW.
RESET_CASES: list[tuple[str, str, datetime | None]] = [
    # Claude Code
    ("claude pipe unix s", f"Claude AI usage limit reached|{AT_19_UNIX}", utc(2026, 11, 29, 19)),
    ("claude pipe past", "Claude AI usage limit reached|1767225600", utc(2026, 1, 1)),
    ("claude 5-hour", "5-hour limit reached ∙ resets 3pm", utc(2026, 11, 29, 15)),
    (
        "claude hit your limit berlin",
        "You've hit your limit · resets 7pm (Europe/Berlin)",
        utc(2026, 11, 29, 18),
    ),
    (
        "claude will reset at new york",
        "Claude usage limit reached. Your limit will reset at 3pm (America/New_York).",
        utc(2026, 11, 29, 20),
    ),
    (
        "claude limit reached half-hour zone tomorrow",
        "Limit reached · resets 11:30am (Asia/Calcutta) · /upgrade to Max or turn on /extra-usage",
        utc(2026, 11, 30, 6),
    ),
    (
        "claude dated reset no year",
        "You've hit your limit · resets Dec 2 at 4pm (America/Recife)",
        utc(2026, 12, 2, 19),
    ),
    ("claude weekly dated", "Weekly limit reached ∙ resets Dec 3, 10am", utc(2026, 12, 3, 10)),
    ("claude out of extra usage", "You're out of extra usage · resets 3pm", utc(2026, 11, 29, 15)),
    (
        "claude resetsAt json",
        f'{{"rateLimitType":"five_hour","resetsAt":{AT_19_UNIX}}}',
        utc(2026, 11, 29, 19),
    ),
    # wall times
    ("wall time passed today", "rate limit resets at 2:05 PM", utc(2026, 11, 30, 14, 5)),
    ("wall time equal to now", "rate limit resets at 14:10", utc(2026, 11, 30, 14, 10)),
    ("24h clock", "rate limit resets at 15:45", utc(2026, 11, 29, 15, 45)),
    ("12 AM is midnight", "rate limit resets at 12 AM", utc(2026, 11, 30, 0)),
    ("12 PM is noon (passed)", "rate limit resets at 12 PM", utc(2026, 11, 30, 12)),
    ("12:30 AM tokyo", "rate limit resets at 12:30 AM (Asia/Tokyo)", utc(2026, 11, 29, 15, 30)),
    ("12pm tokyo", "rate limit resets 12pm (Asia/Tokyo)", utc(2026, 11, 30, 3)),
    ("UTC suffix", "rate_limit_error: resets at 4:00 AM UTC", utc(2026, 11, 30, 4)),
    ("zone after in", "rate limit resets 3pm in America/New_York", utc(2026, 11, 29, 20)),
    ("a.m./p.m.", "rate limit resets at 9:15 p.m.", utc(2026, 11, 29, 21, 15)),
    ("reset at", "rate limit, reset at 11:59 PM", utc(2026, 11, 29, 23, 59)),
    ("weekday tomorrow", "rate limit resets on Monday at 9am", utc(2026, 11, 30, 9)),
    ("weekday today passed", "rate limit resets Sunday at 9am", utc(2026, 12, 6, 9)),
    ("weekday today later", "rate limit resets Sun 3:00 PM", utc(2026, 11, 29, 15)),
    (
        "weekday with zone",
        "rate limit resets on Monday at 9am (Europe/Berlin)",
        utc(2026, 11, 30, 8),
    ),
    ("iso instant", "rate limit; reset: 2026-11-29T15:00:00Z", utc(2026, 11, 29, 15)),
    ("iso with offset", "rate limit; reset: 2026-11-29T17:00:00+01:00", utc(2026, 11, 29, 16)),
    # Codex
    (
        "codex compound duration",
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
        "or try again in 2 days 4 hours 5 minutes.",
        utc(2026, 12, 1, 18, 15),
    ),
    (
        "codex try again at time",
        "You've hit your usage limit. Try again at 9:00 AM.",
        utc(2026, 11, 30, 9),
    ),
    (
        "codex weekly try again at date",
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), visit "
        "https://chatgpt.com/codex/settings/usage to purchase more credits or try again at "
        "Dec 3rd, 2026 9:00 AM.",
        utc(2026, 12, 3, 9),
    ),
    (
        "codex past date",
        "You've hit your usage limit. Try again at Nov 1st, 2026 9:00 AM.",
        utc(2026, 11, 1, 9),
    ),
    (
        "openai tpm seconds",
        "Rate limit reached for gpt-5 in organization org-abc on tokens per min (TPM): "
        "Limit 30000, Used 29000, Requested 1500. Please try again in 1.5s.",
        utc(2026, 11, 29, 14, 10, 1, 500000),
    ),
    (
        "openai milliseconds",
        "Rate limit reached for gpt-5 on requests per min. Please try again in 20ms.",
        utc(2026, 11, 29, 14, 10, 0, 20000),
    ),
    (
        "codex stream error has no reset",
        "stream error: exceeded retry limit, last status: 429 Too Many Requests",
        None,
    ),
    (
        "codex resets_in_seconds",
        '{"error":{"type":"usage_limit_reached","plan_type":"plus","resets_in_seconds":9000}}',
        utc(2026, 11, 29, 16, 40),
    ),
    (
        "codex resets_at unix",
        f'{{"error":{{"type":"usage_limit_reached","resets_at":{AT_19_UNIX}}}}}',
        utc(2026, 11, 29, 19),
    ),
    (
        "codex resets_at formatted",
        "error: usage_limit_reached\nresets_at: Dec 2nd, 2026 10:15 PM",
        utc(2026, 12, 2, 22, 15),
    ),
    # Gemini
    (
        "gemini retry in fractional seconds",
        "429 Too Many Requests: Quota exceeded. Please retry in 41.28s.",
        utc(2026, 11, 29, 14, 10, 41, 280000),
    ),
    (
        "gemini retryDelay",
        '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":'
        '"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]}}',
        utc(2026, 11, 29, 14, 10, 41),
    ),
    (
        "gemini quota metric has no reset",
        "Quota exceeded for quota metric 'Generate Content API requests per minute' and limit "
        "'GenerateContent request limit per minute for a region'",
        None,
    ),
    (
        "gemini capacity compact duration",
        "You have exhausted your capacity on this model. Your quota will reset after 8h44m7s.",
        utc(2026, 11, 29, 22, 54, 7),
    ),
    # Kandev forms
    ("retry-after header", "429 Too Many Requests\nRetry-After: 120", utc(2026, 11, 29, 14, 12)),
    ("retry after words", "rate limit; retry after 120", utc(2026, 11, 29, 14, 12)),
    ("retry-after no space", "rate limit retry-after:60", utc(2026, 11, 29, 14, 11)),
    ("retryafter", "rate limit retryafter 5", utc(2026, 11, 29, 14, 10, 5)),
    ("retry_after json", 'rate_limit {"retry_after": 30}', utc(2026, 11, 29, 14, 10, 30)),
    ("retry-after zero", "rate limit Retry-After: 0", NOW),
    ("retry-after-ms", "429; retry-after-ms: 1500", utc(2026, 11, 29, 14, 10, 1, 500000)),
    (
        "retry-after http date",
        "429; Retry-After: Wed, 02 Dec 2026 07:28:00 GMT",
        utc(2026, 12, 2, 7, 28),
    ),
    (
        "try again in minutes",
        "rate limit. Please try again in 5 minutes",
        utc(2026, 11, 29, 14, 15),
    ),
    ("try again capitalised", "rate limit. Try again in 10 Minutes", utc(2026, 11, 29, 14, 20)),
    ("try again in 1 minute", "rate limit. try again in 1 minute", utc(2026, 11, 29, 14, 11)),
    ("try again in hours", "rate limit. try again in 2 hours", utc(2026, 11, 29, 16, 10)),
    ("30 sec", "rate limit. try again in 30 sec", utc(2026, 11, 29, 14, 10, 30)),
    ("5 min", "rate limit. try again in 5 min.", utc(2026, 11, 29, 14, 15)),
    ("an hour", "rate limit. try again in an hour", utc(2026, 11, 29, 15, 10)),
    ("reset_time s", f"rate limit exceeded reset_time: {AT_19_UNIX}", utc(2026, 11, 29, 19)),
    (
        "reset_time ms",
        f"rate limit exceeded reset_time: {AT_19_UNIX}500",
        utc(2026, 11, 29, 19, 0, 0, 500000),
    ),
    ("reset_time past", "rate limit exceeded reset_time: 1752624000", utc(2025, 7, 16)),
    ("reset_time 9 digits ignored", "rate limit reset_time: 123456789", None),
    (
        "latest of several wins",
        "429 Too Many Requests, Retry-After: 3600, try again in 5 minutes",
        utc(2026, 11, 29, 15, 10),
    ),
    # rejected
    ("hour 25", "rate limit resets at 25:00", None),
    ("13 PM", "rate limit resets at 13:00 PM", None),
    ("0 AM", "rate limit resets at 0 AM", None),
    ("bare hour", "rate limit resets at 3", None),
    ("beyond horizon duration", "rate limit, try again in 45 days", None),
    ("dated yesterday means next year", "rate limit resets Nov 28 at 4pm", None),
    ("no reset", "rate limit exceeded", None),
    ("empty", "", None),
    ("timed out after 30s is no reset", "connection timed out after 30s", None),
    ("invalid date", "rate limit resets Feb 30, 2027 9:00 AM", None),
    ("year 9999 west of UTC", "rate limit resets Dec 31, 9999 11pm (America/New_York)", None),
    (
        "unknown zone falls back to UTC",
        "rate limit resets 3pm (Mars/Olympus)",
        utc(2026, 11, 29, 15),
    ),
    ("zone directory falls back to UTC", "rate limit resets 3pm (America)", utc(2026, 11, 29, 15)),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in RESET_CASES], ids=[i for i, _, _ in RESET_CASES]
)
def test_parse_reset(text: str, expected: datetime | None) -> None:
    got = parse_reset(text, NOW)
    assert got == expected
    if got is not None:
        assert got.tzinfo is UTC


# (id, now, text, expected): DST transitions and Kandev's vectors at other instants.
OTHER_NOW_CASES: list[tuple[str, datetime, str, datetime]] = [
    (
        # Berlin springs forward on 2026-03-29; +24 h from today's 19:00 CET would be 18:00Z.
        "berlin across spring DST",
        utc(2026, 3, 28, 19, 30),
        "You've hit your limit · resets 7pm (Europe/Berlin)",
        utc(2026, 3, 29, 17),
    ),
    (
        # New York falls back on 2026-11-01; 3pm EST is 20:00Z, not 19:00Z.
        "new york across autumn DST",
        utc(2026, 10, 31, 20),
        "Claude usage limit reached. Your limit will reset at 3pm (America/New_York).",
        utc(2026, 11, 1, 20),
    ),
    (
        "berlin summer time",
        utc(2026, 7, 1, 12),
        "You've hit your limit · resets 7pm (Europe/Berlin)",
        utc(2026, 7, 1, 17),
    ),
    ("kandev R16", utc(2026, 1, 15, 3, 45), "rate limit resets at 4:00 AM", utc(2026, 1, 15, 4)),
    ("kandev R17", utc(2026, 1, 15, 3, 45), "resets at 04:30", utc(2026, 1, 15, 4, 30)),
    ("kandev R18", utc(2026, 1, 15, 3, 45), "resets at 3:00 AM", utc(2026, 1, 16, 3)),
    ("kandev R19", utc(2026, 1, 15, 3, 45), "reset at 11:59 PM", utc(2026, 1, 15, 23, 59)),
    ("kandev R24", utc(2026, 1, 15, 3, 45), "resets at 12:00 AM", utc(2026, 1, 16)),
    ("kandev R25", utc(2026, 1, 15, 3, 45), "resets at 12:30 PM", utc(2026, 1, 15, 12, 30)),
    (
        "dated reset without year wraps to next year",
        utc(2026, 12, 30, 12),
        "You've hit your limit · resets Jan 2 at 4pm (America/Recife)",
        utc(2027, 1, 2, 19),
    ),
]


@pytest.mark.parametrize(
    ("now", "text", "expected"),
    [(n, t, e) for _, n, t, e in OTHER_NOW_CASES],
    ids=[i for i, _, _, _ in OTHER_NOW_CASES],
)
def test_parse_reset_other_now(now: datetime, text: str, expected: datetime) -> None:
    assert parse_reset(text, now) == expected


def test_parse_reset_accepts_any_aware_now_and_rejects_naive() -> None:
    from zoneinfo import ZoneInfo

    berlin_now = NOW.astimezone(ZoneInfo("Europe/Berlin"))
    assert parse_reset("resets 3pm", berlin_now) == utc(2026, 11, 29, 15)
    with pytest.raises(ValueError, match="aware"):
        parse_reset("resets 3pm", datetime(2026, 11, 29, 14, 10))


RATE_LIMITED = [
    "rate limit exceeded",
    "error: rate_limit",
    "429 Too Many Requests",
    "Too Many Requests from this IP",
    "Quota exceeded for today",
    "RATE LIMIT hit for model",
    "received HTTP/429 from upstream",
    "(429)",
    "status: 429.",
    "RateLimitError: slow down",
    "you are being rate-limited",
    "Claude AI usage limit reached|1767225600",
    "5-hour limit reached ∙ resets 3pm",
    "You've hit your limit · resets 7pm (Europe/Berlin)",
    "You've hit your usage limit. Try again at 9:00 AM.",
    "You're out of extra usage · resets 3pm",
    "stream error: exceeded retry limit, last status: 429 Too Many Requests",
    "RESOURCE_EXHAUSTED",
    "Resource has been exhausted (e.g. check quota).",
    "You have exhausted your capacity on this model.",
    "You have reached your daily quota limit.",
    "You exceeded your current quota, please check your plan and billing details.",
    "insufficient_quota",
    "ThrottlingException: Too many tokens, please wait before trying again.",
]

NOT_RATE_LIMITED = [
    "error code 14290",
    "error 4290",
    "syntax error",
    "connection timed out",
    "resource not found",
    "internal server error 500",
    "unrated content",
    "",
    "Retry-After: 3600",
    'File "agent.py", line 429, in run',
    "agent.py:429:10: E501 line too long",
    "version 1.429",
    "Context limit reached · /compact or /clear to continue",
    "Reached maximum number of turns (10)",
]


@pytest.mark.parametrize("text", RATE_LIMITED, ids=RATE_LIMITED)
def test_rate_limited(text: str) -> None:
    assert is_rate_limited(text)
    assert classify_error(text) is ErrorFamily.RATE_LIMIT


@pytest.mark.parametrize("text", NOT_RATE_LIMITED, ids=[repr(t) for t in NOT_RATE_LIMITED])
def test_not_rate_limited(text: str) -> None:
    assert not is_rate_limited(text)


CLASSIFY_CASES: list[tuple[str, ErrorFamily]] = [
    ("Invalid API key · Please run /login", ErrorFamily.AUTH),
    ("Error: 401 Unauthorized", ErrorFamily.AUTH),
    ("Not logged in · Please run /login", ErrorFamily.AUTH),
    ('{"type":"authentication_error","message":"OAuth token has expired."}', ErrorFamily.AUTH),
    ("API key not valid. Please pass a valid API key.", ErrorFamily.AUTH),
    ("Please set an Auth method in your settings.json", ErrorFamily.AUTH),
    ('{"stop_reason":"refusal"}', ErrorFamily.REFUSAL),
    (
        "API Error: Claude Code is unable to respond to this request, which appears to violate "
        "our Usage Policy",
        ErrorFamily.REFUSAL,
    ),
    ("Response blocked by safety filters", ErrorFamily.REFUSAL),
    ("Reached maximum number of turns (10)", ErrorFamily.TIMEOUT),
    ('{"subtype":"error_max_turns"}', ErrorFamily.TIMEOUT),
    ("max turns exceeded", ErrorFamily.TIMEOUT),
    ("bash: claude: command not found", ErrorFamily.CRASH),
    ("cat: notes.md: No such file or directory", ErrorFamily.CRASH),
    ("sh: 1: rg: command not found\nError: tests failed", ErrorFamily.CRASH),
    ('{"error":{"code":"model_not_found"}}', ErrorFamily.CONFIG),
    ("error: unknown option '--foo'", ErrorFamily.CONFIG),
    ("API Error: 529 Overloaded", ErrorFamily.TRANSIENT),
    ("connect ECONNREFUSED 127.0.0.1:443", ErrorFamily.TRANSIENT),
    ("connection refused", ErrorFamily.TRANSIENT),
    ("stream disconnected before completion", ErrorFamily.TRANSIENT),
    ("Request timed out.", ErrorFamily.TRANSIENT),
    ("503 Service Unavailable", ErrorFamily.TRANSIENT),
    ("syntax error", ErrorFamily.CRASH),
    ("error code 14290", ErrorFamily.CRASH),
    ("", ErrorFamily.CRASH),
    ("429 Too Many Requests after 401", ErrorFamily.RATE_LIMIT),
]


@pytest.mark.parametrize(
    ("text", "family"), CLASSIFY_CASES, ids=[t or "empty" for t, _ in CLASSIFY_CASES]
)
def test_classify_error(text: str, family: ErrorFamily) -> None:
    assert classify_error(text) is family


@pytest.mark.parametrize("failures", range(1, 7))
def test_backoff_delay_jitter_bounds(failures: int) -> None:
    base = BACKOFF_TABLE[min(failures, len(BACKOFF_TABLE)) - 1]
    delays = {backoff_delay(failures, random.Random(seed)) for seed in range(300)}
    assert all(base * (1 - JITTER) <= d <= base * (1 + JITTER) for d in delays)
    assert len(delays) > 250  # jittered, not constant
    assert min(delays) < base * 0.8
    assert max(delays) > base * 1.2  # both sides: ±25 %, not Kandev's one-sided +25 %


def test_backoff_table_and_constants() -> None:
    assert (
        timedelta(minutes=2),
        timedelta(minutes=10),
        timedelta(minutes=30),
        timedelta(hours=2),
    ) == BACKOFF_TABLE
    assert JITTER == 0.25
    assert timedelta(seconds=30) == RESET_MARGIN
    assert MAX_FAILURES == 5


def test_backoff_delay_seeded_is_reproducible_and_default_rng_works() -> None:
    assert backoff_delay(2, random.Random(7)) == backoff_delay(2, random.Random(7))
    assert timedelta(minutes=1.5) <= backoff_delay(1) <= timedelta(minutes=2.5)
    with pytest.raises(ValueError, match="failures"):
        backoff_delay(0, random.Random(1))


@pytest.mark.parametrize("failures", [5, 6, 9])
def test_plan_escalates_at_max_failures(failures: int) -> None:
    plan = plan_retry("You've hit your limit · resets 3pm", failures, NOW, random.Random(1))
    assert plan == RetryPlan(
        escalate=True,
        retry_at=None,
        delay=None,
        source=None,
        parsed_reset_at=utc(2026, 11, 29, 15),
        rate_limited=True,
    )


@pytest.mark.parametrize("failures", [1, 2, 3, 4])
def test_plan_does_not_escalate_before_max(failures: int) -> None:
    plan = plan_retry("syntax error", failures, NOW, random.Random(1))
    assert not plan.escalate
    assert plan.source == "backoff"
    assert plan.retry_at is not None
    assert plan.delay is not None
    assert plan.retry_at == NOW + plan.delay
    base = BACKOFF_TABLE[failures - 1]
    assert base * 0.75 <= plan.delay <= base * 1.25
    assert plan.parsed_reset_at is None
    assert not plan.rate_limited


def test_plan_custom_max_failures() -> None:
    assert plan_retry("boom", 2, NOW, max_failures=2).escalate
    assert not plan_retry("boom", 1, NOW, max_failures=2).escalate


def test_plan_rate_limit_parsed() -> None:
    plan = plan_retry("You've hit your limit · resets 7pm (Europe/Berlin)", 1, NOW)
    assert plan == RetryPlan(
        escalate=False,
        retry_at=utc(2026, 11, 29, 18, 0, 30),
        delay=timedelta(hours=3, minutes=50, seconds=30),
        source="rate_limit_parsed",
        parsed_reset_at=utc(2026, 11, 29, 18),
        rate_limited=True,
    )


def test_plan_rate_limit_parsed_on_third_failure() -> None:
    plan = plan_retry("429 Too Many Requests\nRetry-After: 3600", 3, NOW)
    assert plan.source == "rate_limit_parsed"
    assert plan.retry_at == utc(2026, 11, 29, 15, 10, 30)


def test_plan_reset_just_past_still_within_margin() -> None:
    # Reset 10 s ago: reset + 30 s is still in the future, so the reset is used.
    plan = plan_retry(f"rate limit reset_time: {NOW_UNIX - 10}", 1, NOW)
    assert plan.source == "rate_limit_parsed"
    assert plan.retry_at == NOW + timedelta(seconds=20)
    assert plan.delay == timedelta(seconds=20)


def test_plan_reset_exactly_margin_ago_backs_off() -> None:
    plan = plan_retry(f"rate limit reset_time: {NOW_UNIX - 30}", 1, NOW, random.Random(3))
    assert plan.source == "backoff"
    assert plan.parsed_reset_at == NOW - RESET_MARGIN


def test_plan_past_reset_backs_off_and_keeps_parsed() -> None:
    plan = plan_retry("Claude AI usage limit reached|1767225600", 2, NOW, random.Random(5))
    assert plan.source == "backoff"
    assert plan.rate_limited
    assert plan.parsed_reset_at == utc(2026, 1, 1)
    assert plan.delay == backoff_delay(2, random.Random(5))
    assert plan.retry_at == NOW + backoff_delay(2, random.Random(5))


def test_plan_rate_limit_without_reset_backs_off() -> None:
    plan = plan_retry("rate limit exceeded, please wait", 1, NOW, random.Random(2))
    assert plan.source == "backoff"
    assert plan.rate_limited
    assert plan.parsed_reset_at is None
    assert plan.retry_at is not None
    assert plan.retry_at < NOW + timedelta(minutes=3)


def test_plan_ignores_reset_without_rate_limit_keyword() -> None:
    plan = plan_retry("Retry-After: 3600", 1, NOW, random.Random(2))
    assert plan.source == "backoff"
    assert not plan.rate_limited
    assert plan.parsed_reset_at is None


def test_plan_validates_arguments() -> None:
    with pytest.raises(ValueError, match="failures"):
        plan_retry("x", 0, NOW)
    with pytest.raises(ValueError, match="max_failures"):
        plan_retry("x", 1, NOW, max_failures=0)
    with pytest.raises(ValueError, match="aware"):
        plan_retry("x", 1, datetime(2026, 1, 1))


def test_retry_plan_is_frozen() -> None:
    plan = plan_retry("boom", 1, NOW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.escalate = True  # type: ignore[misc]


def test_only_the_tail_is_scanned() -> None:
    filler = "x" * 100_000
    assert is_rate_limited(filler + "429 Too Many Requests. Please retry in 41.28s.")
    assert parse_reset(filler + " resets 3pm", NOW) == utc(2026, 11, 29, 15)
    assert not is_rate_limited("rate limit exceeded " + filler)


FIVE_MB = 5 * 1024 * 1024


def _repeat(unit: str) -> str:
    return (unit * (FIVE_MB // len(unit) + 1))[:FIVE_MB]


ADVERSARIAL = {
    "spaces": " " * FIVE_MB,
    "digits": "9" * FIVE_MB,
    "resets": _repeat("resets at "),
    "resets spaces": _repeat("resets    at    1"),
    "try again": _repeat("try again in 1 "),
    "compound": "try again in " + _repeat("1 day, and "),
    "zones": _repeat("resets 3pm (Europe/"),
    "bad zones": _repeat("resets 3pm (No/Such_Zone) "),
    "retry after": _repeat("Retry-After: "),
    "dates": _repeat("resets Dec 3rd, 2026 "),
    "weekdays": _repeat("resets on Monday at "),
    "too many": _repeat("too   many   "),
    "numbers": _repeat("429 14290 1.429 "),
    "rate limit tail": " " * FIVE_MB + "rate limit resets 3pm",
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_bounded_on_adversarial_input(text: str) -> None:
    plan = plan_retry(text, 1, NOW, random.Random(0))
    assert isinstance(plan, RetryPlan)
    assert isinstance(classify_error(text), ErrorFamily)
    parse_reset(text, NOW)
