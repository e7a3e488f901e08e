"""The prompt's "How to act" section follows the executor; the MCP server offers those tools."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client

from office_scheduler import __version__
from office_scheduler.agent_tools.server import TOOL_NAMES, build_server
from office_scheduler.domain.models import ExecutorConfig, RunWakes
from office_scheduler.domain.status import WakeSource
from office_scheduler.prompts import ActRoute, PromptInput, act_route, build_prompt
from prompt_samples import agent, task, wake, workspace


def _prompt(route: ActRoute) -> str:
    return build_prompt(
        PromptInput(
            workspace=workspace(),
            agent=agent(),
            wakes=RunWakes.of(42, [wake(WakeSource.TASK_ASSIGNED, {"task_id": "tk1"})]),
            task=task(),
            run_id=42,
            act_via=route,
        )
    )


def _section(text: str) -> str:
    return text[text.index("## How to act") :]


@pytest.mark.parametrize(
    ("config", "route"),
    [
        (ExecutorConfig(name="c", preset="claude"), ActRoute.MCP),
        (ExecutorConfig(name="x", preset="codex"), ActRoute.MCP),
        (ExecutorConfig(name="g", preset="gemini"), ActRoute.MCP),
        (ExecutorConfig(name="a", kind="acp", argv=("claude-code-acp",)), ActRoute.MCP),
        (ExecutorConfig(name="s", argv=("agent", "{prompt_file}")), ActRoute.CLI),
        # An explicit argv wins over the preset, and with it goes the MCP wiring.
        (ExecutorConfig(name="o", preset="claude", argv=("claude", "-p")), ActRoute.CLI),
        (None, ActRoute.CLI),
    ],
)
def test_route_follows_the_executor(config: ExecutorConfig | None, route: ActRoute) -> None:
    assert act_route(config) is route


def test_mcp_route_names_every_tool_and_uses_them_in_examples() -> None:
    section = _section(_prompt(ActRoute.MCP))

    named = set(re.findall(r"`([a-z_]+)`", section))
    assert set(TOOL_NAMES) <= named
    for example in ("add_comment(", "mark_done(", "create_subtask(", "wake_self("):
        assert example in section, example
    assert "office comment add" not in section
    assert "office task" not in section
    assert "OFFICE_TOKEN" not in section


def test_cli_route_uses_the_office_command_only() -> None:
    section = _section(_prompt(ActRoute.CLI))

    assert "`office comment add TASK_ID --body TEXT`" in section
    assert "`office wake self --reason TEXT`" in section
    assert not [name for name in TOOL_NAMES if f"`{name}`" in section]


class _NoActions:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no action may run: {name}")


async def test_mcp_server_offers_exactly_the_named_tools_and_its_version() -> None:
    server = build_server(_NoActions())  # type: ignore[arg-type]

    async with Client(server) as client:
        listed = await client.list_tools()
        info = client.server_info

    assert [tool.name for tool in listed.tools] == list(TOOL_NAMES)
    assert info is not None
    assert info.name == "office"
    assert info.version == __version__
