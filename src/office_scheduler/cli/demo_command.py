"""The ``office demo`` command line; the demo itself is :mod:`office_scheduler.cli.demo`.

Kept apart so that ``office demo --help`` answers without importing the server.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("demo")
@click.option("--exit-when-idle", is_flag=True, help="Exit once the starter task is done.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--home",
    "demo_home",
    type=click.Path(path_type=Path, file_okay=False),
    help="Data directory (default: a new $OFFICE_HOME/demo-<timestamp>).",
)
@click.pass_context
def demo(ctx: click.Context, exit_when_idle: bool, port: int, demo_home: Path | None) -> None:
    """Run the demo office: a coordinator splits a job between two workers."""
    from office_scheduler.cli.demo import run_demo

    run_demo(ctx, exit_when_idle, port, demo_home)
