"""``office cron next``: fire times offline, exit 2 with one stderr line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli_harness import CLEAN_ENV
from office_scheduler.cli import office


def run(tmp_path: Path, *args: str) -> Result:
    home = tmp_path / "home"
    result = CliRunner().invoke(
        office, ["cron", "next", *args], env={**CLEAN_ENV, "OFFICE_HOME": str(home)}
    )
    assert not home.exists(), "office cron next must not touch the data directory"
    return result


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("office: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_acceptance_spring_forward_slot_is_skipped(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-08T05:00:00Z",
        "--count",
        "2",
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == "2026-03-09T06:30:00Z\n2026-03-10T06:30:00Z\n"
    assert result.stderr == ""


def test_local_shows_the_wall_clock(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-10-31T00:00:00-04:00",
        "--count",
        "3",
        "--local",
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "2026-10-31T05:30:00Z 2026-10-31T01:30:00-04:00 EDT",
        "2026-11-01T05:30:00Z 2026-11-01T01:30:00-04:00 EDT",
        "2026-11-02T06:30:00Z 2026-11-02T01:30:00-05:00 EST",
    ]


def test_defaults_utc_five_fires_after_now(tmp_path: Path) -> None:
    before = datetime.now(UTC)

    result = run(tmp_path, "*/5 * * * *", "--local")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 5
    fires = [datetime.fromisoformat(line.split()[0]) for line in lines]
    assert fires == sorted(fires)
    assert fires[0] > before
    assert all(line.endswith("+00:00 UTC") for line in lines)


def test_fields_as_separate_arguments_and_naive_after_is_utc(tmp_path: Path) -> None:
    result = run(tmp_path, "0", "12", "*", "*", "mon", "--after", "2026-01-01T00:00", "-h")
    assert result.exit_code == 0
    assert "Usage: office cron next" in result.stdout

    result = run(tmp_path, "0", "12", "*", "*", "mon", "--after", "2026-01-01T00:00")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == ["2026-01-05T12:00:00Z", "2026-01-12T12:00:00Z"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["0 0 30 2 *"], "cron_expression '0 0 30 2 *' can never fire"),
        (["0 0 * * * *"], "has 6 fields"),
        (["0 0 L * *"], "not supported"),
        (["@daily"], "descriptors"),
        (["61 * * * *"], "minute 61 is out of range"),
        (["0 0 * * *", "--tz", "Mars/Olympus"], "timezone 'Mars/Olympus' is not a known"),
        (["0 0 * * *", "--after", "yesterday"], "--after 'yesterday' is not an ISO-8601"),
        (["0 0 * * *", "--count", "0"], "--count"),
        (["0 0 * * *", "--count", "1001"], "--count"),
        ([], "EXPRESSION"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    line = one_line_error(run(tmp_path, *args))

    assert needle in line


def test_runs_as_a_process_without_database_or_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {
        "PATH": "/usr/bin:/bin",
        "OFFICE_HOME": str(home),
        "OFFICE_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none",
        "OFFICE_API_URL": "http://127.0.0.1:1",
    }
    command = [sys.executable, "-m", "office_scheduler", "cron", "next"]
    options = ["--tz", "Europe/Berlin", "--after", "2026-03-27T00:00Z", "--count", "2"]
    ok = subprocess.run(
        [*command, "0 9 * * 1-5", *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    bad = subprocess.run(
        [*command, "0 0 31 4,6,9,11 *"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )

    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "2026-03-27T08:00:00Z\n2026-03-30T07:00:00Z\n"
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr == (
        "office: cron_expression '0 0 31 4,6,9,11 *' can never fire: day-of-month 31 never"
        " occurs in April, June, September or November\n"
    )
    assert not home.exists()


def test_json_output_lists_each_fire_in_utc_and_local_time(tmp_path: Path) -> None:
    """Regression: ``--json`` used to be ignored and print the text lines."""
    result = run(
        tmp_path,
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T00:00:00Z",
        "--count",
        "2",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "expression": "30 2 * * *",
        "timezone": "America/New_York",
        "fires": [
            {
                "utc": "2026-03-07T07:30:00Z",
                "local": "2026-03-07T02:30:00-05:00",
                "zone_abbreviation": "EST",
            },
            {
                "utc": "2026-03-09T06:30:00Z",
                "local": "2026-03-09T02:30:00-04:00",
                "zone_abbreviation": "EDT",
            },
        ],
    }
