"""What every command shares: global options, the environment snapshot, errors."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from office_scheduler.config import Settings, default_home

DEFAULT_API_URL = "http://127.0.0.1:8700"
ADMIN_TOKEN_FILE = "admin_token"  # noqa: S105 - a file name, not a secret

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """A failure reported as one line on stderr with its exit status.

    Args:
        message: the reason, one line.
        exit_code: 1 for a failed operation, 2 for bad usage or bad input.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(kw_only=True)
class CliState:
    """The global options, resolved once by the ``office`` group.

    Attributes:
        home: data directory (``--home`` / ``OFFICE_HOME``).
        database_url: ``--db`` / ``OFFICE_DATABASE_URL``; ``None`` means the file in ``home``.
        api_url: where client commands send requests.
        token: bearer token given explicitly (``--token`` / ``OFFICE_TOKEN``).
        json: print JSON instead of tables.
        verbose: ``-v`` count.
        environ: snapshot of the process environment (the only read of it).
    """

    home: Path = field(default_factory=default_home)
    database_url: str | None = None
    api_url: str = DEFAULT_API_URL
    token: str | None = None
    json: bool = False
    verbose: int = 0
    environ: dict[str, str] = field(default_factory=dict)

    @property
    def admin_token_path(self) -> Path:
        """Where ``office serve`` leaves the first admin token for client commands."""
        return self.home / ADMIN_TOKEN_FILE

    def resolved_token(self) -> str | None:
        """The explicit token, else the one ``office serve`` saved in ``home``."""
        if self.token:
            return self.token
        try:
            return self.admin_token_path.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def settings(self, **overrides: Any) -> Settings:
        """Build :class:`Settings` for this process; ``overrides`` win.

        Tuning variables (see :data:`TUNING_VARIABLES`) override the defaults.

        Raises:
            CliError: a tuning variable that is not a positive number (exit status 2).
        """
        values: dict[str, Any] = {
            "home": self.home,
            "database_url": self.database_url,
            "api_url": self.api_url,
            "agent_base_env": dict(self.environ),
        }
        values.update(tuning(self.environ))
        values.update(overrides)
        return Settings(**values)


#: Environment variables that tune the scheduler: name → (Settings field, kind).
TUNING_VARIABLES: dict[str, tuple[str, str]] = {
    "OFFICE_SAFETY_TICK_S": ("safety_tick", "seconds"),
    "OFFICE_LEASE_S": ("lease", "seconds"),
    "OFFICE_SHUTDOWN_GRACE_S": ("shutdown_grace", "seconds"),
    "OFFICE_MAINTENANCE_INTERVAL_S": ("maintenance_interval", "seconds"),
    "OFFICE_LEADER_TTL_S": ("leader_ttl", "seconds"),
    "OFFICE_MAX_PARALLEL_RUNS": ("max_parallel_runs", "count"),
    "OFFICE_RETRY_BACKOFF_S": ("retry_backoff", "seconds-list"),
    "OFFICE_DB_POOL_SIZE": ("db_pool_size", "count"),
    "OFFICE_DB_STATEMENT_TIMEOUT_S": ("db_statement_timeout", "seconds"),
}


def _positive(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise CliError(f"{name} must be a positive number, not {text!r}", 2)
    return value


class RecordId(click.ParamType[int, Any]):
    """A numeric record id (runs, inbox items): a whole number of at least 1.

    Click's ``IntRange(1)`` calls a non-number "not a valid integer range"; this says what
    was expected.
    """

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """``value`` as an int; a bad one fails the command with exit code 2."""
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip()
        if text.isascii() and text.isdigit() and int(text) >= 1:
            return int(text)
        self.fail(f"{value!r} is not an id (a whole number of at least 1)", param, ctx)


RECORD_ID = RecordId()


def tuning(environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings from the tuning variables present in ``environ``.

    ``OFFICE_RETRY_BACKOFF_S`` is a comma-separated list of seconds, one per failure
    (``120,600,1800,7200`` is the default table).

    Raises:
        CliError: a value that is not a positive number (exit status 2).
    """
    values: dict[str, Any] = {}
    for name, (setting, kind) in TUNING_VARIABLES.items():
        text = environ.get(name)
        if text is None:
            continue
        if kind == "seconds":
            values[setting] = timedelta(seconds=_positive(name, text))
        elif kind == "count":
            values[setting] = max(1, int(_positive(name, text)))
        else:
            values[setting] = tuple(
                timedelta(seconds=_positive(name, part)) for part in text.split(",")
            )
    return values


def state() -> CliState:
    """The :class:`CliState` of the running command."""
    return click.get_current_context().find_object(CliState) or CliState()


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        found = ctx.find_object(CliState)
        if found is not None:
            found.json = True


def json_option(func: F) -> F:
    """Add ``--json`` to a client command (the global ``office --json`` works too)."""
    option = click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print JSON instead of a table.",
    )
    return option(func)


def _set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    found = ctx.find_object(CliState)
    if value and found is not None:
        found.database_url = value


def db_option(func: F) -> F:
    """Add ``--db URL`` to a server-side command (same as the global ``office --db``)."""
    option = click.option(
        "--db",
        "db",
        expose_value=False,
        callback=_set_db,
        help="Database URL (default: the global --db / OFFICE_DATABASE_URL).",
    )
    return option(func)


def emit(data: Any, render: Callable[[], None]) -> None:
    """Print ``data`` as JSON with ``--json``, otherwise call ``render``."""
    if state().json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        render()


def _json_text(value: object) -> str:
    """Text as is, anything else as JSON (never a Python repr)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _cell(value: object, width: int) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, list | tuple):
        text = ",".join(_json_text(item) for item in value) or "-"
    else:
        text = _json_text(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    *,
    max_width: int = 48,
    empty: str = "(none)",
) -> str:
    """Format ``rows`` as a plain aligned table.

    Args:
        rows: records to show.
        columns: ``(header, key)`` pairs; missing keys show ``-``.
        max_width: longer cells are cut with an ellipsis.
        empty: shown instead of a table when there are no rows.
    """
    if not rows:
        return empty
    cells = [[_cell(row.get(key), max_width) for _, key in columns] for row in rows]
    headers = [header for header, _ in columns]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def details(record: Mapping[str, Any], keys: Sequence[str]) -> str:
    """Format chosen fields of one record as ``key: value`` lines."""
    width = max((len(key) for key in keys), default=0)
    return "\n".join(
        f"{key.ljust(width)}  {_cell(record.get(key), 200)}" for key in keys if key in record
    )
