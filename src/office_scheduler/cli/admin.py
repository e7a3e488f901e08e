"""Server-side commands: ``office serve``, ``office db upgrade``, ``office import``/``export``.

The server's modules (SQLAlchemy, the service, uvicorn) are imported inside the commands, so
that ``office serve --help`` and the like answer without loading them.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from office_scheduler.cli.state import (
    DEFAULT_API_URL,
    CliError,
    CliState,
    db_option,
    emit,
    json_option,
    state,
    table,
)
from office_scheduler.permissions import ensure_home, loose_modes

if TYPE_CHECKING:
    from office_scheduler.config import Settings
    from office_scheduler.files import ImportPlan
    from office_scheduler.store.facade import Store


def admin_token_line(secret: str, path: Path, terminal: bool) -> str:
    """What ``office serve`` prints about a new first admin token.

    The secret itself is shown only on a terminal: under a service manager stdout goes to
    a journal that others may read, so only the file's path (mode 0600) is printed there.
    """
    if terminal:
        return f"Admin token (shown once; saved to {path}): {secret}"
    return f"Admin token saved to {path} (mode 0600; stdout is not a terminal, so not shown)"


def warn_loose_modes(current: CliState) -> None:
    """Warn on stderr about a data directory or SQLite files others can read."""
    import sqlalchemy as sa

    url = sa.make_url(current.settings().resolved_database_url)
    database = Path(url.database) if url.get_backend_name() == "sqlite" and url.database else None
    for line in loose_modes(current.home, database):
        click.echo(f"office: warning: {line}: others may read its secrets; chmod it", err=True)


def _shown_url(url: str) -> str:
    import sqlalchemy as sa

    return sa.engine.make_url(url).render_as_string(hide_password=True)


@contextmanager
def open_store(current: CliState, *, upgrade: bool) -> Iterator[Store]:
    """Open the configured database; migrate it first, or insist that it is migrated.

    Raises:
        CliError: the database has not been initialised (and ``upgrade`` is false).
    """
    from office_scheduler.cli.runtime import upgrade_database
    from office_scheduler.store import migrate
    from office_scheduler.store.facade import Store

    ensure_home(current.home)
    url = current.settings().resolved_database_url
    if upgrade:
        upgrade_database(url)
    store = Store.open(url)
    try:
        if not upgrade and migrate.current_revision(store.db) != migrate.head_revision():
            raise CliError(
                f"the database at {_shown_url(url)} is not set up: run `office db upgrade`"
            )
        yield store
    finally:
        store.close()


@contextmanager
def planning_store(current: CliState) -> Iterator[Store]:
    """The store a dry run plans against, without creating or migrating anything.

    A SQLite file that does not exist yet is planned against an empty database in a
    temporary directory (what a first import would find); any other database must already
    be migrated (a dry run never upgrades it).

    Raises:
        CliError: an existing database has not been initialised.
    """
    import sqlalchemy as sa

    from office_scheduler.cli.runtime import upgrade_database
    from office_scheduler.store.facade import Store

    url = current.settings().resolved_database_url
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").exists():
        with tempfile.TemporaryDirectory(prefix="office-dry-run-") as scratch:
            empty = f"sqlite:///{Path(scratch) / 'plan.db'}"
            upgrade_database(empty)
            store = Store.open(empty)
            try:
                yield store
            finally:
                store.close()
        return
    with open_store(current, upgrade=False) as store:
        yield store


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8700, show_default=True, type=click.IntRange(0, 65535))
@click.option("--no-api", is_flag=True, help="Run only the scheduler loops.")
@click.option("--no-scheduler", is_flag=True, help="Serve only the HTTP API.")
@db_option
def serve(host: str, port: int, no_api: bool, no_scheduler: bool) -> None:
    """Run the scheduler and the HTTP API until SIGINT/SIGTERM (then exit 0).

    On PostgreSQL any number of processes may serve one database: ``--no-api`` runs only
    the scheduler loops (claims, cron, maintenance when this node leads), ``--no-scheduler``
    only the HTTP API (its wakes reach the scheduler processes by ``NOTIFY``). On SQLite
    one process runs the scheduler (see docs/deploy.md).
    """
    from office_scheduler.cli.runtime import bind, ensure_admin_token

    if no_api and no_scheduler:
        raise CliError("--no-api and --no-scheduler together leave nothing to run", 2)
    current = state()
    warn_loose_modes(current)
    with open_store(current, upgrade=True) as store:
        # The first admin token goes to a process that serves the API: its home is where
        # the operator's client commands look (a scheduler-only node may be elsewhere).
        secret = (
            None
            if no_api
            else ensure_admin_token(store, current.admin_token_path, datetime.now(UTC))
        )
    if secret is not None:
        click.echo(admin_token_line(secret, current.admin_token_path, sys.stdout.isatty()))
    sock: socket.socket | None = None
    api_url = current.api_url
    if no_api and "OFFICE_API_URL" not in current.environ and api_url == DEFAULT_API_URL:
        click.echo(
            f"office serve --no-api: agents will call the API at {api_url}; set "
            "OFFICE_API_URL to the address of a process that serves it",
            err=True,
        )
    if not no_api:
        try:
            sock, api_url = bind(host, port)
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    settings = current.settings(api_url=api_url)
    asyncio.run(_serve(settings, sock, scheduler=not no_scheduler))


async def _serve(settings: Settings, sock: socket.socket | None, *, scheduler: bool) -> None:
    from office_scheduler.cli.runtime import OfficeRuntime, install_signal_handlers
    from office_scheduler.service import Service

    stop = asyncio.Event()
    install_signal_handlers(stop)
    service = Service(settings)
    async with OfficeRuntime(service, sock=sock, scheduler=scheduler) as runtime:
        parts = [f"API at {settings.api_url}" if sock else "no API"]
        parts.append("scheduler on" if scheduler else "scheduler off")
        parts.append(f"node {settings.node_id}")
        click.echo(f"office is serving ({', '.join(parts)}); press Ctrl-C to stop")
        await runtime.wait(stop)
    click.echo("office stopped", err=True)


@click.group("db")
def db_group() -> None:
    """Database maintenance."""


@db_group.command("upgrade")
@db_option
def db_upgrade() -> None:
    """Create or migrate the database schema to the newest revision."""
    from office_scheduler.cli.runtime import upgrade_database

    current = state()
    ensure_home(current.home)
    url = current.settings().resolved_database_url
    revision = upgrade_database(url)
    click.echo(f"database {_shown_url(url)} is at revision {revision}")


PLAN_COLUMNS = [
    ("kind", "kind"),
    ("name", "name"),
    ("action", "action"),
    ("fields", "fields"),
    ("note", "note"),
]


def plan_rows(plan: ImportPlan) -> list[dict[str, object]]:
    """The plan's changes as table rows (also the ``--json`` form)."""
    return [
        {
            **asdict(change),
            "action": change.action.value,
            "fields": list(change.fields),
            "details": list(change.details),
            "warnings": list(change.warnings),
        }
        for change in plan.changes
    ]


def plan_details(plan: ImportPlan) -> str:
    """The values and warnings of each created or updated record, for the terminal.

    Every warning line starts with ``!`` so that it stands out from the values.
    """
    from office_scheduler.files import Action

    lines: list[str] = []
    for change in plan.changes:
        if not change.details and not change.warnings:
            continue
        what = "new" if change.action is Action.CREATE else "changed"
        lines.append(f"{what} {change.kind} {change.name!r}:")
        lines += [f"    {detail}" for detail in change.details]
        lines += [f"  ! {warning}" for warning in change.warnings]
    warned = sum(len(change.warnings) for change in plan.changes)
    if warned:
        lines.append(f"{warned} warning(s): read them before applying this plan.")
    return "\n".join(lines)


@click.command("import")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Apply without asking for confirmation.")
@click.option(
    "--allow-env",
    "allow_env",
    multiple=True,
    metavar="NAME",
    help="Let ${env:NAME} read this OFFICE_* variable (refused otherwise; repeatable).",
)
@click.option(
    "--reset-status",
    is_flag=True,
    help="Also apply the file's status to agents paused or stopped since the last import.",
)
@db_option
@json_option
def import_command(
    directory: Path, dry_run: bool, yes: bool, allow_env: tuple[str, ...], reset_status: bool
) -> None:
    """Create or update a workspace, its agents and projects from a config DIRECTORY.

    The plan shows every value a new record gets (executors' argv, env names, pass_env,
    project directories) and flags paths outside DIRECTORY, shells and ${env:...}
    references; read it before applying. An agent paused or stopped by the system or a
    person since the last import keeps that status (the plan's note says so) unless
    --reset-status is given.
    """
    from office_scheduler.files import load_config, plan_import, run_import

    config = load_config(directory, allow_env=allow_env)
    current = state()
    opened = planning_store(current) if dry_run else open_store(current, upgrade=True)
    with opened as store:
        plan = plan_import(store, config, reset_status=reset_status)
        rows = plan_rows(plan)
        applied = False
        workspace_id = plan.workspace_id
        webhooks: list[dict[str, object]] = []
        if not current.json:
            click.echo(f"Import plan for workspace {config.name!r}:")
            click.echo(table(rows, PLAN_COLUMNS, max_width=80))
            details = plan_details(plan)
            if details:
                click.echo(details)
        if plan.has_changes and not dry_run:
            if not yes:
                if not sys.stdin.isatty():
                    raise CliError("add --yes to apply the plan without a confirmation prompt", 2)
                click.confirm("Apply these changes?", default=True, abort=True)
            imported = run_import(store, plan, datetime.now(UTC))
            workspace_id = imported.workspace_id
            webhooks = [
                {
                    "routine": hook.routine,
                    "url_path": hook.path,
                    "signing_mode": hook.signing_mode.value,
                    "secret": hook.secret,
                }
                for hook in imported.new_webhooks
            ]
            applied = True
    result: dict[str, object] = {
        "workspace": config.name,
        "workspace_id": workspace_id,
        "changes": rows,
        "applied": applied,
        "new_webhooks": webhooks,
    }

    def render() -> None:
        if dry_run:
            click.echo("Dry run: nothing was changed.")
        elif applied:
            click.echo(f"Applied. Workspace id: {workspace_id}")
            for hook in webhooks:
                secret = f"; secret (shown once): {hook['secret']}" if hook["secret"] else ""
                click.echo(
                    f"New webhook for routine {hook['routine']!r}: POST {hook['url_path']} "
                    f"(signing {hook['signing_mode']}{secret})"
                )
        else:
            click.echo("Nothing to change.")

    emit(result, render)


@click.command("export")
@click.option("--workspace", "workspace", help="Workspace name or id (default: the only one).")
@click.argument("directory", type=click.Path(path_type=Path))
@db_option
def export_command(workspace: str | None, directory: Path) -> None:
    """Write a workspace's config to DIRECTORY (same format as `office import`)."""
    from office_scheduler.files import export_config

    with open_store(state(), upgrade=False) as store:
        spaces = store.office.list_workspaces()
        if workspace is None:
            if len(spaces) != 1:
                raise CliError("name the workspace to export with --workspace", 2)
            workspace = spaces[0].name
        found = next((w for w in spaces if workspace in (w.name, w.id)), None)
        if found is None:
            raise CliError(f"no workspace named {workspace!r}")
        written = export_config(store, found.id, directory)
    click.echo(f"exported workspace {found.name!r} to {written}")
