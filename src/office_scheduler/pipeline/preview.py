"""What a run of an agent would launch, computed without launching it (``office agent preview``).

The same rules as a real run: the executor is picked task → agent → project → workspace
default (:func:`~office_scheduler.pipeline.planning.pick_executor`'s order), the working
directory as :func:`~office_scheduler.pipeline.planning.planned_cwd`, the prompt kind and
resumed session by :func:`~office_scheduler.prompts.can_resume`, and a preset's command
line, extra environment and files by :func:`~office_scheduler.executors.presets.build_invocation`
(run in a throw-away folder that is removed before returning). Environment variables are
listed by name only; values (credentials, the run token) never appear. The run's own temp
folder shows as ``<run tmp>``, the prompt as ``<prompt>``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from office_scheduler.config import Settings
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.execution import Launch
from office_scheduler.domain.models import Agent, ExecutorConfig, Project, Task, Workspace
from office_scheduler.executors.presets import PresetError, build_invocation
from office_scheduler.prompts import act_route, can_resume, how_to_act
from office_scheduler.store.facade import Store

RUN_TMP = "<run tmp>"
PROMPT = "<prompt>"
#: The variables every session gets from the scheduler (values are per run).
OFFICE_ENV = (
    "OFFICE_API_URL",
    "OFFICE_TOKEN",
    "OFFICE_RUN_ID",
    "OFFICE_SESSION_ID",
    "OFFICE_AGENT_ID",
    "OFFICE_WORKSPACE_ID",
    "OFFICE_TASK_ID",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchPreview:
    """The resolved launch of one agent (see the module docstring for placeholders).

    Attributes:
        executor: the executor's name; ``origin`` says who named it (task, agent, ...).
        kind: ``command`` or ``acp``; ``preset`` the preset name, if one builds the argv.
        argv: the command line (``<prompt>`` where the prompt goes on it).
        cwd: the absolute working directory.
        env: names of the variables the process gets, sorted.
        files: files the launch writes: ``{"path", "mode", "what"}`` (mode as ``0600``;
            symlinks as ``-> target``).
        mcp: how the office MCP server reaches the agent (empty when it does not).
        prompt_kind: ``full`` or ``delta``; ``resume_session_id`` the session resumed.
        act_via: how the prompt tells the agent to act (``mcp`` or ``cli``), and
            ``how_to_act`` that section of the prompt, line by line.
        stdin: what goes on stdin (``prompt`` or ``nothing``).
    """

    agent: str
    task_id: str | None
    executor: str
    origin: str
    kind: str
    preset: str | None
    argv: list[str]
    cwd: str
    env: list[str]
    files: list[dict[str, str]] = field(default_factory=list)
    mcp: str = ""
    prompt_kind: str = "full"
    resume_session_id: str | None = None
    act_via: str = "cli"
    how_to_act: list[str] = field(default_factory=list)
    stdin: str = "prompt"

    def to_json(self) -> dict[str, Any]:
        """The preview as a JSON object (the ``--json`` output)."""
        return {name: getattr(self, name) for name in self.__slots__}


def _pick(
    agent: Agent, task: Task | None, project: Project | None, workspace: Workspace
) -> tuple[str, str]:
    choices = [
        (task.executor if task else None, "task"),
        (agent.executor, "agent"),
        (project.executor if project else None, "project"),
        (workspace.settings.default_executor, "workspace default"),
    ]
    for name, origin in choices:
        if name:
            return name, origin
    raise InvalidInputError(
        f"no executor configured for agent {agent.name}: set one on the task, the agent, "
        "the project or the workspace default",
        field="executor",
    )


def _cwd(config: ExecutorConfig, agent: Agent, project: Project | None, home: Path) -> Path:
    base = Path(project.directory) if project and project.directory else None
    if config.cwd:
        cwd = Path(config.cwd)
        if not cwd.is_absolute():
            cwd = (base or home) / cwd
    elif base is not None:
        cwd = base
    else:
        cwd = home / "workdirs" / agent.id
    return cwd if cwd.is_absolute() else Path.cwd() / cwd


def _files(tmpdir: Path) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for path in sorted(tmpdir.rglob("*")):
        shown = f"{RUN_TMP}/{path.relative_to(tmpdir)}"
        if path.is_symlink():
            found.append({"path": shown, "mode": "symlink", "what": f"-> {os.readlink(path)}"})
            continue
        mode = f"{stat.S_IMODE(path.lstat().st_mode):04o}"
        what = "folder" if path.is_dir() else _what(path.name)
        found.append({"path": shown, "mode": mode, "what": what})
    return found


def _what(name: str) -> str:
    if name == "office-token":
        return "the run token, read by office mcp"
    if name.endswith(".json"):
        return "MCP configuration"
    return "file"


def _hide(text: str, tmpdir: str, prompt: str) -> str:
    return PROMPT if text == prompt else text.replace(tmpdir, RUN_TMP)


def preview_launch(
    store: Store, settings: Settings, agent: Agent, task: Task | None
) -> LaunchPreview:
    """Resolve what a run of ``agent`` (about ``task``) would launch; writes nothing lasting.

    Raises:
        InvalidInputError: no executor resolves, or the name has no definition (``field``
            ``executor``); the task belongs to another workspace (``task``).
    """
    workspace = store.office.get_workspace(agent.workspace_id)
    if task is not None and task.workspace_id != agent.workspace_id:
        raise InvalidInputError(f"task {task.id} is in another workspace", field="task")
    project = store.office.get_project(task.project_id) if task and task.project_id else None
    name, origin = _pick(agent, task, project, workspace)
    config = workspace.settings.executors.get(name)
    if config is None:
        raise InvalidInputError(
            f"executor {name!r} (from the {origin}) is not defined in workspace settings",
            field="executor",
        )
    cwd = str(_cwd(config, agent, project, settings.home))
    prior = store.runlog.latest_resumable_session(task.id, agent.id) if task else None
    resumes = can_resume(task_id=task.id if task else None, prior=prior, config=config, cwd=cwd)
    base = settings.agent_base_env
    env_names = {n for n in config.pass_env if n in base} | set(config.env) | set(OFFICE_ENV)
    common: dict[str, Any] = {
        "agent": agent.name,
        "task_id": task.id if task else None,
        "executor": name,
        "origin": origin,
        "kind": config.kind,
        "preset": config.preset if not config.argv else None,
        "cwd": cwd,
        "prompt_kind": "delta" if resumes else "full",
        "resume_session_id": prior.external_session_id if resumes and prior else None,
        "act_via": act_route(config).value,
        "how_to_act": list(how_to_act(act_route(config))[1:]),
    }
    if config.kind == "acp":
        return LaunchPreview(
            **common,
            argv=list(config.argv),
            env=sorted(env_names),
            mcp="office mcp passed as mcpServers in session/new and session/load",
            stdin="ACP messages",
        )
    tmpdir = tempfile.mkdtemp(prefix="office-run-")
    try:
        launch = Launch(
            run_id=0,
            agent_id=agent.id,
            task_id=task.id if task else None,
            workspace_id=agent.workspace_id,
            prompt=PROMPT,
            config=config,
            # No HOME: a preview must not create the Gemini session folders in it.
            env={"OFFICE_API_URL": settings.api_url, "OFFICE_TOKEN": "preview"},
            cwd=cwd,
            resume_session_id=common["resume_session_id"],
        )
        try:
            invocation = build_invocation(launch, Path(tmpdir))
        except PresetError as exc:
            raise InvalidInputError(str(exc), field="executor") from None
        if invocation is None:
            return LaunchPreview(**common, argv=list(config.argv), env=sorted(env_names))
        files = _files(Path(tmpdir))
        argv = [_hide(arg, tmpdir, PROMPT) for arg in invocation.argv]
        mcp = "office mcp wired in through " + (
            ", ".join(f["path"] for f in files if f["what"] == "MCP configuration")
            or "-c mcp_servers.office.* overrides on the command line"
        )
        return LaunchPreview(
            **common,
            argv=argv,
            env=sorted(env_names | set(invocation.env)),
            files=files,
            mcp=mcp,
            stdin="prompt" if invocation.stdin else "nothing",
        )
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
