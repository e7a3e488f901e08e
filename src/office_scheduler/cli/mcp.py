"""``office mcp``: the agent tools as an MCP server on stdio (see ``agent_tools``)."""

from __future__ import annotations

from pathlib import Path

import click

from office_scheduler.cli.client import ApiClient
from office_scheduler.cli.state import CliError, state


def _token(token_file: Path | None) -> str | None:
    if token_file is None:
        return state().resolved_token()
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CliError(f"cannot read the token file {token_file}: {exc.strerror}", 2) from None
    if not token:
        raise CliError(f"the token file {token_file} is empty", 2)
    return token


@click.command("mcp")
@click.option(
    "--token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Read the bearer token from this file (default: --token / OFFICE_TOKEN).",
)
@click.option(
    "--workspace", envvar="OFFICE_WORKSPACE_ID", help="Workspace id [env OFFICE_WORKSPACE_ID]."
)
@click.option("--agent", envvar="OFFICE_AGENT_ID", help="Calling agent id [env OFFICE_AGENT_ID].")
@click.option("--task", envvar="OFFICE_TASK_ID", help="The run's task id [env OFFICE_TASK_ID].")
@click.option("--run", "run_id", envvar="OFFICE_RUN_ID", help="The run id [env OFFICE_RUN_ID].")
def mcp_command(
    token_file: Path | None,
    workspace: str | None,
    agent: str | None,
    task: str | None,
    run_id: str | None,
) -> None:
    """Serve the agent tools over MCP on stdin/stdout (for agent CLIs).

    Tools: read_task, create_subtask, add_comment, update_task, mark_done,
    request_approval, wake_self, read_inbox. They call the office API at --api-url with the
    run-scoped token; a failed call is an MCP tool error carrying the API's message.
    """
    # Imported here: the MCP library is only needed by this command.
    from office_scheduler.agent_tools.actions import AgentIdentity, OfficeActions
    from office_scheduler.agent_tools.server import build_server

    identity = AgentIdentity(
        workspace_id=workspace or None,
        agent_id=agent or None,
        task_id=task or None,
        run_id=run_id or None,
    )
    client = ApiClient(state().api_url, _token(token_file))
    try:
        build_server(OfficeActions(client, identity)).run("stdio")
    finally:
        client.close()
