"""Client commands for tasks and comments: ``office task …`` and ``office comment …``."""

from __future__ import annotations

import sys
from typing import Any

import click

from office_scheduler.cli.client import (
    agent_id,
    api,
    api_path,
    project_id,
    with_agent_names,
    workspace_id,
)
from office_scheduler.cli.state import CliError, details, emit, json_option, table
from office_scheduler.cli.state import state as current_state
from office_scheduler.domain.status import TaskState

STATES = click.Choice([state.value for state in TaskState], case_sensitive=False)
TASK_COLUMNS = [
    ("id", "id"),
    ("state", "state"),
    ("title", "title"),
    ("assignee", "assignee_agent_id"),
    ("parent", "parent_id"),
    ("blocked by", "blocked_by"),
]
TASK_FIELDS = [
    "id",
    "title",
    "state",
    "workspace_id",
    "project_id",
    "parent_id",
    "assignee_agent_id",
    "blocked_by",
    "checkout_agent_id",
    "is_office",
    "created_at",
    "updated_at",
    "archived_at",
    "description",
]
WORKSPACE_OPTION = click.option(
    "--workspace",
    "workspace",
    envvar="OFFICE_WORKSPACE_ID",
    help="Workspace id or name (default: OFFICE_WORKSPACE_ID, or the only workspace).",
)


def _not_blank(option: str, value: str | None, what: str, instead: str) -> None:
    """Refuse a blank ``option`` value (usage error, exit 2) instead of ignoring it."""
    if value is not None and not value.strip():
        raise CliError(f"{option} needs {what} ({instead})", 2)


def _blockers_not_blank(blocked_by: tuple[str, ...]) -> None:
    for blocker in blocked_by:
        _not_blank("--blocked-by", blocker, "a task id", "one per option")


def _state(value: str | None) -> str | None:
    return None if value is None else value.upper()


@click.group("task")
def task_group() -> None:
    """Create, change and inspect tasks."""


@task_group.command("create")
@click.option("--title", required=True, help="Task title.")
@click.option("--description", default="", help="Task description.")
@WORKSPACE_OPTION
@click.option("--parent", "parent_id", help="Parent task id (makes a subtask).")
@click.option("--assignee", help="Agent id or name.")
@click.option("--project", "project", help="Project id or name (its directory and executor apply).")
@click.option("--blocked-by", "blocked_by", multiple=True, help="Blocking task id (repeatable).")
@click.option("--kanban", is_flag=True, help="Put it on the ordinary kanban board (no wakes).")
@json_option
def task_create(
    title: str,
    description: str,
    workspace: str | None,
    parent_id: str | None,
    assignee: str | None,
    project: str | None,
    blocked_by: tuple[str, ...],
    kanban: bool,
) -> None:
    """Create a task (assigned Office tasks wake their assignee)."""
    _not_blank("--title", title, "some text", "every task has a title")
    _not_blank("--project", project, "a project id or name", "leave it out for none")
    _not_blank("--assignee", assignee, "an agent id or name", "leave it out for none")
    _blockers_not_blank(blocked_by)
    with api() as client:
        if workspace is None and parent_id is not None:
            workspace = client.get(api_path("tasks", parent_id))["workspace_id"]
        space = workspace_id(client, workspace)
        body: dict[str, Any] = {
            "title": title,
            "description": description,
            "parent_id": parent_id,
            "project_id": project_id(client, space, project) if project else None,
            "assignee_agent_id": agent_id(client, space, assignee) if assignee else None,
            "blocked_by": list(blocked_by),
            "workflow": "kanban" if kanban else "office",
        }
        task = client.post(api_path("workspaces", space, "tasks"), body)
    emit(task, lambda: click.echo(f"created task {task['id']}: {task['title']}"))


@task_group.command("update")
@click.argument("task_id")
@click.option("--state", type=STATES, help="New state.")
@click.option("--assignee", help="Agent id or name.")
@click.option("--unassign", is_flag=True, help="Remove the assignee.")
@click.option("--title", help="New title.")
@click.option("--description", help="New description.")
@click.option("--project", "project", help="Move to a project (id or name).")
@click.option("--no-project", "no_project", is_flag=True, help="Take the task out of its project.")
@click.option("--blocked-by", "blocked_by", multiple=True, help="Add a blocker (repeatable).")
@json_option
def task_update(
    task_id: str,
    state: str | None,
    assignee: str | None,
    unassign: bool,
    title: str | None,
    description: str | None,
    project: str | None,
    no_project: bool,
    blocked_by: tuple[str, ...],
) -> None:
    """Change a task's fields, assignee, project or blockers."""
    if assignee and unassign:
        raise CliError("--assignee and --unassign exclude each other", 2)
    if project is not None and no_project:
        raise CliError("--project and --no-project exclude each other", 2)
    _not_blank("--title", title, "some text", "leave it out to keep the title")
    _not_blank("--project", project, "a project id or name", "--no-project removes it")
    _not_blank("--assignee", assignee, "an agent id or name", "--unassign removes it")
    _blockers_not_blank(blocked_by)
    changes: dict[str, Any] = {
        key: value
        for key, value in (
            ("state", _state(state)),
            ("title", title),
            ("description", description),
        )
        if value is not None
    }
    if unassign:
        changes["assignee_agent_id"] = None
    if no_project:
        changes["project_id"] = None
    if not changes and not assignee and not blocked_by and project is None:
        raise CliError("nothing to change: give at least one option", 2)
    with api() as client:
        task = client.get(api_path("tasks", task_id))
        if project is not None:
            changes["project_id"] = project_id(client, task["workspace_id"], project)
        if assignee:
            changes["assignee_agent_id"] = agent_id(client, task["workspace_id"], assignee)
        for blocker in blocked_by:
            task = client.post(api_path("tasks", task_id, "blockers"), {"blocker_task_id": blocker})
        if changes:
            task = client.patch(api_path("tasks", task_id), changes)
    emit(task, lambda: click.echo(f"updated task {task['id']} [{task['state']}]"))


@task_group.command("done")
@click.argument("task_id")
@json_option
def task_done(task_id: str) -> None:
    """Mark a task DONE (wakes dependants and, when it was the last child, the parent).

    A ``requires_approval`` task finished by its own agent goes to IN_REVIEW instead.
    """
    with api() as client:
        task = client.patch(api_path("tasks", task_id), {"state": TaskState.DONE.value})
    emit(task, lambda: click.echo(f"task {task['id']} is {task['state']}"))


@task_group.command("list")
@WORKSPACE_OPTION
@click.option("--state", type=STATES, help="Only tasks in this state.")
@click.option("--assignee", help="Only tasks of this agent (id or name).")
@click.option("--parent", "parent_id", help="Only subtasks of this task.")
@click.option("--project", "project", help="Only tasks of this project (id or name).")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def task_list(
    workspace: str | None,
    state: str | None,
    assignee: str | None,
    parent_id: str | None,
    project: str | None,
    limit: int,
) -> None:
    """List tasks, oldest first."""
    with api() as client:
        if workspace is None and parent_id is not None:
            workspace = client.get(api_path("tasks", parent_id))["workspace_id"]
        space = workspace_id(client, workspace)
        tasks = client.collect(
            api_path("workspaces", space, "tasks"),
            limit=limit,
            state=_state(state),
            assignee_agent_id=agent_id(client, space, assignee) if assignee else None,
            parent_id=parent_id,
            project_id=project_id(client, space, project) if project else None,
        )
        shown = with_agent_names(client, tasks, ["assignee_agent_id"], workspace=space)
    emit(tasks, lambda: click.echo(table(shown, TASK_COLUMNS)))


@task_group.command("show")
@click.argument("task_id")
@json_option
def task_show(task_id: str) -> None:
    """Show one task with its subtasks and comments."""
    with api() as client:
        task = client.get(api_path("tasks", task_id))
        if current_state().json:
            emit(task, lambda: None)
            return
        children = client.collect(api_path("tasks", task_id, "subtasks"), limit=500)
        comments = client.collect(api_path("tasks", task_id, "comments"), limit=500)
    click.echo(details(task, [key for key in TASK_FIELDS if key != "description"]))
    click.echo("\ndescription:\n" + _indent(task.get("description") or "(none)"))
    if children:
        click.echo("\nsubtasks:\n" + table(children, TASK_COLUMNS))
    for comment in comments:
        author = comment.get("author_agent_id") or comment.get("author_kind", "user")
        click.echo(f"\ncomment by {author} at {comment.get('created_at', '')}:")
        click.echo(_indent(str(comment.get("body", ""))))


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines() or [""])


@click.group("comment")
def comment_group() -> None:
    """Post and read task comments."""


@comment_group.command("add")
@click.argument("task_id")
@click.option("--body", required=True, help="Comment text; '-' reads it from stdin.")
@json_option
def comment_add(task_id: str, body: str) -> None:
    """Post a comment on a task (wakes its assignee unless the assignee wrote it)."""
    text = sys.stdin.read() if body == "-" else body
    if not text.strip():
        raise CliError("the comment body is empty", 2)
    with api() as client:
        comment = client.post(api_path("tasks", task_id, "comments"), {"body": text})
    emit(comment, lambda: click.echo(f"comment {comment['id']} added to task {task_id}"))


@comment_group.command("list")
@click.argument("task_id")
@json_option
def comment_list(task_id: str) -> None:
    """List a task's comments, oldest first."""
    with api() as client:
        comments = client.collect(api_path("tasks", task_id, "comments"), limit=1000)
    columns = [("at", "created_at"), ("author", "author_agent_id"), ("body", "body")]
    emit(comments, lambda: click.echo(table(comments, columns, max_width=80)))
