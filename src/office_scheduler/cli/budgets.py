"""Client commands for budgets: ``office budget create|list|show|update|delete|spend``.

Budgets are admin-only: an agent's run token gets 403 (exit 1). Limits are whole cents.
"""

from __future__ import annotations

from typing import Any

import click

from office_scheduler.cli.client import agent_id, api, api_path, project_id, workspace_id
from office_scheduler.cli.state import CliError, details, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.budgets import BudgetAction, BudgetPeriod, BudgetScope

BUDGET_COLUMNS = [
    ("id", "id"),
    ("scope", "scope_kind"),
    ("scope id", "scope_id"),
    ("limit ¢", "limit_cents"),
    ("period", "period"),
    ("alert %", "alert_threshold_pct"),
    ("on exceed", "action_on_exceed"),
    ("exceeded", "exceeded_period"),
]
BUDGET_FIELDS = [
    "id",
    "workspace_id",
    "scope_kind",
    "scope_id",
    "limit_cents",
    "period",
    "alert_threshold_pct",
    "action_on_exceed",
    "alerted_period",
    "exceeded_period",
    "created_at",
    "updated_at",
]
SPEND_COLUMNS = [
    ("scope", "scope_kind"),
    ("scope id", "scope_id"),
    ("spent ¢", "spent_cents"),
    ("priced", "priced_count"),
    ("unpriced", "unpriced_count"),
    ("tokens in", "input_tokens"),
    ("tokens out", "output_tokens"),
    ("limit ¢", "limit_cents"),
    ("%", "budget_pct"),
]
PERIOD = click.Choice([period.value for period in BudgetPeriod])
ACTION = click.Choice([action.value for action in BudgetAction])
SCOPE = click.Choice([scope.value for scope in BudgetScope])


def _scope_id(client: Any, space: str, scope: str, target: str | None) -> str | None:
    """The scope id: none for a workspace, an agent by id or name, a project by id or name."""
    if scope == BudgetScope.WORKSPACE.value:
        if target is not None:
            raise CliError("a workspace budget takes no --agent/--project", 2)
        return None
    if target is None:
        article = "an" if scope[0] in "aeiou" else "a"
        raise CliError(f"{article} {scope} budget needs --{scope} ID_OR_NAME", 2)
    if scope == BudgetScope.AGENT.value:
        return agent_id(client, space, target)
    return project_id(client, space, target)


@click.group("budget")
def budget_group() -> None:
    """Spending limits per workspace, project or agent, and what was spent (admin only)."""


@budget_group.command("create")
@WORKSPACE_OPTION
@click.option("--scope", type=SCOPE, required=True, help="What the budget limits.")
@click.option("--agent", "agent", help="Agent id or name (with --scope agent).")
@click.option("--project", "project", help="Project id or name (with --scope project).")
@click.option("--limit-cents", type=click.IntRange(min=1), required=True, help="Limit, cents.")
@click.option("--period", type=PERIOD, default="monthly", show_default=True)
@click.option("--alert-pct", type=click.IntRange(1, 100), default=80, show_default=True)
@click.option("--on-exceed", type=ACTION, default="pause_agent", show_default=True)
@json_option
def budget_create(
    workspace: str | None,
    scope: str,
    agent: str | None,
    project: str | None,
    limit_cents: int,
    period: str,
    alert_pct: int,
    on_exceed: str,
) -> None:
    """Create the budget of a workspace, project or agent (one per scope)."""
    if agent is not None and project is not None:
        raise CliError("--agent and --project exclude each other", 2)
    with api() as client:
        space = workspace_id(client, workspace)
        body: dict[str, Any] = {
            "scope_kind": scope,
            "limit_cents": limit_cents,
            "period": period,
            "alert_threshold_pct": alert_pct,
            "action_on_exceed": on_exceed,
        }
        target = _scope_id(client, space, scope, agent if agent is not None else project)
        if target is not None:
            body["scope_id"] = target
        policy = client.post(api_path("workspaces", space, "budgets"), body)
    emit(policy, lambda: click.echo(f"created {scope} budget {policy['id']}"))


@budget_group.command("list")
@WORKSPACE_OPTION
@json_option
def budget_list(workspace: str | None) -> None:
    """List a workspace's budgets."""
    with api() as client:
        space = workspace_id(client, workspace)
        policies = client.get(api_path("workspaces", space, "budgets"))["items"]
    emit(policies, lambda: click.echo(table(policies, BUDGET_COLUMNS)))


@budget_group.command("show")
@click.argument("budget_id")
@json_option
def budget_show(budget_id: str) -> None:
    """Show one budget."""
    with api() as client:
        policy = client.get(api_path("budgets", budget_id))
    emit(policy, lambda: click.echo(details(policy, BUDGET_FIELDS)))


@budget_group.command("update")
@click.argument("budget_id")
@click.option("--limit-cents", type=click.IntRange(min=1), help="New limit, cents.")
@click.option("--period", type=PERIOD, help="New period.")
@click.option("--alert-pct", type=click.IntRange(1, 100), help="New warn threshold, percent.")
@click.option("--on-exceed", type=ACTION, help="New action when the limit is reached.")
@json_option
def budget_update(
    budget_id: str,
    limit_cents: int | None,
    period: str | None,
    alert_pct: int | None,
    on_exceed: str | None,
) -> None:
    """Change a budget; raising the limit lets a budget-paused agent be resumed."""
    values = {
        "limit_cents": limit_cents,
        "period": period,
        "alert_threshold_pct": alert_pct,
        "action_on_exceed": on_exceed,
    }
    changes = {key: value for key, value in values.items() if value is not None}
    if not changes:
        raise CliError("nothing to change: give at least one option", 2)
    with api() as client:
        policy = client.patch(api_path("budgets", budget_id), changes)
    emit(policy, lambda: click.echo(f"updated budget {policy['id']}"))


@budget_group.command("delete")
@click.argument("budget_id")
def budget_delete(budget_id: str) -> None:
    """Delete a budget (what was spent stays on record)."""
    with api() as client:
        client.request("DELETE", api_path("budgets", budget_id))
    click.echo(f"deleted budget {budget_id}")


@budget_group.command("spend")
@WORKSPACE_OPTION
@click.option("--period", help="monthly (this month, UTC; default), YYYY-MM or lifetime.")
@json_option
def budget_spend(workspace: str | None, period: str | None) -> None:
    """What the workspace, its projects and agents spent (unpriced runs counted apart)."""
    with api() as client:
        space = workspace_id(client, workspace)
        report = client.get(api_path("workspaces", space, "spend"), period=period)

    def render() -> None:
        click.echo(f"period {report['period']}")
        click.echo(table(report["items"], SPEND_COLUMNS))

    emit(report, render)
