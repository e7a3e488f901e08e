"""The ``office`` command group, its global options and its exit-status contract.

Exit status: 0 success, 1 a failed operation, 2 bad usage or bad input; every failure is
reported as one line on stderr (a traceback only with ``-vv``).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from office_scheduler.cli.logs import LogFormat, configure_logging
from office_scheduler.cli.state import DEFAULT_API_URL, CliError, CliState
from office_scheduler.config import default_home
from office_scheduler.domain.errors import InvalidInputError, OfficeError

log = logging.getLogger(__name__)


_HELP_FLAGS = frozenset({"-h", "--help"})
#: ``ctx.meta`` key: the command line asks for help (logging is then left unconfigured).
HELP_META = "office.help"


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"office: {message}", err=True)
    sys.exit(code)


def _is_database_error(exc: Exception) -> bool:
    """A driver error wrapped by SQLAlchemy (checked by name: SQLAlchemy loads lazily)."""
    return type(exc).__module__ == "sqlalchemy.exc" and hasattr(exc, "orig")


def _database_failure(exc: Exception) -> tuple[str, int]:
    """One line (and exit code) for a database that cannot be used.

    A SQLite file that cannot be opened is a bad ``--db`` (2); anything else — a server
    that refuses connections, a lost connection — is a failure to retry later (1).
    """
    text = str(getattr(exc, "orig", "")).strip()
    detail = text.splitlines()[0] if text else type(exc).__name__
    if "unable to open database file" in detail:
        return f"cannot open the database ({detail}): check --db / OFFICE_DATABASE_URL", 2
    return f"database error: {detail}", 1


def _usage_line(exc: click.UsageError) -> str:
    where = exc.ctx.command_path if exc.ctx is not None else "office"
    return f"{exc.format_message()}{suggestion(exc)} (see '{where} --help')"


#: Subcommands by name, imported on first use so that client commands (which agents run
#: many times) and ``office --help`` do not pay for the server's imports.
COMMANDS = {
    "serve": "admin:serve",
    "db": "admin:db_group",
    "import": "admin:import_command",
    "export": "admin:export_command",
    "init": "init:init_command",
    "demo": "demo_command:demo",
    "task": "tasks:task_group",
    "comment": "tasks:comment_group",
    "approval": "approvals:approval_group",
    "routine": "routines:routine_group",
    "wake": "ops:wake",
    "runs": "ops:runs_group",
    "wakeups": "ops:wakeups_group",
    "agent": "agents:agent_group",
    "inbox": "inbox:inbox_group",
    "notify": "notify:notify_group",
    "activity": "activity:activity_group",
    "workspace": "ops:workspace_group",
    "cron": "cron:cron_group",
    "budget": "budgets:budget_group",
    "mcp": "mcp:mcp_command",
    "token": "tokens:token_group",
    "limits": "runaway:limits_group",
}

#: The one-line help of each subcommand, for ``office --help`` without importing them
#: (a test keeps it equal to each command's own docstring).
SHORT_HELP = {
    "serve": "Run the scheduler and the HTTP API until SIGINT/SIGTERM (then exit 0).",
    "db": "Database maintenance.",
    "import": "Create or update a workspace, its agents and projects from a config DIRECTORY.",
    "export": "Write a workspace's config to DIRECTORY (same format as `office import`).",
    "init": "Scaffold a new office config in DIRECTORY for the agent CLIs found on PATH.",
    "demo": "Run the demo office: a coordinator splits a job between two workers.",
    "task": "Create, change and inspect tasks.",
    "comment": "Post and read task comments.",
    "approval": "Request and decide approvals.",
    "routine": "Create, fire and inspect routines (recurring or webhook-driven agent work).",
    "wake": "Wake AGENT: an id, a name in --workspace, or `self` (OFFICE_AGENT_ID).",
    "runs": "Inspect and queue runs.",
    "wakeups": "Inspect wakeup requests and release held ones.",
    "limits": "Show and set the runaway limits of a workspace or of one agent.",
    "agent": "Inspect and configure agents.",
    "inbox": "List, resolve and dismiss inbox items.",
    "notify": "Outbound notification channels (webhook, slack): list, set, remove, test.",
    "activity": "The activity log.",
    "workspace": "Inspect workspaces.",
    "cron": "Cron expression tools (work offline: no database or server needed).",
    "budget": "Spending limits per workspace, project or agent, and what was spent (admin only).",
    "mcp": "Serve the agent tools over MCP on stdin/stdout (for agent CLIs).",
    "token": "Create, list and revoke API tokens.",
}

#: Other spellings of command groups: agents guess plurals and singulars alike.
ALIASES = {
    "run": "runs",
    "agents": "agent",
    "tasks": "task",
    "wakeup": "wakeups",
    "routines": "routine",
    "approvals": "approval",
    "comments": "comment",
    "budgets": "budget",
    "tokens": "token",
    "workspaces": "workspace",
    "limit": "limits",
}


def closest(name: str, choices: Sequence[str]) -> str | None:
    """The choice most like ``name`` (``None`` when none is close), for "did you mean"."""
    import difflib

    found = difflib.get_close_matches(name, sorted(set(choices)), n=1, cutoff=0.6)
    if found:
        return found[0]
    # A prefix or a word contained ("lst" is caught above; "ls" → "list").
    starts = sorted(choice for choice in set(choices) if choice.startswith(name[:2]))
    return starts[0] if len(name) >= 2 and len(starts) == 1 else None


def suggestion(exc: click.UsageError) -> str:
    """`` Did you mean 'x'?`` for an unknown command of a group, else ``""``."""
    message = exc.format_message()
    ctx = exc.ctx
    if (
        ctx is None
        or not message.startswith("No such command")
        or "Did you mean" in message
        or not isinstance(ctx.command, click.Group)
    ):
        return ""
    wanted = message.split("'")[1] if message.count("'") >= 2 else ""
    found = closest(wanted, list(ctx.command.list_commands(ctx)))
    if found is None and ctx.command is office:
        alias = closest(wanted, list(ALIASES))
        found = None if alias is None else ALIASES[alias]
    return "" if found is None else f" Did you mean {found!r}?"


class OfficeGroup(click.Group):
    """A group whose errors all end as one stderr line and the documented exit status.

    Its subcommands (:data:`COMMANDS`) are loaded lazily; :data:`ALIASES` name them too.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand name, sorted (aliases are not listed)."""
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return the subcommand ``cmd_name`` (``None`` when unknown)."""
        cmd_name = ALIASES.get(cmd_name, cmd_name)
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, attr = COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(f"office_scheduler.cli.{module}"), attr)
        if not isinstance(command, click.Command):  # pragma: no cover - a wiring mistake
            raise TypeError(f"{COMMANDS[cmd_name]} is not a click command")
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse the global options; note a help request for the whole command line."""
        ctx.meta[HELP_META] = bool(_HELP_FLAGS & set(args))
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from :data:`SHORT_HELP` (imports nothing)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            text = SHORT_HELP.get(name, "")
            if len(text) > limit:
                text = text[: max(limit - 3, 1)].rsplit(" ", 1)[0] + "..."
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exits with 0, 1 or 2 (see the module docstring)."""
        try:
            result = super().main(
                args, prog_name or "office", complete_var, standalone_mode=False, **extra
            )
        except CliError as exc:
            _fail(exc.message, exc.exit_code)
        except click.UsageError as exc:
            _fail(_usage_line(exc), 2)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except click.Abort:
            _fail("aborted", 1)
        except InvalidInputError as exc:
            _fail(exc.message.replace("\n", "\noffice: "), 2)
        except OfficeError as exc:
            _fail(exc.message, 1)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except Exception as exc:
            if _is_database_error(exc):
                _fail(*_database_failure(exc))
            log.debug("unexpected error", exc_info=True)
            _fail(f"unexpected error: {type(exc).__name__}: {exc}", 1)
        code = result if isinstance(result, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(cls=OfficeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="OFFICE_HOME",
    help="Data directory [env OFFICE_HOME; default ~/.office].",
)
@click.option("--db", "database_url", envvar="OFFICE_DATABASE_URL", help="Database URL.")
@click.option(
    "--api-url",
    envvar="OFFICE_API_URL",
    default=DEFAULT_API_URL,
    show_default=True,
    help="Server URL for client commands [env OFFICE_API_URL].",
)
@click.option("--token", envvar="OFFICE_TOKEN", help="Bearer token [env OFFICE_TOKEN].")
@click.option("--json", "as_json", is_flag=True, help="Client commands print JSON.")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.option(
    "--log-format",
    type=click.Choice(["console", "json"]),
    default="console",
    envvar="OFFICE_LOG_FORMAT",
    show_default=True,
    help="Log renderer on stderr.",
)
@click.version_option(package_name="office-scheduler", prog_name="office")
@click.pass_context
def office(
    ctx: click.Context,
    home: Path | None,
    database_url: str | None,
    api_url: str,
    token: str | None,
    as_json: bool,
    verbose: int,
    log_format: LogFormat,
) -> None:
    """Office Scheduler: wakes an office of AI coding agents and runs every wake once."""
    if not ctx.meta.get(HELP_META):
        configure_logging(verbose, log_format)
    ctx.obj = CliState(
        home=(home or default_home()).expanduser(),
        database_url=database_url or None,
        api_url=api_url,
        token=token or None,
        json=as_json,
        verbose=verbose,
        environ=dict(os.environ),
    )


def main() -> None:
    """Console entry point of ``office``."""
    office.main(prog_name="office")
