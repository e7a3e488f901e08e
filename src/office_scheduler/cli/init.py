"""``office init DIR``: scaffold a working office config for the agent CLIs on ``PATH``.

The office has one ``command`` executor per agent CLI found (``claude``, ``codex``,
``gemini``, through their presets) or, when none is found, the sample agent (copied into
DIR, so the office runs with Python alone); a coordinator (which gets the heartbeat
routine) and one worker; and a project whose directory is ``DIR/work``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import click

from office_scheduler.cli.bundled import sample_agent
from office_scheduler.cli.state import CliError

#: Agent CLIs ``office init`` looks for, in order of preference (executor presets).
AGENT_CLIS = ("claude", "codex", "gemini")

_PASS_ENV = "[PATH, HOME, LANG, LC_ALL, TERM, USER]"  # noqa: S105 - variable names


def _executors(found: list[str]) -> str:
    if not found:
        return (
            "  # No agent CLI (claude, codex, gemini) was found on PATH: the sample agent\n"
            "  # stands in. Install one and add e.g.  claude: {kind: command, preset: claude}\n"
            "  sample:\n"
            "    kind: command\n"
            '    argv: ["{python}", "./sample_agent.py"]\n'
            "    timeout_s: 120\n"
            f"    pass_env: {_PASS_ENV[:-1]}, PYTHONPATH]\n"
        )
    return "".join(
        f"  {name}:\n    kind: command\n    preset: {name}\n    timeout_s: 1800\n"
        f"    pass_env: {_PASS_ENV}\n"
        for name in found
    )


def _agent(name: str, role: str, executor: str, instructions: str) -> str:
    return (
        f"name: {name}\nrole: {role}\nexecutor: {executor}\nstatus: idle\n"
        f"max_concurrent_sessions: 1\ncooldown_s: 10\ninstructions: |\n  {instructions}\n"
    )


def scaffold(directory: Path, which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """Write a new office config into ``directory`` (created; must be empty if it exists).

    Args:
        directory: where ``office.yml``, ``agents/``, ``projects/`` and ``routines/`` go.
        which: finds a program on ``PATH`` (``shutil.which``; tests pass their own).

    Returns:
        The agent CLIs found (empty: the sample agent is used).

    Raises:
        CliError: ``directory`` exists and is not empty, or is a file (exit 2).
    """
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise CliError(f"{directory} exists and is not an empty directory; pick a new one", 2)
    found = [name for name in AGENT_CLIS if which(name) is not None]
    executor = found[0] if found else "sample"
    for folder in ("agents", "projects", "routines"):
        (directory / folder).mkdir(parents=True, exist_ok=True)
    name = json.dumps(directory.resolve().name or "office")
    (directory / "office.yml").write_text(
        f"# Made by `office init`. Edit, then `office import {directory}` again.\n"
        f"workspace:\n  name: {name}\n  description: A coordinator and one worker.\n\n"
        f"settings:\n  coalesce_window_s: 5\n  default_executor: {executor}\n\n"
        f"executors:\n{_executors(found)}",
        encoding="utf-8",
    )
    if not found:
        shutil.copyfile(sample_agent(), directory / "sample_agent.py")
    agents = directory / "agents"
    (agents / "coordinator.yml").write_text(
        _agent(
            "coordinator",
            "coordinator",
            executor,
            "You coordinate the office: split each task into subtasks for the worker.",
        )
        + "reports_to: null\n",
        encoding="utf-8",
    )
    (agents / "worker.yml").write_text(
        _agent("worker", "worker", executor, "You do the subtasks assigned to you.")
        + "reports_to: coordinator\n",
        encoding="utf-8",
    )
    (directory / "projects" / "main.yml").write_text(
        "name: main\ndescription: The project the agents work in.\n"
        "# Relative directories are taken from this config directory (created on import).\n"
        f"directory: work/\nexecutor: {executor}\nrepos: []\n",
        encoding="utf-8",
    )
    (directory / "routines" / "coordinator-heartbeat.yml").write_text(
        "# Wakes the coordinator every 5 minutes (every coordinator gets it).\n"
        "name: Coordinator heartbeat\n"
        "description: Wakes the coordinator to check activity and decide what to do next.\n"
        "assignee: coordinator\nstatus: active\nconcurrency_policy: coalesce_if_active\n"
        "catch_up_policy: enqueue_missed_with_cap\ncatch_up_max: 25\ntask_template: null\n"
        'triggers:\n  - {kind: schedule, cron: "*/5 * * * *", timezone: UTC}\n',
        encoding="utf-8",
    )
    return found


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path))
def init_command(directory: Path) -> None:
    """Scaffold a new office config in DIRECTORY for the agent CLIs found on PATH."""
    found = scaffold(directory)
    if found:
        click.echo(f"Found agent CLIs on PATH: {', '.join(found)} (one executor each).")
    else:
        click.echo("No agent CLI (claude, codex, gemini) on PATH: using the sample agent.")
    click.echo(f"Wrote an office with a coordinator, a worker and a project to {directory}.")
    click.echo("Next:")
    click.echo(f"  office import {directory} --yes")
    click.echo("  office serve")
