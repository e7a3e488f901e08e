"""Cron semantics (DESIGN §8) pinned with exact UTC instants.

Transitions used (read from zoneinfo):
- America/New_York: 2026-03-08 07:00Z (-05 -> -04), 2026-11-01 06:00Z (-04 -> -05).
- Europe/Berlin: 2026-03-29 01:00Z (+01 -> +02), 2026-10-25 01:00Z (+02 -> +01).
- Australia/Lord_Howe: 2026-04-04 15:00Z (+11 -> +10:30, local 2026-04-05 02:00 -> 01:30),
  2026-10-03 15:30Z (+10:30 -> +11, local 2026-10-04 02:00 -> 02:30).
"""

from __future__ import annotations

import time as timer
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from office_scheduler.cron import (
    MISSED_COUNT_LIMIT,
    CronSchedule,
    MissedTicks,
    next_fire,
    parse_schedule,
)
from office_scheduler.domain.errors import InvalidInputError


def z(text: str) -> datetime:
    """``"2026-03-08 05:00"`` -> aware UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expression: str, zone: str, after: str, count: int) -> list[str]:
    schedule = parse_schedule(expression, zone)
    cursor = z(after)
    out = []
    for _ in range(count):
        cursor = schedule.next_fire(cursor)
        assert cursor.tzinfo is UTC
        out.append(cursor.strftime("%Y-%m-%d %H:%M"))
    return out


# -- transitions really are where the tests assume ---------------------------------------


@pytest.mark.parametrize(
    ("zone", "instant", "before", "after"),
    [
        ("America/New_York", "2026-03-08 07:00", -5 * 60, -4 * 60),
        ("America/New_York", "2026-11-01 06:00", -4 * 60, -5 * 60),
        ("Europe/Berlin", "2026-03-29 01:00", 60, 120),
        ("Europe/Berlin", "2026-10-25 01:00", 120, 60),
        ("Australia/Lord_Howe", "2026-04-04 15:00", 11 * 60, 10 * 60 + 30),
        ("Australia/Lord_Howe", "2026-10-03 15:30", 10 * 60 + 30, 11 * 60),
    ],
)
def test_transition_dates(zone: str, instant: str, before: int, after: int) -> None:
    at = z(instant)
    tz = ZoneInfo(zone)
    assert (at - timedelta(seconds=1)).astimezone(tz).utcoffset() == timedelta(minutes=before)
    assert at.astimezone(tz).utcoffset() == timedelta(minutes=after)


# -- day-of-month / day-of-week ------------------------------------------------------------


def test_dom_and_dow_both_restricted_are_ored() -> None:
    # crontab(5): the 13th OR any Friday.
    assert fires("0 0 13 * 5", "", "2026-02-01 00:00", 11) == [
        "2026-02-06 00:00",
        "2026-02-13 00:00",
        "2026-02-20 00:00",
        "2026-02-27 00:00",
        "2026-03-06 00:00",
        "2026-03-13 00:00",
        "2026-03-20 00:00",
        "2026-03-27 00:00",
        "2026-04-03 00:00",
        "2026-04-10 00:00",
        "2026-04-13 00:00",
    ]


def test_dow_star_means_dom_only() -> None:
    assert fires("0 0 13 * *", "", "2026-02-01 00:00", 2) == [
        "2026-02-13 00:00",
        "2026-03-13 00:00",
    ]


def test_dom_star_step_is_unrestricted_so_the_day_fields_are_anded() -> None:
    # "*/2" starts with "*", so day-of-month counts as unrestricted and the two day fields
    # are ANDed: odd days of the month (1, 3, ..., 31) that are also Fridays. January 2026's
    # Fridays are 2, 9, 16, 23, 30 -> 9 and 23; February's 6, 13, 20, 27 -> 13 and 27.
    assert fires("0 0 */2 * 5", "", "2026-01-01 00:00", 4) == [
        "2026-01-09 00:00",
        "2026-01-23 00:00",
        "2026-02-13 00:00",
        "2026-02-27 00:00",
    ]


def test_dom_restricted_and_dow_star_step_are_anded() -> None:
    # "*/7" in day-of-week is {0, 7} = Sunday and unrestricted: the 1st when it is a Sunday.
    assert fires("0 0 1 * */7", "", "2026-01-01 00:00", 2) == [
        "2026-02-01 00:00",
        "2026-03-01 00:00",
    ]


def test_sunday_is_0_and_7_and_names_work() -> None:
    assert fires("0 0 * * 7", "", "2026-01-01 00:00", 2) == ["2026-01-04 00:00", "2026-01-11 00:00"]
    assert fires("0 0 * * 0", "", "2026-01-01 00:00", 1) == ["2026-01-04 00:00"]
    assert fires("0 0 * * Sun", "", "2026-01-01 00:00", 1) == ["2026-01-04 00:00"]
    assert fires("0 9 * jul-AUG mon-fri", "", "2026-01-01 00:00", 2) == [
        "2026-07-01 09:00",
        "2026-07-02 09:00",
    ]
    assert fires("0 0 * JUL WED", "", "2026-01-01 00:00", 1) == ["2026-07-01 00:00"]


def test_lists_ranges_and_steps() -> None:
    assert fires("5,10-12,50-59/5 3 * * *", "", "2026-01-01 00:00", 6) == [
        "2026-01-01 03:05",
        "2026-01-01 03:10",
        "2026-01-01 03:11",
        "2026-01-01 03:12",
        "2026-01-01 03:50",
        "2026-01-01 03:55",
    ]
    # "N/S" means "N-max/S"; a one-value range with a step is just that value.
    assert fires("50/4 0 * * *", "", "2026-01-01 00:00", 3) == [
        "2026-01-01 00:50",
        "2026-01-01 00:54",
        "2026-01-01 00:58",
    ]
    assert fires("7-7/5 0 * * *", "", "2026-01-01 00:00", 2) == [
        "2026-01-01 00:07",
        "2026-01-02 00:07",
    ]


def test_feb_30_or_monday_fires_on_mondays_in_february() -> None:
    assert fires("0 0 30 2 1", "", "2026-01-01 00:00", 2) == [
        "2026-02-02 00:00",
        "2026-02-09 00:00",
    ]


def test_leap_day() -> None:
    assert fires("0 0 29 2 *", "", "2026-01-01 00:00", 2) == [
        "2028-02-29 00:00",
        "2032-02-29 00:00",
    ]


def test_rare_expression_is_fast() -> None:
    started = timer.perf_counter()
    # OR: Mondays in February, or a leap day; 2027-02-01 is a Monday (00:00 CET).
    assert fires("0 0 29 2 1", "Europe/Berlin", "2026-03-01 00:00", 1) == ["2027-01-31 23:00"]
    # AND: a leap day that is a Sunday (2032-02-29 is one).
    assert fires("0 0 29 2 */7", "", "2026-03-01 00:00", 1) == ["2032-02-29 00:00"]
    # A guard against a minute-by-minute walk (minutes), not a speed claim: bench/ has those.
    assert timer.perf_counter() - started < 10.0


# -- strictly after -------------------------------------------------------------------------


def test_after_on_a_fire_instant_gives_the_next_one() -> None:
    schedule = parse_schedule("0 * * * *")
    assert schedule.next_fire(z("2026-05-01 10:00")) == z("2026-05-01 11:00")
    assert schedule.next_fire(z("2026-05-01 09:59:59.999999")) == z("2026-05-01 10:00")
    assert schedule.next_fire(z("2026-05-01 10:00:00.000001")) == z("2026-05-01 11:00")


def test_after_in_another_zone_is_the_same_instant() -> None:
    after = datetime(2026, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))  # 10:00Z
    assert next_fire("0 * * * *", "", after) == z("2026-05-01 11:00")


def test_naive_after_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_schedule("* * * * *").next_fire(datetime(2026, 1, 1))


# -- spring forward: nonexistent minutes are skipped ---------------------------------------


def test_new_york_spring_forward_skips_the_missing_slot() -> None:
    assert fires("30 2 * * *", "America/New_York", "2026-03-07 05:00", 3) == [
        "2026-03-07 07:30",
        "2026-03-09 06:30",
        "2026-03-10 06:30",
    ]
    assert fires("*/5 * * * *", "America/New_York", "2026-03-08 06:50", 3) == [
        "2026-03-08 06:55",  # 01:55 EST
        "2026-03-08 07:00",  # 03:00 EDT
        "2026-03-08 07:05",
    ]
    assert fires("*/30 1-3 * * *", "America/New_York", "2026-03-08 05:00", 5) == [
        "2026-03-08 06:00",
        "2026-03-08 06:30",
        "2026-03-08 07:00",
        "2026-03-08 07:30",
        "2026-03-09 05:00",
    ]


def test_berlin_spring_forward_skips_the_missing_slot() -> None:
    assert fires("30 2 * * *", "Europe/Berlin", "2026-03-27 12:00", 3) == [
        "2026-03-28 01:30",  # 02:30 CET
        "2026-03-30 00:30",  # 02:30 CEST; nothing on 03-29
        "2026-03-31 00:30",
    ]
    assert fires("*/5 * * * *", "Europe/Berlin", "2026-03-29 00:50", 3) == [
        "2026-03-29 00:55",  # 01:55 CET
        "2026-03-29 01:00",  # 03:00 CEST
        "2026-03-29 01:05",
    ]


# -- fall back: a repeated minute fires once, at its first instant ------------------------


def test_new_york_fall_back_fires_once() -> None:
    assert fires("30 1 * * *", "America/New_York", "2026-10-31 04:00", 3) == [
        "2026-10-31 05:30",
        "2026-11-01 05:30",  # 01:30 EDT; not again at 06:30 (01:30 EST)
        "2026-11-02 06:30",
    ]
    assert fires("*/5 * * * *", "America/New_York", "2026-11-01 05:45", 4) == [
        "2026-11-01 05:50",
        "2026-11-01 05:55",  # 01:55 EDT
        "2026-11-01 07:00",  # 02:00 EST: the repeated 01:00-01:55 EST do not fire
        "2026-11-01 07:05",
    ]
    assert fires("0 * * * *", "America/New_York", "2026-11-01 04:30", 3) == [
        "2026-11-01 05:00",
        "2026-11-01 07:00",
        "2026-11-01 08:00",
    ]


def test_berlin_fall_back_fires_once() -> None:
    assert fires("30 2 * * *", "Europe/Berlin", "2026-10-23 12:00", 3) == [
        "2026-10-24 00:30",
        "2026-10-25 00:30",  # 02:30 CEST; not again at 01:30Z (02:30 CET)
        "2026-10-26 01:30",
    ]
    assert fires("*/5 * * * *", "Europe/Berlin", "2026-10-25 00:50", 3) == [
        "2026-10-25 00:55",  # 02:55 CEST
        "2026-10-25 02:00",  # 03:00 CET
        "2026-10-25 02:05",
    ]
    assert fires("* * * * *", "Europe/Berlin", "2026-10-25 00:58", 3) == [
        "2026-10-25 00:59",
        "2026-10-25 02:00",
        "2026-10-25 02:01",
    ]


def test_restart_inside_the_repeated_hour_does_not_refire() -> None:
    # 06:10Z is 01:10 EST, the second 01:10 of 2026-11-01 in New York.
    assert fires("30 1 * * *", "America/New_York", "2026-11-01 06:10", 1) == ["2026-11-02 06:30"]
    # 01:15 .. 01:55 already fired during the first (EDT) hour.
    assert fires("*/5 * * * *", "America/New_York", "2026-11-01 06:10", 2) == [
        "2026-11-01 07:00",
        "2026-11-01 07:05",
    ]
    assert fires("30 2 * * *", "Europe/Berlin", "2026-10-25 01:10", 1) == ["2026-10-26 01:30"]


# -- Lord Howe: 30-minute shift -------------------------------------------------------------


def test_lord_howe_spring_forward() -> None:
    assert fires("*/15 * * * *", "Australia/Lord_Howe", "2026-10-03 14:50", 5) == [
        "2026-10-03 15:00",
        "2026-10-03 15:15",
        "2026-10-03 15:30",  # 02:30 LHDT exists and fires
        "2026-10-03 15:45",
        "2026-10-03 16:00",
    ]
    assert fires("30 2 * * *", "Australia/Lord_Howe", "2026-10-02 12:00", 3) == [
        "2026-10-02 16:00",
        "2026-10-03 15:30",
        "2026-10-04 15:30",
    ]
    assert fires("15 2 * * *", "Australia/Lord_Howe", "2026-10-02 12:00", 2) == [
        "2026-10-02 15:45",
        "2026-10-04 15:15",  # 02:15 on 10-04 local does not exist
    ]
    assert fires("55 * * * *", "Australia/Lord_Howe", "2027-10-02 12:59", 5) == [
        "2027-10-02 13:25",
        "2027-10-02 14:25",
        "2027-10-02 15:25",
        "2027-10-02 15:55",  # 02:55 LHDT: not lost
        "2027-10-02 16:55",
    ]


def test_lord_howe_fall_back() -> None:
    assert fires("45 1 * * *", "Australia/Lord_Howe", "2026-04-03 12:00", 3) == [
        "2026-04-03 14:45",
        "2026-04-04 14:45",  # 01:45 LHDT once; not again at 15:15Z
        "2026-04-05 15:15",
    ]
    assert fires("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04 13:50", 6) == [
        "2026-04-04 14:00",
        "2026-04-04 14:15",
        "2026-04-04 14:30",
        "2026-04-04 14:45",
        "2026-04-04 15:30",  # 02:00 LHST; 01:30-01:45 LHST repeat and do not fire
        "2026-04-04 15:45",
    ]
    assert fires("0 2 * * *", "Australia/Lord_Howe", "2026-04-03 12:00", 3) == [
        "2026-04-03 15:00",
        "2026-04-04 15:30",
        "2026-04-05 15:30",
    ]


def test_apia_skipped_day_is_skipped() -> None:
    # Pacific/Apia went from 2011-12-29 23:59 (-10) straight to 2011-12-31 00:00 (+14).
    assert fires("0 12 * * *", "Pacific/Apia", "2011-12-29 00:00", 2) == [
        "2011-12-29 22:00",  # 12:00 on 12-29 (-10)
        "2011-12-30 22:00",  # 12:00 on 12-31 (+14); 12-30 never existed
    ]


# -- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "needle"),
    [
        ("0 0 30 2 *", "day-of-month 30 never occurs in February"),
        ("0 0 31 4,6,9,11 *", "never occurs in April, June, September or November"),
        ("0 0 30-31 2 */2", "can never fire"),
        ("", "empty"),
        ("   ", "empty"),
        ("* * * *", "has 4 fields"),
        ("0 0 * * * *", "has 6 fields"),
        ("0 0 0 * * * 2026", "has 7 fields"),
        ("60 * * * *", "minute 60 is out of range 0-59"),
        ("* 24 * * *", "hour 24"),
        ("0 0 0 * *", "day-of-month 0"),
        ("0 0 * 13 *", "month 13"),
        ("0 0 * * 8", "day-of-week 8"),
        ("5-3 * * * *", "reversed"),
        ("*/0 * * * *", "at least 1"),
        ("1,,2 * * * *", "empty list item"),
        ("mon * * * *", "minute 'mon' is not a number"),
        ("0 0 * JULY *", "month 'JULY'"),
        ("0 0 L * *", "not supported"),
        ("0 0 LW * *", "not supported"),
        ("0 0 15W * *", "not supported"),
        ("0 0 * * 5L", "not supported"),
        ("0 0 * * 5#3", "not supported"),
        ("0 0 ? * *", "not supported"),
        ("H * * * *", "not supported"),
        ("@daily", "descriptors"),
        ("-1 * * * *", "not valid"),
        ("\uff15 * * * *", "not"),  # a non-ASCII digit
        ("1" * 2000, "too long"),
    ],
)
def test_bad_expressions_are_rejected(expression: str, needle: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_schedule(expression)
    assert caught.value.field == "cron_expression"
    assert needle in caught.value.message
    assert caught.value.message.startswith("cron_expression")


def test_never_firing_message_names_the_expression() -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_schedule("0 0 30 2 *")
    assert caught.value.message == (
        "cron_expression '0 0 30 2 *' can never fire: day-of-month 30 never occurs in February"
    )


@pytest.mark.parametrize(
    "zone",
    ["Mars/Olympus", "america/new_york ", "../etc/passwd", "/tmp", "localtime", "posixrules"],
)
def test_unknown_zone_is_rejected(zone: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_schedule("0 0 * * *", zone)
    assert caught.value.field == "timezone"
    assert "not a known IANA time zone" in caught.value.message


def test_expression_and_zone_are_normalised() -> None:
    schedule = parse_schedule("  30\t2  *  * *\n", " Europe/Berlin ")
    assert schedule.expression == "30 2 * * *"
    assert schedule.timezone == "Europe/Berlin"
    assert schedule == CronSchedule("30 2 * * *", "Europe/Berlin")
    assert hash(schedule) == hash(CronSchedule("30 2 * * *", "Europe/Berlin"))
    assert parse_schedule("0 0 * * *").timezone == ""


def test_utc_spellings_agree() -> None:
    after = z("2026-06-01 10:17")
    expected = z("2026-06-01 10:20")
    assert next_fire("*/5 * * * *", "", after) == expected
    assert next_fire("*/5 * * * *", "UTC", after) == expected
    assert next_fire("*/5 * * * *", "Etc/UTC", after) == expected


def test_odd_offsets() -> None:
    # Kathmandu is +05:45 all year; Chatham +13:45 in January.
    assert fires("0 9 * * *", "Asia/Kathmandu", "2026-01-01 00:00", 1) == ["2026-01-01 03:15"]
    assert fires("0 9 * * *", "Pacific/Chatham", "2026-01-01 00:00", 1) == ["2026-01-01 19:15"]


# -- fires_between --------------------------------------------------------------------------


def test_fires_between_keeps_the_newest_cap_ticks() -> None:
    schedule = parse_schedule("*/5 * * * *")
    missed = schedule.fires_between(z("2026-03-01 00:00"), z("2026-03-01 03:00"), cap=25)
    # 36 ticks: 00:05 .. 03:00 (the window is (after, until]).
    assert missed.fire == tuple(z("2026-03-01 01:00") + timedelta(minutes=5 * i) for i in range(25))
    assert missed.fire[-1] == z("2026-03-01 03:00")
    assert missed.dropped == 11
    assert missed.dropped_exact
    assert missed.oldest_dropped == z("2026-03-01 00:05")


def test_fires_between_cap_larger_than_the_count() -> None:
    schedule = parse_schedule("*/5 * * * *")
    missed = schedule.fires_between(z("2026-03-01 00:00"), z("2026-03-01 03:00"), cap=100)
    assert len(missed.fire) == 36
    assert missed.fire[0] == z("2026-03-01 00:05")
    assert missed == MissedTicks(
        fire=missed.fire, dropped=0, dropped_exact=True, oldest_dropped=None
    )
    exactly = schedule.fires_between(z("2026-03-01 00:00"), z("2026-03-01 03:00"), cap=36)
    assert exactly.fire == missed.fire
    assert exactly.dropped == 0


def test_fires_between_cap_zero_counts_everything() -> None:
    schedule = parse_schedule("*/5 * * * *")
    missed = schedule.fires_between(z("2026-03-01 00:00"), z("2026-03-01 03:00"), cap=0)
    assert missed == MissedTicks(
        fire=(), dropped=36, dropped_exact=True, oldest_dropped=z("2026-03-01 00:05")
    )


def test_fires_between_with_no_ticks() -> None:
    empty = MissedTicks(fire=(), dropped=0, dropped_exact=True, oldest_dropped=None)
    yearly = parse_schedule("0 0 1 1 *")
    assert yearly.fires_between(z("2026-03-01 00:00"), z("2026-06-01 00:00"), cap=25) == empty
    every = parse_schedule("*/5 * * * *")
    assert every.fires_between(z("2026-03-01 00:00"), z("2026-03-01 00:04"), cap=25) == empty
    assert every.fires_between(z("2026-03-01 00:10"), z("2026-03-01 00:00"), cap=25) == empty
    assert every.fires_between(z("2026-03-01 00:05"), z("2026-03-01 00:05"), cap=25) == empty


def test_fires_between_boundaries() -> None:
    every = parse_schedule("*/5 * * * *")
    # ``after`` is exclusive, ``until`` inclusive.
    missed = every.fires_between(z("2026-03-01 00:05"), z("2026-03-01 00:10"), cap=25)
    assert missed.fire == (z("2026-03-01 00:10"),)


def test_fires_between_across_fall_back() -> None:
    every = parse_schedule("*/5 * * * *", "America/New_York")
    # 05:05 .. 05:55 (EDT) and 07:00 .. 08:00 (EST): 11 + 13 ticks, none in 06:00-06:55.
    missed = every.fires_between(z("2026-11-01 05:00"), z("2026-11-01 08:00"), cap=5)
    assert missed.fire == tuple(z("2026-11-01 07:40") + timedelta(minutes=5 * i) for i in range(5))
    assert missed.dropped == 19
    assert missed.oldest_dropped == z("2026-11-01 05:05")
    # ``until`` inside the repeated hour (01:30 EST): the first 01:35 .. 01:55 are behind it.
    inside = every.fires_between(z("2026-11-01 05:00"), z("2026-11-01 06:30"), cap=3)
    assert inside.fire == (z("2026-11-01 05:45"), z("2026-11-01 05:50"), z("2026-11-01 05:55"))
    assert inside.dropped == 8


def test_fires_between_across_spring_forward() -> None:
    daily = parse_schedule("30 2 * * *", "America/New_York")
    missed = daily.fires_between(z("2026-03-01 00:00"), z("2026-03-15 00:00"), cap=3)
    assert missed.fire == (z("2026-03-12 06:30"), z("2026-03-13 06:30"), z("2026-03-14 06:30"))
    # 03-01 .. 03-11 without 03-08: 10 older ticks.
    assert missed.dropped == 10
    assert missed.oldest_dropped == z("2026-03-01 07:30")


def test_fires_between_a_year_of_every_minute_is_bounded() -> None:
    every = parse_schedule("* * * * *", "Europe/Berlin")
    started = timer.perf_counter()
    missed = every.fires_between(z("2025-03-01 00:00"), z("2026-03-01 00:00"), cap=25)
    # A guard against materialising 525,600 fires (much slower), not a speed claim.
    assert timer.perf_counter() - started < 10.0
    assert missed.fire[-1] == z("2026-03-01 00:00")
    assert missed.fire[0] == z("2026-02-28 23:36")
    assert not missed.dropped_exact
    assert missed.dropped >= MISSED_COUNT_LIMIT
    assert missed.oldest_dropped == z("2025-03-01 00:01")


def test_fires_between_a_month_of_every_minute_is_exact() -> None:
    every = parse_schedule("* * * * *", "America/New_York")
    missed = every.fires_between(z("2026-10-15 00:00"), z("2026-11-15 00:00"), cap=25)
    # 31 days of minutes, minus the 60 repeated minutes of 2026-11-01 (they fire once).
    assert missed.dropped + len(missed.fire) == 31 * 1440 - 60
    assert missed.dropped_exact


def test_fires_between_rejects_bad_arguments() -> None:
    every = parse_schedule("* * * * *")
    with pytest.raises(ValueError, match="aware"):
        every.fires_between(datetime(2026, 1, 1), z("2026-01-02 00:00"), cap=1)
    with pytest.raises(ValueError, match="cap"):
        every.fires_between(z("2026-01-01 00:00"), z("2026-01-02 00:00"), cap=-1)
