"""Client commands for routines and their triggers: ``office routine …``."""

from __future__ import annotations

from typing import Any

import click

from office_scheduler.cli.client import (
    agent_id,
    api,
    api_path,
    routine_ref,
    with_agent_names,
    workspace_id,
)
from office_scheduler.cli.routine_triggers import TRIGGER_COLUMNS, trigger_group, trigger_rows
from office_scheduler.cli.state import CliError, details, emit, json_option, table
from office_scheduler.cli.state import state as current_state
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.routines import (
    BUILTIN_VARIABLES,
    CONCURRENCY_ALIASES,
    CatchUpPolicy,
    ConcurrencyPolicy,
    VariableType,
)

ROUTINE_COLUMNS = [
    ("id", "id"),
    ("name", "name"),
    ("kind", "kind"),
    ("status", "status"),
    ("assignee", "assignee_agent_id"),
    ("concurrency", "concurrency_policy"),
]
ROUTINE_FIELDS = [
    "id",
    "name",
    "kind",
    "status",
    "workspace_id",
    "assignee_agent_id",
    "concurrency_policy",
    "catch_up_policy",
    "catch_up_max",
    "created_at",
    "updated_at",
    "description",
]
RUN_COLUMNS = [
    ("id", "id"),
    ("source", "source"),
    ("status", "status"),
    ("task", "linked_task_id"),
    ("run", "linked_run_id"),
    ("reason", "status_reason"),
    ("created", "created_at"),
]
CONCURRENCY = click.Choice([*(policy.value for policy in ConcurrencyPolicy), *CONCURRENCY_ALIASES])
CATCH_UP = click.Choice([policy.value for policy in CatchUpPolicy])
VARIABLE_HELP = (
    "Declare a template variable as NAME:TYPE[:DEFAULT] (TYPE text, number, boolean, or "
    "select=a|b|c; a NAME ending in ! is required). Repeatable."
)


def parse_variable(spec: str) -> dict[str, Any]:
    """The declaration of ``--variable NAME:TYPE[:DEFAULT]``.

    ``select=a|b|c`` lists a select's options; ``NAME!`` marks the variable required. The
    default is sent as text; the server converts it to the variable's type.

    Raises:
        CliError: a malformed spec (exit 2).
    """
    name, sep, rest = spec.partition(":")
    if not sep or not name.strip():
        raise CliError(f"--variable {spec!r}: expected NAME:TYPE[:DEFAULT]", 2)
    kind, _, default = rest.partition(":")
    kind, _, options = kind.partition("=")
    if kind not in {item.value for item in VariableType}:
        allowed = ", ".join(item.value for item in VariableType)
        raise CliError(f"--variable {spec!r}: TYPE must be one of: {allowed}", 2)
    declaration: dict[str, Any] = {"name": name.strip().rstrip("!"), "type": kind}
    if name.strip().endswith("!"):
        declaration["required"] = True
    if options:
        declaration["options"] = [option for option in options.split("|") if option]
    if default:
        declaration["default"] = default
    return declaration


def parse_assignment(spec: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--var``.

    Raises:
        CliError: no ``=``, an empty name, or a built-in variable (``date``,
            ``datetime``: they are the fire's own and cannot be set) (exit 2).
    """
    name, sep, value = spec.partition("=")
    if not sep or not name.strip():
        raise CliError(f"--var {spec!r}: expected NAME=VALUE", 2)
    if name.strip() in BUILTIN_VARIABLES:
        raise CliError(
            f"--var {name.strip()}: a built-in variable (the fire's own instant) cannot be set", 2
        )
    return name.strip(), value


def _template(title: str | None, description: str | None) -> dict[str, str] | None:
    if title is None and description is None:
        return None
    template = {"title": title} if title is not None else {}
    if description is not None:
        template["description"] = description
    return template


def _policies(
    concurrency: str | None, catch_up: str | None, catch_up_max: int | None
) -> dict[str, Any]:
    values = {
        "concurrency_policy": concurrency,
        "catch_up_policy": catch_up,
        "catch_up_max": catch_up_max,
    }
    return {key: value for key, value in values.items() if value is not None}


@click.group("routine")
def routine_group() -> None:
    """Create, fire and inspect routines (recurring or webhook-driven agent work)."""


@routine_group.command("list")
@WORKSPACE_OPTION
@json_option
def routine_list(workspace: str | None) -> None:
    """List a workspace's routines, oldest first."""
    with api() as client:
        space = workspace_id(client, workspace)
        routines = client.get(api_path("workspaces", space, "routines"))["items"]
        shown = with_agent_names(client, routines, ["assignee_agent_id"], workspace=space)
    emit(routines, lambda: click.echo(table(shown, ROUTINE_COLUMNS)))


@routine_group.command("show")
@click.argument("routine_id", metavar="ROUTINE")
@json_option
def routine_show(routine_id: str) -> None:
    """Show a routine with its template, variables and triggers."""
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        routine = client.get(api_path("routines", routine_id))
        triggers = client.get(api_path("routines", routine_id, "triggers"))["items"]
    if current_state().json:
        emit({**routine, "triggers": triggers}, lambda: None)
        return
    shown = {**routine, "description": routine.get("description") or "(none)"}
    click.echo(details(shown, ROUTINE_FIELDS))
    template = routine.get("task_template")
    if template:
        click.echo(f"\ntask title: {template.get('title', '')}")
        if template.get("description"):
            click.echo("task description:")
            for line in str(template["description"]).splitlines():
                click.echo(f"  {line}")
    variables = routine.get("variables") or []
    if variables:
        columns = [("variable", "name"), ("type", "type"), ("default", "default")]
        columns += [("required", "required"), ("options", "options")]
        click.echo("\n" + table(variables, columns))
    click.echo("\ntriggers:\n" + table(trigger_rows(triggers), TRIGGER_COLUMNS, max_width=60))


@routine_group.command("create")
@WORKSPACE_OPTION
@click.option("--name", required=True, help="Routine name.")
@click.option("--about", "about", help="What the routine is for (the routine's description).")
@click.option("--assignee", help="Agent id or name that does the work.")
@click.option("--cron", help="Add a schedule trigger with this five-field cron expression.")
@click.option("--tz", "--timezone", "timezone", help="IANA time zone of --cron [default: UTC].")
@click.option("--title", help="Task title template: makes a heavy routine (a task per fire).")
@click.option("--description", help="Task description template (needs --title).")
@click.option(
    "--concurrency",
    "--concurrency-policy",
    "concurrency",
    type=CONCURRENCY,
    help="What a fire does while one is active.",
)
@click.option(
    "--catch-up",
    "--catch-up-policy",
    "catch_up",
    type=CATCH_UP,
    help="What to do with missed ticks.",
)
@click.option("--catch-up-max", type=click.IntRange(1, 1000), help="Most missed ticks to fire.")
@click.option("--variable", "variables", multiple=True, help=VARIABLE_HELP)
@click.option("--paused", is_flag=True, help="Create it paused.")
@json_option
def routine_create(
    workspace: str | None,
    name: str,
    about: str | None,
    assignee: str | None,
    cron: str | None,
    timezone: str | None,
    title: str | None,
    description: str | None,
    concurrency: str | None,
    catch_up: str | None,
    catch_up_max: int | None,
    variables: tuple[str, ...],
    paused: bool,
) -> None:
    """Create a routine; --cron also adds a schedule trigger.

    Without --title the routine is lightweight: each fire wakes the assignee without a
    task. With --title each fire creates a task; {{name}} placeholders (and the built-ins
    {{date}}, {{datetime}}) are filled in.
    """
    if timezone is not None and cron is None:
        raise CliError("--tz needs --cron", 2)
    if description is not None and title is None:
        raise CliError("--description is the task description template: it needs --title", 2)
    body: dict[str, Any] = {"name": name, **_policies(concurrency, catch_up, catch_up_max)}
    if about is not None:
        body["description"] = about
    if paused:
        body["status"] = "paused"
    template = _template(title, description)
    if template is not None:
        body["task_template"] = template
    if variables:
        body["variables"] = [parse_variable(spec) for spec in variables]
    with api() as client:
        space = workspace_id(client, workspace)
        if assignee:
            body["assignee_agent_id"] = agent_id(client, space, assignee)
        routine = client.post(api_path("workspaces", space, "routines"), body)
        trigger = None
        if cron is not None:
            schedule = {"kind": "schedule", "cron_expression": cron, "timezone": timezone or ""}
            try:
                trigger = client.post(api_path("routines", routine["id"], "triggers"), schedule)
            except CliError:
                client.request("DELETE", api_path("routines", routine["id"]))
                raise

    def render() -> None:
        click.echo(f"created {routine['kind']} routine {routine['id']}: {routine['name']}")
        if trigger is not None:
            click.echo(f"schedule {trigger['cron_expression']} ({trigger['timezone'] or 'UTC'})")
            click.echo(f"next run: {trigger['next_run_at']}")

    emit({**routine, "triggers": [trigger] if trigger else []}, render)


@routine_group.command("update")
@click.argument("routine_id", metavar="ROUTINE")
@click.option("--name", help="New name.")
@click.option("--about", "about", help="New routine description.")
@click.option("--assignee", help="Agent id or name.")
@click.option("--unassign", is_flag=True, help="Remove the assignee (fires then fail).")
@click.option("--title", help="New task title template (makes the routine heavy).")
@click.option("--description", help="New task description template.")
@click.option("--lightweight", is_flag=True, help="Drop the task template (wake without a task).")
@click.option(
    "--concurrency",
    "--concurrency-policy",
    "concurrency",
    type=CONCURRENCY,
    help="What a fire does while one is active.",
)
@click.option(
    "--catch-up",
    "--catch-up-policy",
    "catch_up",
    type=CATCH_UP,
    help="What to do with missed ticks.",
)
@click.option("--catch-up-max", type=click.IntRange(1, 1000), help="Most missed ticks to fire.")
@click.option(
    "--variable", "variables", multiple=True, help=VARIABLE_HELP + " Replaces the declarations."
)
@json_option
def routine_update(
    routine_id: str,
    name: str | None,
    about: str | None,
    assignee: str | None,
    unassign: bool,
    title: str | None,
    description: str | None,
    lightweight: bool,
    concurrency: str | None,
    catch_up: str | None,
    catch_up_max: int | None,
    variables: tuple[str, ...],
) -> None:
    """Change a routine's fields, template, variables or policies."""
    if assignee and unassign:
        raise CliError("--assignee and --unassign exclude each other", 2)
    if lightweight and (title is not None or description is not None):
        raise CliError("--lightweight excludes --title and --description", 2)
    changes: dict[str, Any] = _policies(concurrency, catch_up, catch_up_max)
    if name is not None:
        changes["name"] = name
    if about is not None:
        changes["description"] = about
    if unassign:
        changes["assignee_agent_id"] = None
    if lightweight:
        changes["task_template"] = None
    if variables:
        changes["variables"] = [parse_variable(spec) for spec in variables]
    if not changes and not assignee and title is None and description is None:
        raise CliError("nothing to change: give at least one option", 2)
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        current = client.get(api_path("routines", routine_id))
        if assignee:
            changes["assignee_agent_id"] = agent_id(client, current["workspace_id"], assignee)
        if title is not None or description is not None:
            template = dict(current.get("task_template") or {})
            if title is None and not template:
                raise CliError("the routine has no task template yet: give --title", 2)
            template.update(_template(title, description) or {})
            changes["task_template"] = template
        routine = client.patch(api_path("routines", routine_id), changes)
    emit(routine, lambda: click.echo(f"updated routine {routine['id']} [{routine['status']}]"))


def _set_status(routine_id: str, status: str) -> None:
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        routine = client.patch(api_path("routines", routine_id), {"status": status})
    emit(routine, lambda: click.echo(f"routine {routine['id']} is {routine['status']}"))


@routine_group.command("pause")
@click.argument("routine_id", metavar="ROUTINE")
@json_option
def routine_pause(routine_id: str) -> None:
    """Pause a routine: none of its triggers fire until it is resumed."""
    _set_status(routine_id, "paused")


@routine_group.command("resume")
@click.argument("routine_id", metavar="ROUTINE")
@json_option
def routine_resume(routine_id: str) -> None:
    """Resume a paused routine (ticks missed while paused are not caught up)."""
    _set_status(routine_id, "active")


@routine_group.command("delete")
@click.argument("routine_id", metavar="ROUTINE")
def routine_delete(routine_id: str) -> None:
    """Delete a routine with its triggers and history (tasks it created stay)."""
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        client.request("DELETE", api_path("routines", routine_id))
    click.echo(f"deleted routine {routine_id}")


@routine_group.command("fire")
@click.argument("routine_id", metavar="ROUTINE")
@click.option("--var", "assignments", multiple=True, help="NAME=VALUE of a variable (repeatable).")
@json_option
def routine_fire(routine_id: str, assignments: tuple[str, ...]) -> None:
    """Fire a routine now; prints the routine run and the task or run it created."""
    values = dict(parse_assignment(spec) for spec in assignments)
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        run = client.post(api_path("routines", routine_id, "fire"), {"variables": values})

    def render() -> None:
        linked = ""
        if run.get("linked_task_id"):
            linked = f" (task {run['linked_task_id']})"
        elif run.get("linked_run_id"):
            linked = f" (run {run['linked_run_id']})"
        reason = f": {run['status_reason']}" if run.get("status_reason") else ""
        click.echo(f"routine run {run['id']}: {run['status']}{linked}{reason}")

    emit(run, render)


@routine_group.command("runs")
@click.argument("routine_id", metavar="ROUTINE")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@json_option
def routine_runs(routine_id: str, limit: int) -> None:
    """List a routine's runs, newest first."""
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        runs = client.get(api_path("routines", routine_id, "runs"), limit=limit)["items"]
    emit(runs, lambda: click.echo(table(runs, RUN_COLUMNS)))


routine_group.add_command(trigger_group)
