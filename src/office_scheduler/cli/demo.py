"""``office demo``: a fresh office running the sample agents end to end, with live progress.

The demo makes a new data directory and SQLite database, imports ``examples/demo-office``
(its project directories are placed in the data directory so the checkout stays clean),
serves the API on a free loopback port, runs the scheduler in-process and files a starter
task for the coordinator. The agents are real subprocesses that act through ``office``.
It also fires the office's webhook routine ("Deploy hook") once through its HTTP endpoint,
signed with the secret the import returned; that wakes the reviewer without a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import httpx

from office_scheduler.cli.bundled import demo_office
from office_scheduler.cli.monitor import ProgressMonitor, files_in
from office_scheduler.cli.runtime import (
    OfficeRuntime,
    bind,
    ensure_admin_token,
    install_signal_handlers,
    upgrade_database,
)
from office_scheduler.cli.state import CliError, state, table
from office_scheduler.config import Settings
from office_scheduler.domain.models import Project, Task
from office_scheduler.domain.routines import SigningMode
from office_scheduler.domain.status import TaskState
from office_scheduler.files import NewWebhook, OfficeConfig, load_config, plan_import, run_import
from office_scheduler.permissions import ensure_home
from office_scheduler.routines import webhooks
from office_scheduler.service import Service

EXAMPLES = demo_office()
STARTER_TITLE = "Build a tiny greeting web page"
STARTER_DESCRIPTION = (
    "Make a small static web page that greets visitors: an index.html with a heading,\n"
    "a stylesheet, and a quick review that both fit together. Split the work into\n"
    "subtasks for the workers and close this task when they are all done."
)
IDLE_TIMEOUT_S = 110.0
POLL_S = 0.25


def _demo_home(given: Path | None, base: Path) -> Path:
    if given is not None:
        home = given.expanduser().resolve()
        if (home / "office.db").exists():
            raise CliError(f"{home} already holds an office database; pick a new directory", 2)
        return ensure_home(home)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    home, n = base / f"demo-{stamp}", 2
    while home.exists():
        home, n = base / f"demo-{stamp}-{n}", n + 1
    return ensure_home(home)


def _relocate(config: OfficeConfig, source: Path, home: Path) -> OfficeConfig:
    """Move project directories that live inside the example into the demo's home."""
    projects = []
    for project in config.projects:
        directory = project.directory
        if directory is not None and Path(directory).is_relative_to(source):
            directory = str(home / Path(directory).relative_to(source))
        projects.append(replace(project, directory=directory))
    return replace(config, projects=tuple(projects))


def _office_command() -> str:
    """How to call ``office`` from a shell: the bare name only when it is on ``PATH``."""
    beside = Path(sys.executable).parent / "office"
    on_path = shutil.which("office")
    if on_path is not None and (not beside.exists() or Path(on_path).samefile(beside)):
        return "office"
    return str(beside)


def run_demo(ctx: click.Context, exit_when_idle: bool, port: int, demo_home: Path | None) -> None:
    """``office demo`` (see :mod:`office_scheduler.cli.demo_command` for its options)."""
    if not (EXAMPLES / "office.yml").is_file():
        raise CliError(
            f"the demo office is missing: expected {EXAMPLES}/office.yml "
            "(the installation is incomplete: reinstall office-scheduler)"
        )
    current = state()
    home = _demo_home(demo_home, current.home)
    config = _relocate(load_config(EXAMPLES), EXAMPLES, home)
    url = f"sqlite:///{home / 'office.db'}"
    upgrade_database(url)
    try:
        sock, api_url = bind("127.0.0.1", port)
    except OSError as exc:
        raise CliError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    settings = current.settings(
        home=home,
        database_url=url,
        api_url=api_url,
        safety_tick=timedelta(seconds=0.5),
        shutdown_grace=timedelta(seconds=5),
    )
    click.echo(f"Demo office in {home}")
    ctx.exit(asyncio.run(_run(settings, config, sock=sock, exit_when_idle=exit_when_idle)))


async def _run(
    settings: Settings, config: OfficeConfig, *, sock: socket.socket, exit_when_idle: bool
) -> int:
    service = Service(settings)
    try:
        store = service.store
        plan = await asyncio.to_thread(plan_import, store, config)
        imported = await asyncio.to_thread(run_import, store, plan, service.clock.now())
        workspace_id = imported.workspace_id
        token_path = settings.home / "admin_token"
        secret = await asyncio.to_thread(ensure_admin_token, store, token_path, service.clock.now())
        agents = await asyncio.to_thread(store.office.list_agents, workspace_id)
        projects = await asyncio.to_thread(store.office.list_projects, workspace_id)
    except BaseException:
        await service.close()
        sock.close()
        raise
    click.echo(f"Imported workspace {config.name!r}: {', '.join(a.name for a in agents)}")
    if config.routines:
        click.echo(f"Routines: {', '.join(r.name for r in config.routines)}")
    coordinator = next((a for a in agents if a.role.is_coordinator), None)
    if coordinator is None or not projects:
        await service.close()
        raise CliError("the demo office needs a coordinator agent and a project")
    project = projects[0]
    monitor = ProgressMonitor(
        store, {a.id: a.name for a in agents}, echo=click.echo, clock=time.monotonic
    )
    monitor.register(service.bus)
    stop = asyncio.Event()
    install_signal_handlers(stop)
    async with OfficeRuntime(service, sock=sock, scheduler=True) as runtime:
        click.echo(f"API at {settings.api_url}; agents work in {project.directory}")
        if not exit_when_idle:
            click.echo(f"Admin token: {secret}")
            click.echo(
                f"Try: OFFICE_API_URL={settings.api_url} OFFICE_HOME={settings.home} "
                f"{_office_command()} task list   (Ctrl-C stops the demo)"
            )
        for hook in imported.new_webhooks[:1]:
            await _fire_webhook(settings.api_url, hook)
        click.echo(f"Filing the starter task for {coordinator.name}: {STARTER_TITLE!r}\n")
        starter = await service.office.create_task(
            workspace_id=workspace_id,
            title=STARTER_TITLE,
            description=STARTER_DESCRIPTION,
            project_id=project.id,
            assignee_agent_id=coordinator.id,
        )
        if not exit_when_idle:
            await runtime.wait(stop)
            return 0
        finished = await _wait_idle(service, monitor, starter, stop)
        await _summary(service, monitor, workspace_id, project)
    if not finished:
        raise CliError(
            f"the demo did not finish within {IDLE_TIMEOUT_S:g} s "
            f"(open runs: {sorted(monitor.open_runs) or 'none'})"
        )
    click.echo("\nThe demo office finished its task.")
    return 0


async def _fire_webhook(api_url: str, hook: NewWebhook) -> None:
    """POST once to a webhook trigger's URL, signed as an outside caller would sign it."""
    body = json.dumps({"reason": "demo deploy"}).encode()
    headers = {"content-type": "application/json"}
    if hook.secret is not None and hook.signing_mode is SigningMode.HMAC_SHA256:
        stamp = int(time.time())
        headers[webhooks.TIMESTAMP_HEADER] = str(stamp)
        headers[webhooks.SIGNATURE_HEADER] = webhooks.sign(hook.secret, stamp, body)
    elif hook.secret is not None:
        headers["authorization"] = f"Bearer {hook.secret}"
    async with httpx.AsyncClient(base_url=api_url, timeout=10) as client:
        response = await client.post(hook.path, content=body, headers=headers)
    if response.status_code != 202:
        raise CliError(f"firing the {hook.routine!r} webhook failed: {response.text}")
    run = response.json()["routine_run"]
    outcome = f"run {run['linked_run_id']}" if run["linked_run_id"] else run["status"]
    click.echo(
        f"Fired the {hook.routine!r} webhook: POST {hook.path} (signed "
        f"{hook.signing_mode.value}) → routine run {run['id']} → {outcome}"
    )


async def _is_idle(service: Service, monitor: ProgressMonitor, task_id: str) -> bool:
    task = await asyncio.to_thread(service.store.office.get_task, task_id)
    if task.state is not TaskState.DONE or monitor.open_runs or service.runs.inflight:
        return False
    return await asyncio.to_thread(service.store.queue.next_due_at) is None


async def _wait_idle(
    service: Service, monitor: ProgressMonitor, starter: Task, stop: asyncio.Event
) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + IDLE_TIMEOUT_S
    while loop.time() < deadline:
        if service.failed is not None and service.failed.done():
            service.failed.result()
        if await _is_idle(service, monitor, starter.id):
            return True
        if stop.is_set():
            raise CliError("interrupted before the demo finished")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POLL_S)
    return False


async def _summary(
    service: Service, monitor: ProgressMonitor, workspace_id: str, project: Project
) -> None:
    rows = []
    for run_id, record in sorted(monitor.ended.items()):
        run = record.run
        rows.append(
            {
                "run": run_id,
                "agent": monitor.agent(run.agent_id),
                "task": await monitor.title(run.task_id),
                "wakes": ", ".join(record.sources),
                "status": run.status.value,
                "reason": run.reason.value if run.reason else "-",
                "seconds": f"{record.seconds:.1f}" if record.seconds is not None else "-",
            }
        )
    columns = [(key, key) for key in ("run", "agent", "task", "wakes", "status", "reason")]
    click.echo("\nRuns:\n" + table(rows, [*columns, ("secs", "seconds")], max_width=40))
    per_agent: dict[str, list[str]] = {}
    for row in rows:
        per_agent.setdefault(str(row["agent"]), []).append(str(row["reason"]))
    for agent, reasons in sorted(per_agent.items()):
        counts = ", ".join(f"{reasons.count(r)} {r}" for r in dict.fromkeys(reasons))
        click.echo(f"  {agent}: {len(reasons)} run(s) ({counts})")
    page = await asyncio.to_thread(service.store.office.list_tasks, workspace_id, limit=500)
    tasks = [
        {"title": t.title, "state": t.state.value, "assignee": monitor.agent(t.assignee_agent_id)}
        for t in page.items
    ]
    task_columns = [("task", "title"), ("state", "state"), ("assignee", "assignee")]
    click.echo("\nTasks:\n" + table(tasks, task_columns))
    directory = Path(project.directory) if project.directory else service.settings.home
    files = [{"file": name, "bytes": size} for name, size in files_in(directory)]
    click.echo(f"\nFiles in {directory}:\n" + table(files, [("file", "file"), ("bytes", "bytes")]))
