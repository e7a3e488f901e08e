"""The office actions an agent may take, over the HTTP API with its run-scoped token.

The same actions as the ``office`` client commands (DESIGN §9): create a subtask with
blockers, comment, change a task, mark it done, request an approval, wake itself, read a task
with its comments, blockers and children, and read the workspace inbox. Each method returns
the API's JSON and raises :class:`ActionError` with the API's one-line reason on failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from office_scheduler.cli.client import ApiClient, agent_id, api_path, workspace_id
from office_scheduler.cli.state import CliError
from office_scheduler.domain.status import InboxStatus, TaskState

#: Most comments and subtasks :meth:`OfficeActions.read_task` returns.
READ_LIMIT = 500


def _path(*segments: str) -> str:
    """The API path of ``segments`` with every id quoted as one segment.

    Ids come from the agent's tool arguments (untrusted): ``../agents/X/pause?`` must stay
    one segment and never name another route.

    Raises:
        ActionError: an id is empty, holds NUL or is not valid UTF-8.
    """
    try:
        return api_path(*segments)
    except CliError as exc:
        raise ActionError(exc.message) from None


class ActionError(Exception):
    """An action failed; ``message`` is the API's reason (or what was missing), one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentIdentity:
    """Who calls: the run's workspace, agent, task and run (``OFFICE_*`` variables).

    Attributes:
        workspace_id: the workspace the token belongs to.
        agent_id: the calling agent, for ``wake_self``.
        task_id: the run's task; the default of every task argument.
        run_id: the run, for the record.
    """

    workspace_id: str | None = None
    agent_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None


def _state(value: str) -> str:
    try:
        return TaskState(value.strip().upper()).value
    except ValueError:
        known = ", ".join(state.value for state in TaskState)
        raise ActionError(f"state {value!r} is not one of {known}") from None


class OfficeActions:
    """Agent actions bound to one API client and one run's identity.

    Args:
        client: the HTTP client, carrying the run-scoped bearer token.
        identity: the run's ids; task arguments default to ``identity.task_id``.
    """

    def __init__(self, client: ApiClient, identity: AgentIdentity) -> None:
        self._client = client
        self.identity = identity

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self._client.request(method, path, **kwargs)
        except CliError as exc:
            raise ActionError(exc.message) from None

    def _task(self, task_id: str | None) -> str:
        chosen = task_id or self.identity.task_id
        if not chosen:
            raise ActionError("no task_id given and this run is not about a task")
        return chosen

    def _workspace(self, hint_task: str | None = None) -> str:
        if self.identity.workspace_id:
            return self.identity.workspace_id
        if hint_task:
            return str(self._call("GET", _path("tasks", hint_task))["workspace_id"])
        try:
            # Like the CLI: the only workspace the token can see, when there is just one.
            return workspace_id(self._client, None)
        except CliError as exc:
            raise ActionError(exc.message) from None

    def _agent(self, workspace: str, value: str) -> str:
        try:
            return agent_id(self._client, workspace, value)
        except CliError as exc:
            raise ActionError(exc.message) from None

    def create_subtask(
        self,
        *,
        title: str,
        description: str = "",
        parent_id: str | None = None,
        assignee: str | None = None,
        blocked_by: list[str] | None = None,
    ) -> dict[str, Any]:
        """Create a task under ``parent_id`` (default: the run's task) with blockers.

        ``assignee`` is an agent id or name; an assigned Office task wakes its assignee once
        its blockers are done.
        """
        parent = parent_id or self.identity.task_id
        workspace = self._workspace(parent)
        body = {
            "title": title,
            "description": description,
            "parent_id": parent,
            "assignee_agent_id": self._agent(workspace, assignee) if assignee else None,
            "blocked_by": list(blocked_by or []),
        }
        task: dict[str, Any] = self._call(
            "POST", _path("workspaces", workspace, "tasks"), body=body
        )
        return task

    def add_comment(self, *, body: str, task_id: str | None = None) -> dict[str, Any]:
        """Post a comment on a task (default: the run's task)."""
        if not body.strip():
            raise ActionError("the comment body is empty")
        task = self._task(task_id)
        comment: dict[str, Any] = self._call(
            "POST", _path("tasks", task, "comments"), body={"body": body}
        )
        return comment

    def update_task(
        self,
        *,
        task_id: str | None = None,
        state: str | None = None,
        title: str | None = None,
        description: str | None = None,
        assignee: str | None = None,
        blocked_by: list[str] | None = None,
    ) -> dict[str, Any]:
        """Change a task's state, title, description or assignee, or add blockers."""
        task = self._task(task_id)
        changes: dict[str, Any] = {}
        if state is not None:
            changes["state"] = _state(state)
        if title is not None:
            changes["title"] = title
        if description is not None:
            changes["description"] = description
        if assignee is not None:
            changes["assignee_agent_id"] = self._agent(self._workspace(task), assignee)
        if not changes and not blocked_by:
            raise ActionError(
                "nothing to change: give state, title, description, assignee or blocked_by"
            )
        result: dict[str, Any] = {}
        for blocker in blocked_by or []:
            result = self._call(
                "POST", _path("tasks", task, "blockers"), body={"blocker_task_id": blocker}
            )
        if changes:
            result = self._call("PATCH", _path("tasks", task), body=changes)
        return result

    def mark_done(self, *, task_id: str | None = None) -> dict[str, Any]:
        """Mark a task DONE (wakes its dependants, and the parent after the last child)."""
        task = self._task(task_id)
        done: dict[str, Any] = self._call(
            "PATCH", _path("tasks", task), body={"state": TaskState.DONE.value}
        )
        return done

    def request_approval(
        self, *, title: str, body: str = "", task_id: str | None = None
    ) -> dict[str, Any]:
        """Ask the workspace's people for a decision; the agent is woken when they decide."""
        task = task_id or self.identity.task_id
        workspace = self._workspace(task)
        payload = {"title": title, "body": body, "task_id": task}
        approval: dict[str, Any] = self._call(
            "POST", _path("workspaces", workspace, "approvals"), body=payload
        )
        return approval

    def wake_self(
        self,
        *,
        reason: str = "",
        task_id: str | None = None,
        payload: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Ask for another run of the calling agent (about ``task_id``, default the run's task)."""
        if not self.identity.agent_id:
            raise ActionError("the calling agent is unknown: start the server with --agent")
        body = {
            "reason": reason,
            "payload": payload or {},
            "task_id": task_id or self.identity.task_id,
            "idempotency_key": idempotency_key,
        }
        result: dict[str, Any] = self._call(
            "POST", _path("agents", self.identity.agent_id, "wake"), body=body
        )
        return result

    def read_task(self, *, task_id: str | None = None) -> dict[str, Any]:
        """A task with its comments (oldest first), blockers and children."""
        task_ref = self._task(task_id)
        task: dict[str, Any] = self._call("GET", _path("tasks", task_ref))
        try:
            comments = self._client.collect(_path("tasks", task_ref, "comments"), limit=READ_LIMIT)
            children = self._client.collect(_path("tasks", task_ref, "subtasks"), limit=READ_LIMIT)
        except CliError as exc:
            raise ActionError(exc.message) from None
        blockers = []
        for blocker_id in task.get("blocked_by") or []:
            blocker = self._call("GET", _path("tasks", blocker_id))
            blockers.append({key: blocker.get(key) for key in ("id", "title", "state")})
        return {**task, "comments": comments, "blockers": blockers, "children": children}

    def read_inbox(self, *, status: str | None = InboxStatus.OPEN.value) -> dict[str, Any]:
        """The workspace's inbox items, newest first (``status`` open by default; None: all)."""
        if status is not None and status not in {s.value for s in InboxStatus}:
            known = ", ".join(s.value for s in InboxStatus)
            raise ActionError(f"status {status!r} is not one of {known}")
        workspace = self._workspace(self.identity.task_id)
        params = {"status": status} if status else None
        inbox: dict[str, Any] = self._call(
            "GET", _path("workspaces", workspace, "inbox"), params=params
        )
        return inbox
