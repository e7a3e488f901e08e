"""Property tests: ``office_scheduler.cron`` against a brute-force minute-walking oracle.

The oracle shares no code with the module under test: expressions are generated together with
the value sets they denote, the oracle walks UTC minutes, converts each to the zone's wall
clock with ``zoneinfo``, matches the sets with the crontab(5) day rule, fires a wall minute
only the first time the wall clock shows it (a wall minute later than every wall minute seen
so far) and never sees minutes that do not exist. Start instants cluster around the real
transitions of zones with unusual rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from office_scheduler.cron import parse_schedule

ZONES = (
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kathmandu",
    "America/Santiago",
    "Pacific/Apia",
    "UTC",
)
YEARS = range(2010, 2031)
MINUTE = timedelta(minutes=1)
#: The oracle starts walking this long before ``after`` so it knows which wall minutes the
#: clock has already shown (a fall-back repeats at most a few hours).
LOOKBEHIND = timedelta(hours=26)
#: How far after ``after`` the oracle looks for fires.
WINDOW = timedelta(days=3)

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True)
class Spec:
    """A generated expression and the sets it denotes (computed here, independently)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_or: bool

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minutes or wall.hour not in self.hours:
            return False
        if wall.month not in self.months:
            return False
        dom = wall.day in self.days
        dow = (wall.weekday() + 1) % 7 in self.weekdays
        return (dom or dow) if self.day_or else (dom and dow)


# -- transitions, found once by scanning ---------------------------------------------------


@cache
def transitions(zone_name: str) -> tuple[datetime, ...]:
    """Instants (UTC, to the minute) where the zone's offset changes in :data:`YEARS`."""
    zone = ZoneInfo(zone_name)
    found: list[datetime] = []
    step = timedelta(hours=6)
    t = datetime(YEARS[0], 1, 1, tzinfo=UTC)
    end = datetime(YEARS[-1] + 1, 1, 1, tzinfo=UTC)
    offset = t.astimezone(zone).utcoffset()
    while t < end:
        nxt = t + step
        new = nxt.astimezone(zone).utcoffset()
        if new != offset:
            lo, hi = t, nxt  # offset(lo) == old, offset(hi) == new
            while hi - lo > MINUTE:
                mid = lo + (hi - lo) / 2
                mid = mid.replace(second=0, microsecond=0)
                if mid <= lo:
                    mid = lo + MINUTE
                if mid.astimezone(zone).utcoffset() == offset:
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
            offset = new
        t = nxt
    return tuple(found)


# -- expression strategies -----------------------------------------------------------------


def _term(
    draw: st.DrawFn, low: int, high: int, names: tuple[str, ...], name_base: int
) -> tuple[str, set[int]]:
    """One comma term and its value set (names[i] stands for name_base + i)."""

    def show(value: int) -> str:
        index = value - name_base
        if names and 0 <= index < len(names) and draw(st.booleans()):
            name = names[index]
            return draw(st.sampled_from([name, name.upper(), name.capitalize()]))
        return str(value)

    full = list(range(low, high + 1))
    kind = draw(st.sampled_from(["star", "step", "one", "range", "range_step", "value_step"]))
    a = draw(st.integers(low, high))
    b = draw(st.integers(a, high))
    step = draw(st.integers(1, high - low + 2))
    if kind == "star":
        return "*", set(full)
    if kind == "step":
        return f"*/{step}", set(full[::step])
    if kind == "one":
        return show(a), {a}
    if kind == "range":
        return f"{show(a)}-{show(b)}", set(range(a, b + 1))
    if kind == "range_step":
        if a == b:  # a one-value range with a step is that value (crontab(5))
            return f"{show(a)}-{show(b)}/{step}", {a}
        return f"{show(a)}-{show(b)}/{step}", set(range(a, b + 1)[::step])
    return f"{show(a)}/{step}", set(range(a, high + 1)[::step])


@st.composite
def field(
    draw: st.DrawFn,
    low: int,
    high: int,
    names: tuple[str, ...] = (),
    name_base: int = 0,
    star_bias: bool = False,
) -> tuple[str, set[int]]:
    if star_bias and draw(st.integers(0, 9)) < 6:
        return "*", set(range(low, high + 1))
    count = draw(st.integers(1, 3))
    texts: list[str] = []
    values: set[int] = set()
    for _ in range(count):
        text, term_values = _term(draw, low, high, names, name_base)
        texts.append(text)
        values |= term_values
    return ",".join(texts), values


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    minute = draw(field(0, 59))
    hour = draw(field(0, 23, star_bias=True))
    dom = draw(field(1, 31, star_bias=True))
    month = draw(field(1, 12, MONTHS, 1, star_bias=True))
    dow = draw(field(0, 7, DAYS, 0, star_bias=True))
    return Spec(
        text=" ".join(part[0] for part in (minute, hour, dom, month, dow)),
        minutes=frozenset(minute[1]),
        hours=frozenset(hour[1]),
        days=frozenset(dom[1]),
        months=frozenset(month[1]),
        weekdays=frozenset(d % 7 for d in dow[1]),
        day_or=not dom[0].startswith("*") and not dow[0].startswith("*"),
    )


def can_fire(spec: Spec) -> bool:
    """False for expressions the module rejects as never firing (AND with impossible days)."""
    if spec.day_or:
        return True
    longest = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30}
    return any(min(spec.days) <= longest.get(m, 31) for m in spec.months)


@st.composite
def instants(draw: st.DrawFn, zone: str) -> datetime:
    """Mostly within two days of a real transition of ``zone``; seconds sometimes."""
    points = transitions(zone)
    if points and draw(st.integers(0, 9)) < 8:
        base = draw(st.sampled_from(points))
        offset = draw(st.integers(-2 * 86400, 2 * 86400))
        moment = base + timedelta(seconds=offset)
    else:
        day = draw(st.integers(0, 365 * 20))
        minute = draw(st.integers(0, 1439))
        moment = datetime(2010, 6, 1, tzinfo=UTC) + timedelta(days=day, minutes=minute)
    if draw(st.booleans()):
        moment = moment.replace(second=0, microsecond=0)
    return moment


# -- the oracle ----------------------------------------------------------------------------


def oracle(spec: Spec, zone_name: str, after: datetime, until: datetime) -> list[datetime]:
    """Every tick in ``(after, until]`` by walking UTC minutes."""
    zone = ZoneInfo(zone_name)
    t = (after - LOOKBEHIND).replace(second=0, microsecond=0)
    highest: datetime | None = None
    found: list[datetime] = []
    while t <= until:
        wall = t.astimezone(zone).replace(tzinfo=None)
        first_time = highest is None or wall > highest
        if first_time:
            highest = wall
        if first_time and t > after and spec.matches(wall):
            found.append(t)
        t += MINUTE
    return found


case = st.sampled_from(ZONES).flatmap(lambda zone: st.tuples(st.just(zone), instants(zone)))

FAST = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FAST
@given(spec=specs(), zone_and_after=case)
def test_next_fire_matches_the_oracle(spec: Spec, zone_and_after: tuple[str, datetime]) -> None:
    zone, after = zone_and_after
    if not can_fire(spec):
        return
    schedule = parse_schedule(spec.text, zone)
    expected = oracle(spec, zone, after, after + WINDOW)[:3]
    got: list[datetime] = []
    cursor = after
    for _ in range(len(expected) + 1):
        cursor = schedule.next_fire(cursor)
        got.append(cursor)
    assert got[: len(expected)] == expected, spec.text
    # Past the oracle's window nothing was missed.
    if len(expected) < 3:
        assert got[len(expected)] > after + WINDOW, spec.text
    for instant in got:
        assert instant.tzinfo is UTC
        assert instant > after
        assert instant.second == 0
        assert instant.microsecond == 0
        assert spec.matches(instant.astimezone(ZoneInfo(zone)).replace(tzinfo=None))
    assert got == sorted(set(got))


@FAST
@given(
    spec=specs(),
    zone_and_after=case,
    length=st.integers(0, 3 * 24 * 60),
    cap=st.integers(0, 30),
)
def test_fires_between_matches_the_oracle(
    spec: Spec, zone_and_after: tuple[str, datetime], length: int, cap: int
) -> None:
    zone, after = zone_and_after
    if not can_fire(spec):
        return
    until = after + timedelta(minutes=length, seconds=length % 7)
    schedule = parse_schedule(spec.text, zone)
    ticks = oracle(spec, zone, after, until)
    missed = schedule.fires_between(after, until, cap=cap)
    kept = ticks[max(0, len(ticks) - cap) :] if cap else []
    assert list(missed.fire) == kept, spec.text
    assert missed.dropped == len(ticks) - len(kept)
    assert missed.dropped_exact
    assert missed.oldest_dropped == (ticks[0] if missed.dropped else None)
