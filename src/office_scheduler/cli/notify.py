"""``office notify …``: outbound notification channels, their deliveries, a test send."""

from __future__ import annotations

import click

from office_scheduler.cli.client import api, api_path, workspace_id
from office_scheduler.cli.state import CliError, details, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.notifications import ChannelKind, DeliveryStatus, NotificationEvent

CHANNEL_COLUMNS = [
    ("name", "name"),
    ("kind", "kind"),
    ("host", "host"),
    ("events", "events"),
    ("enabled", "enabled"),
]
DELIVERY_COLUMNS = [
    ("id", "id"),
    ("channel", "channel"),
    ("event", "event"),
    ("status", "status"),
    ("attempts", "attempts"),
    ("next attempt", "next_attempt_at"),
    ("last error", "last_error"),
    ("created", "created_at"),
]


@click.group("notify")
def notify_group() -> None:
    """Outbound notification channels (webhook, slack): list, set, remove, test."""


@notify_group.command("list")
@WORKSPACE_OPTION
@json_option
def notify_list(workspace: str | None) -> None:
    """List the workspace's channels (the receiver's host, never its URL or secret)."""
    with api() as client:
        space = workspace_id(client, workspace)
        items = client.get(api_path("workspaces", space, "notifications"))["items"]
    rows = [{**item, "events": ",".join(item["events"]) or "(all)"} for item in items]
    emit(items, lambda: click.echo(table(rows, CHANNEL_COLUMNS)))


@notify_group.command("set")
@click.argument("name")
@WORKSPACE_OPTION
@click.option("--kind", type=click.Choice([k.value for k in ChannelKind]), default="webhook")
@click.option("--url", required=True, help="The receiver's URL (a Slack incoming webhook).")
@click.option("--secret", help="whsec_<base64> signing secret (webhook); made when left out.")
@click.option(
    "--event",
    "events",
    multiple=True,
    type=click.Choice([e.value for e in NotificationEvent]),
    help="An event to send (repeat it); none: every event.",
)
@click.option("--disabled", is_flag=True, help="Keep the channel but send nothing.")
@json_option
def notify_set(
    name: str,
    workspace: str | None,
    kind: str,
    url: str,
    secret: str | None,
    events: tuple[str, ...],
    disabled: bool,
) -> None:
    """Create or replace channel NAME; a secret made for it is printed this once."""
    body: dict[str, object] = {"kind": kind, "url": url, "events": list(events)}
    if secret is not None:
        body["secret"] = secret
    if disabled:
        body["enabled"] = False
    with api() as client:
        space = workspace_id(client, workspace)
        channel = client.request(
            "PUT", api_path("workspaces", space, "notifications", name), body=body
        )
    fields = ["name", "kind", "host", "events", "enabled"]
    if channel.get("secret"):
        fields.append("secret")
    shown = {**channel, "events": ",".join(channel["events"]) or "(all)"}
    emit(channel, lambda: click.echo(details(shown, fields)))


@notify_group.command("remove")
@click.argument("name")
@WORKSPACE_OPTION
def notify_remove(name: str, workspace: str | None) -> None:
    """Delete channel NAME and its pending deliveries."""
    with api() as client:
        space = workspace_id(client, workspace)
        client.request("DELETE", api_path("workspaces", space, "notifications", name))
    click.echo(f"removed channel {name}")


@notify_group.command("test")
@click.argument("name")
@WORKSPACE_OPTION
@json_option
def notify_test(name: str, workspace: str | None) -> None:
    """Send one sample event to channel NAME now; exit 1 when the receiver refuses it."""
    with api() as client:
        space = workspace_id(client, workspace)
        result = client.post(api_path("workspaces", space, "notifications", name, "test"))
    emit(result, lambda: click.echo(details(result, list(result))))
    if not result["delivered"]:
        raise CliError(f"channel {name}: {result['error']}")


@notify_group.command("deliveries")
@WORKSPACE_OPTION
@click.option("--status", type=click.Choice([s.value for s in DeliveryStatus]))
@click.option("--channel", help="Only this channel's.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@json_option
def notify_deliveries(
    workspace: str | None, status: str | None, channel: str | None, limit: int
) -> None:
    """List the outbox's deliveries, newest first."""
    with api() as client:
        space = workspace_id(client, workspace)
        items = client.get(
            api_path("workspaces", space, "notification-deliveries"),
            status=status,
            channel=channel,
            limit=limit,
        )["items"]
    emit(items, lambda: click.echo(table(items, DELIVERY_COLUMNS)))
