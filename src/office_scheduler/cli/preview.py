"""``office agent preview NAME [--task ID]``: what a run of the agent would launch.

A server-side command: it reads the database (``--db`` / ``OFFICE_DATABASE_URL``, else the
one in ``--home``) and this process's environment (the variables ``pass_env`` may copy),
like ``office serve`` would, and launches nothing (see ``pipeline/preview.py``).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from office_scheduler.cli.admin import open_store
from office_scheduler.cli.state import CliError, db_option, emit, json_option, state

if TYPE_CHECKING:  # the server's modules load only when the command runs, not for --help
    from office_scheduler.domain.models import Agent
    from office_scheduler.pipeline.preview import LaunchPreview
    from office_scheduler.store.facade import Store


def _agent(store: Store, value: str, workspace: str | None) -> Agent:
    found = store.office.find_agent(value)
    if found is not None:
        return found
    spaces = [w for w in store.office.list_workspaces() if workspace in (None, w.id, w.name)]
    matches = [a for w in spaces if (a := store.office.find_agent_by_name(w.id, value))]
    if not matches:
        raise CliError(f"no agent {value!r}" + (f" in workspace {workspace}" if workspace else ""))
    if len(matches) > 1:
        raise CliError(
            f"agent name {value!r} is in several workspaces: name one with --workspace", 2
        )
    return matches[0]


def _render(preview: LaunchPreview) -> None:
    lines = [
        f"agent:        {preview.agent}"
        + (f" (task {preview.task_id})" if preview.task_id else ""),
        f"executor:     {preview.executor} (from the {preview.origin}), kind {preview.kind}"
        + (f", preset {preview.preset}" if preview.preset else ""),
        "argv:         " + shlex.join(preview.argv),
        f"working dir:  {preview.cwd}",
        f"stdin:        {preview.stdin}",
        "environment:  " + ", ".join(preview.env) + " (names only)",
    ]
    if preview.files:
        lines.append("files:")
        lines += [f"  {f['mode']:>7}  {f['path']}  ({f['what']})" for f in preview.files]
    lines.append(f"office MCP:   {preview.mcp or 'not wired in'}")
    resume = f", resumes session {preview.resume_session_id}" if preview.resume_session_id else ""
    lines.append(f"prompt:       {preview.prompt_kind}{resume}; acts via {preview.act_via}:")
    lines += [f"  {line}" for line in preview.how_to_act]
    click.echo("\n".join(lines))


@click.command("preview")
@click.argument("agent")
@click.option("--task", "task_id", help="Preview a run about this task (default: taskless).")
@click.option("--workspace", "workspace", help="Workspace id or name, to find AGENT by name.")
@db_option
@json_option
def agent_preview(agent: str, task_id: str | None, workspace: str | None) -> None:
    """Show what a run of AGENT would launch, without launching anything.

    The resolved executor, argv, working directory, the names (never the values) of the
    environment variables, the files the launch writes (MCP configuration, token file)
    with their permissions, and the prompt kind.
    """
    current = state()
    with open_store(current, upgrade=False) as store:
        found = _agent(store, agent, workspace)
        task = None
        if task_id is not None:
            task = store.office.find_task(task_id)
            if task is None:
                raise CliError(f"no task {task_id!r}", 2)
        from office_scheduler.pipeline.preview import preview_launch

        preview = preview_launch(store, current.settings(), found, task)
    emit(preview.to_json(), lambda: _render(preview))
