"""The MCP server of ``office mcp``: one tool per :class:`OfficeActions` action.

Built on the ``mcp`` package's :class:`~mcp.server.mcpserver.MCPServer` (mcp 2.x; see
https://py.sdk.modelcontextprotocol.io/v2/migration/ for the rename from FastMCP) and served
over stdio. A failed action comes back as an MCP tool error (``is_error`` with the API's
message), never as a protocol error, so the model can read and react to it.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from office_scheduler import __version__
from office_scheduler.agent_tools.actions import ActionError, OfficeActions

#: The tools, in the order they are listed.
TOOL_NAMES = (
    "read_task",
    "create_subtask",
    "add_comment",
    "update_task",
    "mark_done",
    "request_approval",
    "wake_self",
    "read_inbox",
)

INSTRUCTIONS = (
    "Tools of the office you work in. Task arguments default to the task of your current run. "
    "Use them to split work into subtasks (with blockers), report progress in comments, change "
    "or finish tasks, ask people for approval, schedule another run of yourself, and read your "
    "task and the workspace inbox."
)

TaskArg = Annotated[str | None, Field(description="Task id; default: the task of the current run.")]
AgentArg = Annotated[str | None, Field(description="Agent id or name.")]
Blockers = Annotated[
    list[str] | None, Field(description="Ids of tasks that must be DONE before this one starts.")
]

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def _run(action: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = action(**kwargs)
    except ActionError as exc:
        raise ToolError(exc.message) from None
    return result


def build_server(actions: OfficeActions) -> MCPServer:
    """An MCP server exposing ``actions`` as the tools named in :data:`TOOL_NAMES`.

    Args:
        actions: the run's actions (API client with its token, and its identity).

    Returns:
        The server (named ``office``, reporting the package version in its
        ``serverInfo``); serve it with ``run_stdio_async()``.
    """
    server = MCPServer(
        name="office", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool(annotations=_READ_ONLY)
    def read_task(task_id: TaskArg = None) -> dict[str, Any]:
        """Read a task with its comments (oldest first), blockers and child tasks."""
        return _run(actions.read_task, task_id=task_id)

    @server.tool(annotations=_WRITE)
    def create_subtask(
        title: Annotated[str, Field(description="Short title of the new task.")],
        description: Annotated[str, Field(description="What needs doing.")] = "",
        parent_id: TaskArg = None,
        assignee: AgentArg = None,
        blocked_by: Blockers = None,
    ) -> dict[str, Any]:
        """Create a subtask of a task; an assigned subtask wakes its assignee when unblocked."""
        return _run(
            actions.create_subtask,
            title=title,
            description=description,
            parent_id=parent_id,
            assignee=assignee,
            blocked_by=blocked_by,
        )

    @server.tool(annotations=_WRITE)
    def add_comment(
        body: Annotated[str, Field(description="Comment text (markdown).")],
        task_id: TaskArg = None,
    ) -> dict[str, Any]:
        """Post a comment on a task (people and other agents read it)."""
        return _run(actions.add_comment, body=body, task_id=task_id)

    @server.tool(annotations=_WRITE)
    def update_task(
        task_id: TaskArg = None,
        state: Annotated[
            str | None,
            Field(description="TODO, IN_PROGRESS, IN_REVIEW, BLOCKED, DONE or CANCELLED."),
        ] = None,
        title: str | None = None,
        description: str | None = None,
        assignee: AgentArg = None,
        blocked_by: Blockers = None,
    ) -> dict[str, Any]:
        """Change a task's state, title, description or assignee, or add blockers."""
        return _run(
            actions.update_task,
            task_id=task_id,
            state=state,
            title=title,
            description=description,
            assignee=assignee,
            blocked_by=blocked_by,
        )

    @server.tool(annotations=_WRITE)
    def mark_done(task_id: TaskArg = None) -> dict[str, Any]:
        """Mark a task DONE (its dependants and, after the last child, its parent wake up)."""
        return _run(actions.mark_done, task_id=task_id)

    @server.tool(annotations=_WRITE)
    def request_approval(
        title: Annotated[str, Field(description="The decision you need, in one line.")],
        body: Annotated[str, Field(description="Context for the people deciding.")] = "",
        task_id: TaskArg = None,
    ) -> dict[str, Any]:
        """Ask the workspace's people to approve something; you are woken with their answer."""
        return _run(actions.request_approval, title=title, body=body, task_id=task_id)

    @server.tool(annotations=_WRITE)
    def wake_self(
        reason: Annotated[str, Field(description="Why (shown in your next prompt).")] = "",
        task_id: TaskArg = None,
        payload: Annotated[
            dict[str, Any] | None, Field(description="Extra JSON for your next prompt.")
        ] = None,
        idempotency_key: Annotated[
            str | None, Field(description="Repeated keys are ignored.")
        ] = None,
    ) -> dict[str, Any]:
        """Schedule another run of yourself (about the task of this run by default)."""
        return _run(
            actions.wake_self,
            reason=reason,
            task_id=task_id,
            payload=payload,
            idempotency_key=idempotency_key,
        )

    @server.tool(annotations=_READ_ONLY)
    def read_inbox(
        status: Annotated[
            str | None, Field(description="open (default), resolved or dismissed; null: all.")
        ] = "open",
    ) -> dict[str, Any]:
        """Read the workspace inbox: items waiting for people (errors, approvals), newest first."""
        return _run(actions.read_inbox, status=status)

    return server
