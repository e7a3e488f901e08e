"""``office activity list``: the workspace's activity log, filtered."""

from __future__ import annotations

from datetime import datetime

import click

from office_scheduler.cli.agents import resolve_agent
from office_scheduler.cli.client import api, api_path, with_agent_names, workspace_id
from office_scheduler.cli.state import RECORD_ID, CliError, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION

ACTIVITY_COLUMNS = [
    ("at", "at"),
    ("action", "kind"),
    ("actor", "actor"),
    ("agent", "agent_id"),
    ("task", "task_id"),
    ("run", "run_id"),
    ("message", "message"),
]


def _instant(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise CliError(
            f"{name} must be an ISO-8601 instant, e.g. 2026-11-29T12:00:00Z", 2
        ) from None
    return value


@click.group("activity")
def activity_group() -> None:
    """The activity log."""


@activity_group.command("list")
@WORKSPACE_OPTION
@click.option("--actor", help="`system`, `user` or `agent:<id>`.")
@click.option("--action", help="The kind of entry, e.g. run_skipped.")
@click.option("--agent", "agent", help="Entries about this agent (id or name).")
@click.option("--task", "task_id", help="Entries about this task id.")
@click.option("--run", "run_id", type=RECORD_ID, help="Entries about this run id.")
@click.option("--since", help="Entries at or after this ISO-8601 instant (UTC if no zone).")
@click.option("--until", help="Entries before this ISO-8601 instant (UTC if no zone).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def activity_list(
    workspace: str | None,
    actor: str | None,
    action: str | None,
    agent: str | None,
    task_id: str | None,
    run_id: int | None,
    since: str | None,
    until: str | None,
    limit: int,
) -> None:
    """List activity entries, newest first."""
    since, until = _instant("--since", since), _instant("--until", until)
    with api() as client:
        space = workspace_id(client, workspace)
        agent_id = None if agent is None else resolve_agent(client, agent, space)
        entries = client.collect(
            api_path("workspaces", space, "activity"),
            limit=limit,
            actor=actor,
            kind=action,
            agent_id=agent_id,
            task_id=task_id,
            run_id=run_id,
            since=since,
            until=until,
        )
        shown = with_agent_names(client, entries, ["actor", "agent_id"], workspace=space)
    emit(entries, lambda: click.echo(table(shown, ACTIVITY_COLUMNS)))
