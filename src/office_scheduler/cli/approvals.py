"""Client commands for approvals: ``office approval request|approve|reject|list|show``.

Agents request approvals with their run token (``office approval request``); people decide
with an admin token. Exit status as for every client command: 0 success, 1 a failed
operation (a second decision, a run token trying to decide), 2 bad input.
"""

from __future__ import annotations

from typing import Any

import click

from office_scheduler.cli.client import api, api_path, with_agent_names, workspace_id
from office_scheduler.cli.state import CliError, details, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.status import ApprovalStatus

STATUSES = click.Choice([status.value for status in ApprovalStatus], case_sensitive=False)
APPROVAL_COLUMNS = [
    ("id", "id"),
    ("status", "status"),
    ("kind", "kind"),
    ("title", "title"),
    ("task", "task_id"),
    ("requested by", "requested_by_agent_id"),
    ("created", "created_at"),
]
APPROVAL_FIELDS = [
    "id",
    "status",
    "kind",
    "title",
    "workspace_id",
    "task_id",
    "requested_by_agent_id",
    "created_at",
    "decided_by",
    "decision_note",
    "resolved_at",
    "body",
]


@click.group("approval")
def approval_group() -> None:
    """Request and decide approvals."""


@approval_group.command("request")
@click.option("--title", required=True, help="What needs deciding.")
@click.option("--body", default="", help="Details for the person deciding.")
@click.option("--task", "task_id", help="The task the approval is about.")
@WORKSPACE_OPTION
@json_option
def approval_request(title: str, body: str, task_id: str | None, workspace: str | None) -> None:
    """Ask a person for a decision (an agent is woken with the answer)."""
    if not title.strip():
        raise CliError("--title is empty", 2)
    with api() as client:
        if workspace is None and task_id is not None:
            workspace = client.get(api_path("tasks", task_id))["workspace_id"]
        space = workspace_id(client, workspace)
        payload: dict[str, Any] = {"title": title, "body": body, "task_id": task_id}
        approval = client.post(api_path("workspaces", space, "approvals"), payload)
    emit(approval, lambda: click.echo(f"requested approval {approval['id']}: {approval['title']}"))


def _decide(approval_id: str, verb: str, note: str | None) -> None:
    body = {} if note is None else {"decision_note": note}
    with api() as client:
        approval = client.post(api_path("approvals", approval_id, verb), body)
    emit(approval, lambda: click.echo(f"approval {approval['id']} is {approval['status']}"))


@approval_group.command("approve")
@click.argument("approval_id")
@click.option("--note", help="Decision note for the requesting agent.")
@json_option
def approval_approve(approval_id: str, note: str | None) -> None:
    """Approve a pending approval (a reviewed task moves to DONE)."""
    _decide(approval_id, "approve", note)


@approval_group.command("reject")
@click.argument("approval_id")
@click.option("--note", help="What to change (sent to the agent).")
@json_option
def approval_reject(approval_id: str, note: str | None) -> None:
    """Reject a pending approval (a reviewed task goes back to its agent)."""
    _decide(approval_id, "reject", note)


@approval_group.command("list")
@WORKSPACE_OPTION
@click.option("--status", type=STATUSES, help="Only approvals in this status.")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def approval_list(workspace: str | None, status: str | None, limit: int) -> None:
    """List approvals, newest first."""
    with api() as client:
        space = workspace_id(client, workspace)
        found = client.collect(
            api_path("workspaces", space, "approvals"),
            limit=limit,
            status=None if status is None else status.lower(),
        )
        shown = with_agent_names(client, found, ["requested_by_agent_id"], workspace=space)
    emit(found, lambda: click.echo(table(shown, APPROVAL_COLUMNS)))


@approval_group.command("show")
@click.argument("approval_id")
@json_option
def approval_show(approval_id: str) -> None:
    """Show one approval."""
    with api() as client:
        approval = client.get(api_path("approvals", approval_id))
    emit(approval, lambda: click.echo(details(approval, APPROVAL_FIELDS)))
