"""``office agent …``: list, show and change agents; pause, resume and stop them; preview a run.

``AGENT`` is an agent id, or a name within ``--workspace`` (default: OFFICE_WORKSPACE_ID,
or the only workspace). Changing settings needs an admin token; bad values exit 2.
"""

from __future__ import annotations

import json
from typing import Any

import click

from office_scheduler.cli.client import ApiClient, agent_id, api, api_path, workspace_id
from office_scheduler.cli.state import CliError, details, emit, json_option, table
from office_scheduler.cli.tasks import WORKSPACE_OPTION
from office_scheduler.domain.status import AgentRole, PermissionMode

AGENT_COLUMNS = [
    ("id", "id"),
    ("name", "name"),
    ("role", "role"),
    ("status", "status"),
    ("paused", "paused_reason"),
    ("reports to", "reports_to"),
    ("executor", "executor"),
]
AGENT_FIELDS = [
    "id",
    "name",
    "workspace_id",
    "role",
    "status",
    "paused_reason",
    "reports_to",
    "executor",
    "max_concurrent_sessions",
    "cooldown_s",
    "skip_idle_wakeups",
    "permission_policy",
    "last_wakeup_finished_at",
    "created_at",
    "instructions",
]
#: Written instead of a value to clear ``--reports-to``, ``--executor`` or the policy.
NONE = "none"


def resolve_agent(client: ApiClient, value: str, workspace: str | None) -> str:
    """The id of the agent given by id or by name (names are looked up in the workspace).

    Raises:
        CliError: no agent of that id, nor of that name in the workspace (exit 1).
            An empty value, NUL or text that is not UTF-8 (exit 2).
    """
    path = api_path("agents", value)  # outside the try: an unusable value is a usage error
    try:
        found = client.get(path)
    except CliError:
        return agent_id(client, workspace_id(client, workspace), value)
    return str(found["id"])


def _policy(text: str) -> dict[str, Any] | None:
    """``--permission-policy``: ``none``, a mode, ``allow_listed:tool1,tool2`` or JSON."""
    if text == NONE:
        return None
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            raise CliError("--permission-policy is not valid JSON", 2) from None
        if not isinstance(value, dict):
            raise CliError("--permission-policy must be a JSON object", 2)
        return value
    mode, _, tools = text.partition(":")
    modes = [m.value for m in PermissionMode]
    if mode not in modes:
        raise CliError(f"--permission-policy mode must be one of {', '.join(modes)}", 2)
    return {"mode": mode, "tools": [t.strip() for t in tools.split(",") if t.strip()]}


def _show(agent: dict[str, Any]) -> None:
    emit(agent, lambda: click.echo(details(agent, AGENT_FIELDS)))


@click.group("agent")
def agent_group() -> None:
    """Inspect and configure agents."""


@agent_group.command("list")
@WORKSPACE_OPTION
@json_option
def agent_list(workspace: str | None) -> None:
    """List the agents of a workspace."""
    with api() as client:
        space = workspace_id(client, workspace)
        agents = client.collect(api_path("workspaces", space, "agents"), limit=1000)
    names = {agent["id"]: agent["name"] for agent in agents}
    shown = [
        {**a, "reports_to": names.get(a.get("reports_to"), a.get("reports_to"))} for a in agents
    ]
    emit(agents, lambda: click.echo(table(shown, AGENT_COLUMNS)))


@agent_group.command("show")
@click.argument("agent")
@WORKSPACE_OPTION
@json_option
def agent_show(agent: str, workspace: str | None) -> None:
    """Show one agent's settings."""
    with api() as client:
        found = client.get(api_path("agents", resolve_agent(client, agent, workspace)))
    _show(found)


@agent_group.command("update")
@click.argument("agent")
@WORKSPACE_OPTION
@click.option("--name", help="New name (unique in the workspace).")
@click.option("--role", type=click.Choice([r.value for r in AgentRole]), help="New role.")
@click.option("--instructions", help="Standing instructions added to every prompt.")
@click.option(
    "--max-sessions",
    "--max-concurrent-sessions",
    "max_sessions",
    type=click.IntRange(1, 100),
    help="max_concurrent_sessions.",
)
@click.option(
    "--cooldown",
    "--cooldown-s",
    "cooldown",
    type=click.FloatRange(0, 7 * 86_400),
    help="cooldown_s, seconds.",
)
@click.option(
    "--skip-idle/--no-skip-idle",
    "--skip-idle-wakeups/--no-skip-idle-wakeups",
    "skip_idle",
    default=None,
    help="skip_idle_wakeups (default: by role).",
)
@click.option("--executor", help=f"Preferred executor name (`{NONE}` clears it).")
@click.option("--reports-to", help=f"Agent id or name it reports to (`{NONE}` clears it).")
@click.option(
    "--permission-policy",
    help=f"`allow_all`, `deny`, `allow_listed:tool1,tool2`, a JSON object, or `{NONE}`.",
)
@json_option
def agent_update(
    agent: str,
    workspace: str | None,
    name: str | None,
    role: str | None,
    instructions: str | None,
    max_sessions: int | None,
    cooldown: float | None,
    skip_idle: bool | None,
    executor: str | None,
    reports_to: str | None,
    permission_policy: str | None,
) -> None:
    """Change an agent's settings (only the options given)."""
    body: dict[str, Any] = {
        key: value
        for key, value in (
            ("name", name),
            ("role", role),
            ("instructions", instructions),
            ("max_concurrent_sessions", max_sessions),
            ("cooldown_s", cooldown),
            ("skip_idle_wakeups", skip_idle),
        )
        if value is not None
    }
    if executor is not None:
        body["executor"] = None if executor == NONE else executor
    if permission_policy is not None:
        body["permission_policy"] = _policy(permission_policy)
    if not body and reports_to is None:
        raise CliError("nothing to change: give at least one option", 2)
    with api() as client:
        target = resolve_agent(client, agent, workspace)
        if reports_to is not None:
            body["reports_to"] = (
                None if reports_to == NONE else resolve_agent(client, reports_to, workspace)
            )
        changed = client.patch(api_path("agents", target), body)
    _show(changed)


def _status_command(action: str, summary: str) -> click.Command:
    @click.argument("agent")
    @WORKSPACE_OPTION
    @json_option
    def command(agent: str, workspace: str | None) -> None:
        with api() as client:
            target = resolve_agent(client, agent, workspace)
            changed = client.post(api_path("agents", target, action))

        def render() -> None:
            reason = f" ({changed['paused_reason']})" if changed.get("paused_reason") else ""
            click.echo(f"{changed['name']}: {changed['status']}{reason}")

        emit(changed, render)

    command.__doc__ = summary
    return agent_group.command(action)(command)


_status_command("pause", "Pause AGENT: its queued runs wait, a claimed run ends unlaunched.")
_status_command("resume", "Resume AGENT (refused while it is over a budget that paused it).")
_status_command("stop", "Stop AGENT: its queued runs and scheduled retries are cancelled.")


def _register_preview() -> None:
    # Its own module: it reads the database directly, unlike the API commands here.
    from office_scheduler.cli.preview import agent_preview

    agent_group.add_command(agent_preview)


_register_preview()
