"""Cron expression syntax: five fields, names, lists, ranges and steps (crontab(5)).

Pure. :func:`parse_fields` validates an expression and returns the values each field allows,
plus the numeric form handed to cronsim; :mod:`office_scheduler.cron` does the time maths.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime

from cronsim import CronSim, CronSimError

from office_scheduler.domain.errors import InvalidInputError

#: Longest accepted expression, in characters (after normalising the whitespace).
MAX_EXPRESSION_LENGTH = 1000

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_LONG = tuple(calendar.month_name)  # index 1..12
_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February may have 29

_TERM = re.compile(r"(?:(\*)|([0-9]+|[A-Za-z]+)(?:-([0-9]+|[A-Za-z]+))?)(?:/([0-9]+))?")
_EXTENSION = re.compile(r"[#?]|^L|^W$|[0-9][LW]$|^H(?:$|[(/])", re.IGNORECASE)
_EXTENSION_HINT = "non-standard cron extensions (L, W, #, ?, H) are not supported"


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low + i

    def value(self, token: str, term: str) -> int:
        if token.isdigit():
            number = int(token)
        elif self.names and token.upper() in self.names:
            number = self.low + self.names.index(token.upper())  # SUN = 0, JAN = 1
        else:
            hint = f" ({_EXTENSION_HINT})" if _EXTENSION.search(term) else ""
            kind = "a number" if not self.names else f"a number or a {self.name} name"
            raise _FieldError(f"{self.name} {term!r} is not {kind}{hint}")
        if not self.low <= number <= self.high:
            raise _FieldError(f"{self.name} {number} is out of range {self.low}-{self.high}")
        return number


_FIELDS = (
    _FieldSpec("minute", 0, 59),
    _FieldSpec("hour", 0, 23),
    _FieldSpec("day-of-month", 1, 31),
    _FieldSpec("month", 1, 12, _MONTH_NAMES),
    _FieldSpec("day-of-week", 0, 7, _DAY_NAMES),
)


class _FieldError(Exception):
    """A field failed to parse; the message names the field and the problem."""


def _parse_term(spec: _FieldSpec, term: str) -> tuple[set[int], str]:
    """One comma-separated term: its values and its canonical (numeric) text for cronsim."""
    if term == "":
        raise _FieldError(f"{spec.name} has an empty list item")
    match = _TERM.fullmatch(term)
    if match is None:
        hint = _EXTENSION_HINT if _EXTENSION.search(term) else "expected N, N-M, */S or N-M/S"
        raise _FieldError(f"{spec.name} {term!r} is not valid: {hint}")
    star, first, last, step_text = match.groups()
    step = 1
    if step_text is not None:
        step = int(step_text)
        if step < 1:
            raise _FieldError(f"{spec.name} step in {term!r} must be at least 1")
    suffix = "" if step_text is None else f"/{step}"
    if star is not None:
        return set(range(spec.low, spec.high + 1)[::step]), f"*{suffix}"
    start = spec.value(first, term)
    if last is None:
        if step_text is None:
            return {start}, str(start)
        return set(range(start, spec.high + 1)[::step]), f"{start}{suffix}"
    end = spec.value(last, term)
    if end < start:
        raise _FieldError(f"{spec.name} range {term!r} is reversed")
    if end == start:
        # cronsim reads a one-value range with a step as "start-max/step"; crontab(5) does not.
        return {start}, str(start)
    return set(range(start, end + 1)[::step]), f"{start}-{end}{suffix}"


def _parse_field(spec: _FieldSpec, text: str) -> tuple[frozenset[int], str]:
    values: set[int] = set()
    canonical: list[str] = []
    for term in text.split(","):
        term_values, term_text = _parse_term(spec, term)
        values |= term_values
        canonical.append(term_text)
    return frozenset(values), ",".join(canonical)


def _month_list(months: list[int]) -> str:
    names = [_MONTH_LONG[m] for m in months]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def invalid(message: str) -> InvalidInputError:
    """An :class:`InvalidInputError` about the ``cron_expression`` field."""
    return InvalidInputError(message, field="cron_expression")


@dataclass(frozen=True, slots=True)
class CronFields:
    """The values each field of a valid expression allows.

    Attributes:
        minutes, hours, days, months: allowed values of those fields.
        weekdays: allowed weekdays, 0 = Sunday (``7`` folded into ``0``).
        day_or: the crontab(5) day rule: day-of-month OR day-of-week (both restricted).
        cronsim_text: the expression in numeric form, for cronsim.
    """

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_or: bool
    cronsim_text: str


def parse_fields(expression: str) -> CronFields:
    """Validate a normalised five-field ``expression`` and return what its fields allow.

    Raises:
        InvalidInputError: ``field="cron_expression"``: empty, too long, a descriptor such
            as ``@daily``, not five fields, a malformed or out-of-range field, a
            non-standard extension, or an expression that can never fire.
    """
    if not expression:
        raise invalid("cron_expression is empty")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise invalid(
            f"cron_expression is too long ({len(expression)} characters;"
            f" at most {MAX_EXPRESSION_LENGTH})"
        )
    if expression.startswith("@"):
        raise invalid(
            f"cron_expression {expression!r}: descriptors such as @daily are not"
            " supported; write five fields, e.g. '0 0 * * *'"
        )
    texts = expression.split(" ")
    if len(texts) != 5:
        extra = " (seconds or year fields are not supported)" if len(texts) > 5 else ""
        raise invalid(
            f"cron_expression {expression!r} has {len(texts)} fields; expected 5:"
            f" minute hour day-of-month month day-of-week{extra}"
        )
    parsed: list[frozenset[int]] = []
    canonical: list[str] = []
    for spec, text in zip(_FIELDS, texts, strict=True):
        try:
            values, text_for_cronsim = _parse_field(spec, text)
        except _FieldError as exc:
            raise invalid(f"cron_expression {expression!r}: {exc}") from None
        parsed.append(values)
        canonical.append(text_for_cronsim)
    minutes, hours, days, months, weekdays = parsed
    # crontab(5) day rule: OR only when both day fields are restricted (no leading '*').
    day_or = not texts[2].startswith("*") and not texts[4].startswith("*")
    if not day_or:
        possible = [m for m in sorted(months) if min(days) <= _DAYS_IN_MONTH[m]]
        if not possible:
            raise invalid(
                f"cron_expression {expression!r} can never fire: day-of-month {texts[2]}"
                f" never occurs in {_month_list(sorted(months))}"
            )
    cronsim_text = " ".join(canonical)
    try:
        CronSim(cronsim_text, datetime(2000, 1, 1))
    except CronSimError as exc:  # pragma: no cover - our parser is stricter than cronsim's
        raise invalid(f"cron_expression {expression!r} is not valid: {exc}") from None
    return CronFields(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in weekdays),
        day_or=day_or,
        cronsim_text=cronsim_text,
    )
