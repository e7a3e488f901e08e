"""``office cron``: inspect cron expressions offline (no database, no server)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import click

from office_scheduler.cli.state import emit, json_option
from office_scheduler.cron import parse_schedule
from office_scheduler.domain.errors import InvalidInputError

MAX_COUNT = 1000


def _iso_utc(instant: datetime) -> str:
    """``2026-03-09T06:30:00Z`` for an aware instant."""
    return instant.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _parse_after(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(
            f"--after {text!r} is not an ISO-8601 date-time (e.g. 2026-03-08T05:00:00Z)",
            field="after",
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@click.group("cron")
def cron_group() -> None:
    """Cron expression tools (work offline: no database or server needed)."""


@cron_group.command("next")
@click.argument("expression", nargs=-1, required=True)
@click.option(
    "--tz",
    "timezone",
    default="",
    metavar="ZONE",
    help="IANA time zone the expression is evaluated in [default: UTC].",
)
@click.option(
    "--after",
    metavar="ISO-8601",
    help="List fires strictly after this instant (Z or an offset; no offset means UTC)"
    " [default: now].",
)
@click.option(
    "--count",
    type=click.IntRange(1, MAX_COUNT),
    default=5,
    show_default=True,
    help=f"How many fire times to print (1-{MAX_COUNT}).",
)
@click.option(
    "--local",
    is_flag=True,
    help="Also print each fire in the zone's wall clock: after the UTC time, a space, the"
    " local ISO-8601 time with its offset, a space and the zone abbreviation.",
)
@json_option
def next_command(
    expression: tuple[str, ...], timezone: str, after: str | None, count: int, local: bool
) -> None:
    """Print the next fire times of the five-field cron EXPRESSION, one per line.

    Times are ISO-8601 UTC with Z, e.g. 2026-03-09T06:30:00Z. The fields are matched in the
    wall clock of --tz; a wall-clock minute skipped by a DST change does not fire, and one
    repeated by a DST change fires once (its first occurrence). Day-of-month and day-of-week
    are ORed when both are restricted, as in crontab(5). Quote the expression (or pass its
    five fields as separate arguments). With --json it prints one object with the
    expression, the zone and each fire in UTC and local time:

    \b
        office cron next '30 2 * * *' --tz America/New_York --local
        2026-03-09T06:30:00Z 2026-03-09T02:30:00-04:00 EDT
    """  # noqa: D301 - click's \b (no-rewrap) marker must be a real backspace
    schedule = parse_schedule(" ".join(expression), timezone)
    cursor = _parse_after(after)
    fires: list[datetime] = []
    for _ in range(count):
        cursor = schedule.next_fire(cursor)
        fires.append(cursor)
    zone = ZoneInfo(schedule.timezone) if schedule.timezone else UTC
    rows = [
        {
            "utc": _iso_utc(fire),
            "local": fire.astimezone(zone).isoformat(timespec="seconds"),
            "zone_abbreviation": fire.astimezone(zone).tzname(),
        }
        for fire in fires
    ]

    def render() -> None:
        for row in rows:
            line = row["utc"]
            if local:
                line = f"{line} {row['local']} {row['zone_abbreviation']}"
            click.echo(line)

    emit(
        {"expression": schedule.expression, "timezone": schedule.timezone or "UTC", "fires": rows},
        render,
    )
