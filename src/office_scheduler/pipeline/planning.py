"""What a run will use, as its loaded subjects tell: the executor and the working directory.

Pure functions of the run's context (no I/O): the prompt is built for the executor and
directory planned here, and the launch uses the same ones.
"""

from __future__ import annotations

from pathlib import Path

from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.pipeline.context import RunContext


def pick_executor(ctx: RunContext) -> tuple[str | None, str]:
    """The executor's name and where it came from: task → agent → project → workspace default.

    ``(None, "")`` when none of them names one.
    """
    assert ctx.agent is not None
    assert ctx.workspace is not None
    choices = [
        (ctx.task.executor if ctx.task else None, "task"),
        (ctx.agent.executor, "agent"),
        (ctx.project.executor if ctx.project else None, "project"),
        (ctx.workspace.settings.default_executor, "workspace default"),
    ]
    for name, origin in choices:
        if name:
            return name, origin
    return None, ""


def planned_executor(ctx: RunContext) -> ExecutorConfig | None:
    """The executor the run will use (resolved later by ``resolve_executor``), if any."""
    if ctx.executor_config is not None:
        return ctx.executor_config
    assert ctx.workspace is not None
    name, _ = pick_executor(ctx)
    return ctx.workspace.settings.executors.get(name) if name else None


def planned_cwd(ctx: RunContext, config: ExecutorConfig) -> Path:
    """The absolute working directory of the session (not created here)."""
    assert ctx.agent is not None
    base = Path(ctx.project.directory) if ctx.project and ctx.project.directory else None
    if config.cwd:
        cwd = Path(config.cwd)
        if not cwd.is_absolute():
            cwd = (base or ctx.deps.settings.home) / cwd
    elif base is not None:
        cwd = base
    else:
        cwd = ctx.deps.settings.home / "workdirs" / ctx.agent.id
    if not cwd.is_absolute():
        cwd = Path.cwd() / cwd
    return cwd


def planned_session(ctx: RunContext) -> tuple[ExecutorConfig | None, str | None]:
    """The executor and absolute working directory the prompt is built for.

    ``(None, None)`` when no executor is planned.
    """
    config = planned_executor(ctx)
    return config, str(planned_cwd(ctx, config)) if config is not None else None
