"""Client commands for agents, wakes, wakeup requests and runs."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from office_scheduler.cli.agents import resolve_agent
from office_scheduler.cli.client import api, api_path, with_agent_names
from office_scheduler.cli.runaway import wakeups_release
from office_scheduler.cli.state import RECORD_ID, CliError, details, emit, json_option, state, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.status import RunStatus, WakeSource, WakeupStatus

RUN_COLUMNS = [
    ("id", "id"),
    ("agent", "agent_id"),
    ("task", "task_id"),
    ("source", "source"),
    ("status", "status"),
    ("reason", "reason"),
    ("merged", "coalesced_count"),
    ("requested", "requested_at"),
]
RUN_FIELDS = [
    "id",
    "status",
    "reason",
    "error",
    "agent_id",
    "task_id",
    "workspace_id",
    "source",
    "classification",
    "coalesced_count",
    "retry_count",
    "attempt",
    "executor",
    "requested_at",
    "not_before",
    "claimed_at",
    "started_at",
    "finished_at",
    "exit_code",
    "caused_by",
    "result",
]
#: Requests ``office wakeups list`` shows without ``--limit`` (and without ``--run``).
DEFAULT_LIST_LIMIT = 50
WAKEUP_COLUMNS = [
    ("id", "id"),
    ("agent", "agent_id"),
    ("task", "task_id"),
    ("source", "source"),
    ("status", "status"),
    ("reason", "status_reason"),
    ("depth", "causation_depth"),
    ("run", "run_id"),
    ("requested", "requested_at"),
]


def _payload(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--payload is not valid JSON ({exc.msg} at column {exc.colno}); "
            'give a JSON object such as \'{"key": "value"}\'',
            2,
        ) from None
    if not isinstance(value, dict):
        raise CliError("--payload must be a JSON object", 2)
    return value


@click.command("wake")
@click.argument("agent")
@click.option("--reason", default="", help="Why the agent is woken (shown in its prompt).")
@click.option("--task", "task_id", help="The task the wake is about.")
@click.option("--payload", help="Extra JSON object for the agent's prompt.")
@click.option("--idempotency-key", help="Duplicates of a key are ignored.")
@WORKSPACE_OPTION
@json_option
def wake(
    agent: str,
    reason: str,
    task_id: str | None,
    payload: str | None,
    idempotency_key: str | None,
    workspace: str | None,
) -> None:
    """Wake AGENT: an id, a name in --workspace, or `self` (OFFICE_AGENT_ID)."""
    if agent == "self":
        agent = state().environ.get("OFFICE_AGENT_ID", "")
        if not agent:
            raise CliError("`office wake self` needs OFFICE_AGENT_ID (set for launched agents)", 2)
    body = {
        "reason": reason,
        "payload": _payload(payload),
        "task_id": task_id,
        "idempotency_key": idempotency_key,
    }
    with api() as client:
        if agent != state().environ.get("OFFICE_AGENT_ID"):
            agent = resolve_agent(client, agent, workspace)  # names too, like `agent show`
        result = client.post(api_path("agents", agent, "wake"), body)

    def render() -> None:
        request = result.get("wakeup") or {}
        outcome = result.get("outcome", "accepted")
        run = result.get("run_id") or "-"
        click.echo(f"wakeup {request.get('id', '?')}: {outcome} (run {run})")

    emit(result, render)


@click.group("runs")
def runs_group() -> None:
    """Inspect and queue runs."""


@runs_group.command("list")
@click.option("--workspace", "workspace", help="Only runs of this workspace id.")
@click.option("--agent", "agent_id", help="Only runs of this agent (id or name).")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]), help="Only this status.")
@click.option("--task", "task_id", help="Only runs of this task.")
@click.option(
    "--source", type=click.Choice([s.value for s in WakeSource]), help="Only this source."
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def runs_list(
    workspace: str | None,
    agent_id: str | None,
    status: str | None,
    task_id: str | None,
    source: str | None,
    limit: int,
) -> None:
    """List runs, newest first."""
    with api() as client:
        if agent_id is not None:
            agent_id = resolve_agent(client, agent_id, workspace)
        runs = client.collect(
            "/runs",
            limit=limit,
            workspace_id=workspace,
            agent_id=agent_id,
            status=status,
            task_id=task_id,
            source=source,
        )
        shown = with_agent_names(client, runs, ["agent_id"])
    emit(runs, lambda: click.echo(table(shown, RUN_COLUMNS)))


@runs_group.command("show")
@click.argument("run_id", type=RECORD_ID)
@click.option(
    "--wakes",
    "wakes_limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 500),
    help="Merged wakes shown per page, newest first.",
)
@click.option("--wakes-cursor", help="Show the page of merged wakes this cursor names.")
@json_option
def runs_show(run_id: int, wakes_limit: int, wakes_cursor: str | None) -> None:
    """Show one run and a page of the wakes merged into it (newest first)."""
    with api() as client:
        run = client.get(
            api_path("runs", str(run_id)), wakes_limit=wakes_limit, wakes_cursor=wakes_cursor
        )

    def render() -> None:
        click.echo(details({**run, "caused_by": caused_by(run)}, RUN_FIELDS))
        wakes = run.get("wakes") or []
        click.echo(f"\nMerged wakes ({len(wakes)} shown of {run.get('coalesced_count')}):")
        click.echo(table(wakes, WAKEUP_COLUMNS))
        cursor = run.get("wakes_next_cursor")
        if cursor:
            click.echo(
                f"More: office runs show {run_id} --wakes-cursor {cursor} "
                f"(or all of them: office wakeups list --run {run_id})"
            )

    emit(run, render)


def caused_by(record: dict[str, Any]) -> str:
    """``caused by run N, depth D`` (or who is at the root of the chain) for a run or wake."""
    depth = record.get("causation_depth", 0)
    cause = record.get("caused_by_run_id")
    if cause is not None:
        return f"caused by run {cause}, depth {depth}"
    root = "a person" if record.get("human_rooted") else "the system (routine, webhook, ...)"
    return f"{root}, depth {depth}"


@runs_group.command("queue")
@click.argument("task_id")
@click.option("--agent", "agent", help="Who runs it, id or name (default: the task's assignee).")
@json_option
def runs_queue(task_id: str, agent: str | None) -> None:
    """Queue a run for any task now (ordinary kanban tasks included)."""
    with api() as client:
        if agent is not None:
            space = client.get(api_path("tasks", task_id))["workspace_id"]
            agent = resolve_agent(client, agent, str(space))
        result = client.post("/runs", {"task_id": task_id, "agent_id": agent})
    emit(result, lambda: click.echo(f"{result.get('outcome')}: run {result.get('run_id')}"))


@click.group("wakeups")
def wakeups_group() -> None:
    """Inspect wakeup requests and release held ones."""


@wakeups_group.command("list")
@click.option("--workspace", "workspace", help="Only requests of this workspace id.")
@click.option("--agent", "agent_id", help="Only requests for this agent (id or name).")
@click.option(
    "--status", type=click.Choice([s.value for s in WakeupStatus]), help="Only this status."
)
@click.option(
    "--run", "run_id", type=RECORD_ID, help="Only the wakes that created or merged into this run."
)
@click.option(
    "--limit",
    type=click.IntRange(1, None),
    help="Most requests listed (default 50; with --run, all of the run's).",
)
@json_option
def wakeups_list(
    workspace: str | None,
    agent_id: str | None,
    status: str | None,
    run_id: int | None,
    limit: int | None,
) -> None:
    """List wakeup requests, newest first, fetched a page at a time.

    With ``--run N``: every wake merged into run N (however many it absorbed).
    """
    if limit is None:
        limit = DEFAULT_LIST_LIMIT if run_id is None else sys.maxsize
    with api() as client:
        if agent_id is not None:
            agent_id = resolve_agent(client, agent_id, workspace)
        items = client.collect(
            "/wakeups",
            limit=limit,
            workspace_id=workspace,
            agent_id=agent_id,
            status=status,
            run_id=run_id,
        )
        shown = with_agent_names(client, items, ["agent_id"])
    emit(items, lambda: click.echo(table(shown, WAKEUP_COLUMNS)))


@wakeups_group.command("show")
@click.argument("wakeup_id", type=RECORD_ID)
@json_option
def wakeups_show(wakeup_id: int) -> None:
    """Show one wakeup request."""
    with api() as client:
        item = client.get(api_path("wakeups", str(wakeup_id)))
    emit(item, lambda: click.echo(details(item, list(item))))


@click.group("workspace")
def workspace_group() -> None:
    """Inspect workspaces."""


@workspace_group.command("list")
@json_option
def workspace_list() -> None:
    """List workspaces."""
    with api() as client:
        spaces = client.collect("/workspaces", limit=1000)
    columns = [("id", "id"), ("name", "name"), ("description", "description")]
    emit(spaces, lambda: click.echo(table(spaces, columns)))


wakeups_group.add_command(wakeups_release)
