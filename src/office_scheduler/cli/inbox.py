"""``office inbox …``: what people must look at, and resolving or dismissing it."""

from __future__ import annotations

import click

from office_scheduler.cli.client import api, api_path, with_agent_names, workspace_id
from office_scheduler.cli.runaway import inbox_release
from office_scheduler.cli.state import RECORD_ID, details, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.status import InboxKind, InboxStatus

INBOX_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("status", "status"),
    ("title", "title"),
    ("agent", "agent_id"),
    ("task", "task_id"),
    ("created", "created_at"),
]


@click.group("inbox")
def inbox_group() -> None:
    """List, resolve and dismiss inbox items."""


@inbox_group.command("list")
@WORKSPACE_OPTION
@click.option("--status", type=click.Choice([s.value for s in InboxStatus]), help="Only this.")
@click.option("--kind", type=click.Choice([k.value for k in InboxKind]), help="Only this kind.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def inbox_list(workspace: str | None, status: str | None, kind: str | None, limit: int) -> None:
    """List inbox items, newest first."""
    with api() as client:
        space = workspace_id(client, workspace)
        path = api_path("workspaces", space, "inbox")
        items = client.collect(path, limit=limit, status=status, kind=kind)
        shown = with_agent_names(client, items, ["agent_id"], workspace=space)
    emit(items, lambda: click.echo(table(shown, INBOX_COLUMNS)))


def _close(action: str, item_id: int) -> None:
    with api() as client:
        item = client.post(api_path("inbox", str(item_id), action))
    emit(item, lambda: click.echo(details(item, ["id", "kind", "status", "title", "resolved_at"])))


@inbox_group.command("resolve")
@click.argument("item_id", type=RECORD_ID)
@json_option
def inbox_resolve(item_id: int) -> None:
    """Mark ITEM_ID resolved (again is fine; a dismissed item cannot be resolved)."""
    _close("resolve", item_id)


@inbox_group.command("dismiss")
@click.argument("item_id", type=RECORD_ID)
@json_option
def inbox_dismiss(item_id: int) -> None:
    """Mark ITEM_ID dismissed (again is fine; a resolved item cannot be dismissed)."""
    _close("dismiss", item_id)


inbox_group.add_command(inbox_release)
