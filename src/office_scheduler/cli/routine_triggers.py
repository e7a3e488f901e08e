"""Client commands for routine triggers: ``office routine trigger …``."""

from __future__ import annotations

from typing import Any

import click

from office_scheduler.cli.client import ApiClient, api, api_path, routine_ref
from office_scheduler.cli.state import CliError, emit, json_option, table
from office_scheduler.domain.routines import SigningMode, TriggerKind

TRIGGER_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("enabled", "enabled"),
    ("cron", "cron_expression"),
    ("tz", "timezone"),
    ("next run", "next_run_at"),
    ("signing", "signing_mode"),
    ("url", "url_path"),
]


def trigger_rows(triggers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Triggers as the tables show them: a schedule's empty zone reads ``UTC``, others none."""
    shown = []
    for trigger in triggers:
        zone = trigger.get("timezone") or None
        if trigger.get("kind") == TriggerKind.SCHEDULE.value:
            zone = zone or "UTC"
        shown.append({**trigger, "timezone": zone})
    return shown


KINDS = click.Choice([kind.value for kind in TriggerKind])
SIGNING = click.Choice([mode.value for mode in SigningMode])


def _webhook_url(client: ApiClient, trigger: dict[str, Any]) -> str | None:
    path = trigger.get("url_path")
    return f"{client.base_url}{path}" if path else None


def _show_trigger_created(trigger: dict[str, Any], url: str | None) -> None:
    click.echo(f"added {trigger['kind']} trigger {trigger['id']}")
    if trigger.get("next_run_at"):
        click.echo(f"next run: {trigger['next_run_at']}")
    if url:
        click.echo(f"url: {url}")
        click.echo(f"signing: {trigger.get('signing_mode')}")
    if trigger.get("secret"):
        click.echo(f"secret: {trigger['secret']}")
        click.echo("(the secret is shown only now: it cannot be read again)")


@click.group("trigger")
def trigger_group() -> None:
    """Add, list, enable, disable and delete a routine's triggers."""


def _events(values: tuple[str, ...]) -> dict[str, list[str]]:
    """``--event issues:opened,labeled --event push`` as a GitHub events filter."""
    found: dict[str, list[str]] = {}
    for value in values:
        name, _, actions = value.partition(":")
        if not name.strip():
            raise CliError(f"--event {value!r}: give EVENT or EVENT:ACTION,ACTION", 2)
        found.setdefault(name.strip(), []).extend(
            action.strip() for action in actions.split(",") if action.strip()
        )
    return found


@trigger_group.command("add")
@click.argument("routine_id", metavar="ROUTINE")
@click.option("--kind", type=KINDS, required=True, help="What fires the routine.")
@click.option("--cron", help="Five-field cron expression (schedule triggers).")
@click.option("--tz", "timezone", help="IANA time zone of --cron [default: UTC].")
@click.option("--signing", type=SIGNING, help="Webhook authentication [default: hmac_sha256].")
@click.option("--secret", help="github: the secret set in GitHub; slack: the signing secret.")
@click.option(
    "--event",
    "events",
    multiple=True,
    help="github: accept EVENT[:ACTION,ACTION] (e.g. issues:opened,labeled); repeatable.",
)
@click.option("--task", "task_id", help="slack: the channel task its messages go to.")
@click.option("--disabled", is_flag=True, help="Create it disabled.")
@json_option
def trigger_add(
    routine_id: str,
    kind: str,
    cron: str | None,
    timezone: str | None,
    signing: str | None,
    secret: str | None,
    events: tuple[str, ...],
    task_id: str | None,
    disabled: bool,
) -> None:
    """Add a trigger; a signed webhook's secret is printed once and never again."""
    if kind == TriggerKind.SCHEDULE.value and cron is None:
        raise CliError("a schedule trigger needs --cron", 2)
    if kind != TriggerKind.SCHEDULE.value and (cron is not None or timezone is not None):
        raise CliError("--cron and --tz apply only to --kind schedule", 2)
    if kind != TriggerKind.WEBHOOK.value and signing is not None:
        raise CliError("--signing applies only to --kind webhook", 2)
    body: dict[str, Any] = {"kind": kind}
    if cron is not None:
        body["cron_expression"] = cron
        body["timezone"] = timezone or ""
    if signing is not None:
        body["signing_mode"] = signing
    if secret is not None:
        body["secret"] = secret
    if events:
        body["events"] = _events(events)
    if task_id is not None:
        body["task_id"] = task_id
    if disabled:
        body["enabled"] = False
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        trigger = client.post(api_path("routines", routine_id, "triggers"), body)
        url = _webhook_url(client, trigger)
    shown = {**trigger, "url": url} if url else trigger
    emit(shown, lambda: _show_trigger_created(trigger, url))


@trigger_group.command("list")
@click.argument("routine_id", metavar="ROUTINE")
@json_option
def trigger_list(routine_id: str) -> None:
    """List a routine's triggers (secrets are never shown)."""
    with api() as client:
        routine_id = routine_ref(client, routine_id)
        triggers = client.get(api_path("routines", routine_id, "triggers"))["items"]
    emit(triggers, lambda: click.echo(table(trigger_rows(triggers), TRIGGER_COLUMNS, max_width=60)))


def _set_enabled(trigger_id: str, enabled: bool) -> None:
    with api() as client:
        trigger = client.patch(api_path("routine-triggers", trigger_id), {"enabled": enabled})
    state = "enabled" if trigger["enabled"] else "disabled"
    emit(trigger, lambda: click.echo(f"trigger {trigger['id']} is {state}"))


@trigger_group.command("enable")
@click.argument("trigger_id")
@json_option
def trigger_enable(trigger_id: str) -> None:
    """Enable a trigger (a schedule's next run is computed from now)."""
    _set_enabled(trigger_id, True)


@trigger_group.command("disable")
@click.argument("trigger_id")
@json_option
def trigger_disable(trigger_id: str) -> None:
    """Disable a trigger: it stops firing until enabled."""
    _set_enabled(trigger_id, False)


@trigger_group.command("delete")
@click.argument("trigger_id")
def trigger_delete(trigger_id: str) -> None:
    """Delete a trigger (its routine runs stay)."""
    with api() as client:
        client.request("DELETE", api_path("routine-triggers", trigger_id))
    click.echo(f"deleted trigger {trigger_id}")
