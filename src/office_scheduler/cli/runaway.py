"""``office wakeups release``, ``office inbox release`` and ``office limits``: runaway limits.

See docs/scheduling.md ("Causation and runaway limits").
"""

from __future__ import annotations

from typing import Any

import click

from office_scheduler.cli.agents import resolve_agent
from office_scheduler.cli.client import api, api_path, workspace_id
from office_scheduler.cli.state import RECORD_ID, CliError, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.runaway import DEFAULT_LIMITS

RELEASE_COLUMNS = [
    ("wakeup", "wakeup_id"),
    ("released", "released"),
    ("new wakeup", "successor_id"),
    ("outcome", "outcome"),
    ("run", "run_id"),
]


def _rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "wakeup_id": item["wakeup"]["id"],
            "released": "yes" if item["released"] else f"no ({item['wakeup']['status']})",
            "successor_id": (item.get("successor") or {}).get("id"),
            "outcome": item.get("outcome"),
            "run_id": item.get("run_id"),
        }
        for item in items
    ]


@click.command("release")
@click.argument("wakeup_ids", nargs=-1, required=True, type=RECORD_ID)
@json_option
def wakeups_release(wakeup_ids: tuple[int, ...]) -> None:
    """Release held wakes WAKEUP_IDS…: each is enqueued once, as a person's wake.

    A wake that is not held (already released, or never held) is reported and left alone.
    """
    with api() as client:
        result = client.post("/wakeups/release", {"wakeup_ids": list(wakeup_ids)})
    emit(result, lambda: click.echo(table(_rows(result["items"]), RELEASE_COLUMNS)))


@click.command("release")
@click.argument("item_id", type=RECORD_ID)
@json_option
def inbox_release(item_id: int) -> None:
    """Release every wake a `wake.held` inbox item ITEM_ID reports, and resolve it."""
    with api() as client:
        result = client.post(api_path("inbox", str(item_id), "release"))

    def render() -> None:
        click.echo(f"inbox item {item_id}: {result['item']['status']}")
        click.echo(table(_rows(result["items"]), RELEASE_COLUMNS))

    emit(result, render)


@click.group("limits")
def limits_group() -> None:
    """Show and set the runaway limits of a workspace or of one agent."""


def _path(client: Any, workspace: str | None, agent: str | None) -> str:
    if agent is not None:
        return api_path("agents", resolve_agent(client, agent, workspace), "limits")
    return api_path("workspaces", workspace_id(client, workspace), "limits")


def _render(result: dict[str, Any]) -> None:
    rows = [
        {
            "limit": key,
            "effective": "none" if value is None else value,
            "set here": (
                ("none" if result["set"][key] is None else result["set"][key])
                if key in result["set"]
                else "-"
            ),
        }
        for key, value in result["effective"].items()
    ]
    click.echo(
        table(rows, [("limit", "limit"), ("effective", "effective"), ("set here", "set here")])
    )


@limits_group.command("show")
@WORKSPACE_OPTION
@click.option("--agent", help="An agent (id or name): its overrides and effective limits.")
@json_option
def limits_show(workspace: str | None, agent: str | None) -> None:
    """Show the limits of the workspace, or of --agent."""
    with api() as client:
        result = client.get(_path(client, workspace, agent))
    emit(result, lambda: _render(result))


def _value(pair: str, *, for_agent: bool) -> tuple[str, int | str | None]:
    key, sep, text = pair.partition("=")
    key, text = key.strip(), text.strip()
    if not sep or key not in DEFAULT_LIMITS:
        known = ", ".join(DEFAULT_LIMITS)
        raise CliError(f"expected LIMIT=VALUE with LIMIT one of {known}, got {pair!r}", 2)
    if text.lower() == "none":
        return key, None
    if for_agent and text.lower() == "inherit":
        return key, "inherit"
    try:
        number = int(text)
    except ValueError:
        raise CliError(f"{key}: expected a whole number or `none`, got {text!r}", 2) from None
    if number < 0:
        raise CliError(f"{key}: expected a whole number ≥ 0 or `none`, got {text!r}", 2)
    return key, number


@limits_group.command("set")
@click.argument("pairs", nargs=-1, required=True, metavar="LIMIT=VALUE…")
@WORKSPACE_OPTION
@click.option("--agent", help="Override for this agent (id or name) instead of the workspace.")
@json_option
def limits_set(pairs: tuple[str, ...], workspace: str | None, agent: str | None) -> None:
    """Set limits: a whole number, `none` for no limit, or (with --agent) `inherit`.

    Example: office limits set max_causation_depth=8 max_runs_per_hour=none
    """
    body = dict(_value(pair, for_agent=agent is not None) for pair in pairs)
    with api() as client:
        result = client.patch(_path(client, workspace, agent), body)
    emit(result, lambda: _render(result))
