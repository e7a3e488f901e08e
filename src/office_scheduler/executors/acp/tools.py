"""Agent tools offered to an ACP session: the run's ``office mcp`` server."""

from __future__ import annotations

from acp import schema

from office_scheduler.domain.execution import Launch
from office_scheduler.executors.presets import mcp_server_argv

McpServer = schema.HttpMcpServer | schema.SseMcpServer | schema.AcpMcpServer | schema.McpServerStdio


def office_mcp(launch: Launch) -> list[McpServer]:
    """The ``office mcp`` server the agent may start for this session (ACP ``mcpServers``).

    The run token travels in the server's environment (``OFFICE_TOKEN``), never on its
    command line. A launch without a token (tests, a misconfigured run) gets no server.
    """
    token = launch.env.get("OFFICE_TOKEN")
    if not token:
        return []
    argv = mcp_server_argv(launch)
    servers: list[McpServer] = [
        schema.McpServerStdio(
            name="office",
            command=argv[0],
            args=list(argv[1:]),
            env=[schema.EnvVariable(name="OFFICE_TOKEN", value=token)],
        )
    ]
    return servers
