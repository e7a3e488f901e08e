"""A small, real agent program for the demo office, run by the ``command`` or ``acp`` executor.

It reads its prompt on stdin (and ignores most of it: it is deterministic, not a model) and
acts only through the ``office`` CLI with the run token the scheduler put in its environment
(``OFFICE_API_URL``, ``OFFICE_TOKEN``, ``OFFICE_AGENT_ID``, ``OFFICE_TASK_ID``,
``OFFICE_WORKSPACE_ID``).

* coordinator: woken for a task without subtasks, it creates three subtasks chained by
  blockers (page → style → review), assigns them to the workers and comments the plan.
  Woken again once every subtask is done, it comments a summary and marks its task done.
* worker: writes the file its subtask names (``file: NAME``) into its working directory (the
  project directory), or reviews the files named by ``review: A B``, comments what it did
  and marks the subtask done.

The last line on stdout is a JSON object such as ``{"status": "ok", "summary": "..."}``.
Failures exit non-zero with a message on stderr.

With ``--acp`` it is an Agent Client Protocol agent instead (the ``agent-client-protocol``
package, on stdin/stdout): each ``session/prompt`` does the same work; progress lines and the
final JSON object are sent as agent message chunks, and a failure is a JSON-RPC error. It
keeps no history, so ``session/load`` resumes a session with nothing to replay.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

COORDINATOR_ROLES = {"coordinator", "ceo"}
FINISHED = {"DONE", "CANCELLED"}

PAGE = """<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>Hello from the office</title>
    <link rel="stylesheet" href="style.css">
  </head>
  <body>
    <main>
      <h1>Hello, world!</h1>
      <p>This page was written by {agent}, an agent woken by the office scheduler.</p>
    </main>
  </body>
</html>
"""

STYLE = """/* Written by {agent}. */
body {{
  font-family: system-ui, sans-serif;
  background: #f6f4ee;
  color: #222;
}}
main {{
  max-width: 36rem;
  margin: 4rem auto;
  padding: 2rem;
  border-radius: 0.75rem;
  background: white;
  box-shadow: 0 2px 12px rgb(0 0 0 / 10%);
}}
h1 {{
  color: #2f6f4f;
}}
"""

TEMPLATES = {".html": PAGE, ".css": STYLE}


class AgentError(Exception):
    """A failure worth reporting on stderr with exit status 1."""


def office(*args: str) -> Any:
    """Run ``office --json ARGS`` and return its decoded JSON output."""
    command = [sys.executable, "-m", "office_scheduler", "--json", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise AgentError(f"office {' '.join(args[:2])} timed out") from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise AgentError(f"office {' '.join(args[:2])} failed: {reason[0]}")
    try:
        return json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        raise AgentError(f"office {' '.join(args[:2])} printed no JSON") from None


def _print_line(message: str) -> None:
    print(message, flush=True)


#: Where progress lines go: stdout, or agent message chunks in ACP mode.
PROGRESS: list[Callable[[str], None]] = [_print_line]


def say(message: str) -> None:
    """A progress line for the run's event log."""
    PROGRESS[0](message)


def plan_subtasks(task: dict[str, Any], me: str) -> str:
    agents = office("agent", "list")
    others = [a for a in agents if a["id"] != me and a["role"] not in COORDINATOR_ROLES]
    if not others:
        raise AgentError("there is no worker to delegate to")
    reviewer = next(
        (a for a in others if a["role"] == "reviewer" or "review" in a["name"]), others[-1]
    )
    writers = [a for a in others if a is not reviewer] or others
    steps = [
        ("Write the greeting page", "file: index.html\nA short HTML greeting page.", writers[0]),
        ("Style the greeting page", "file: style.css\nA stylesheet for index.html.", writers[-1]),
        (
            "Review the greeting page",
            "review: index.html style.css\nCheck that both files exist and fit together.",
            reviewer,
        ),
    ]
    previous: str | None = None
    lines: list[str] = []
    for title, description, agent in steps:
        args = ["task", "create", "--title", title, "--description", description]
        args += ["--parent", task["id"], "--assignee", agent["id"]]
        if task.get("project_id"):
            args += ["--project", task["project_id"]]
        if previous is not None:
            args += ["--blocked-by", previous]
        sub = office(*args)
        say(f"created subtask {sub['id']} {title!r} for {agent['name']}")
        after = "" if previous is None else " (after the previous step)"
        lines.append(f"{len(lines) + 1}. {title} → {agent['name']}{after}")
        previous = sub["id"]
    office("task", "update", task["id"], "--state", "IN_PROGRESS")
    office("comment", "add", task["id"], "--body", "Plan:\n" + "\n".join(lines))
    return f"split {task['title']!r} into {len(steps)} chained subtasks"


def coordinate(task: dict[str, Any], me: str) -> str:
    if task["state"] in FINISHED:
        return f"task is already {task['state']}"
    children = office("task", "list", "--parent", task["id"])
    if not children:
        return plan_subtasks(task, me)
    waiting = [child for child in children if child["state"] not in FINISHED]
    if waiting:
        return f"waiting for {len(waiting)} of {len(children)} subtasks"
    files = sorted(p.name for p in Path.cwd().iterdir() if p.is_file())
    done = "\n".join(f"- [{child['state']}] {child['title']}" for child in children)
    body = f"All subtasks are finished:\n{done}\n\nFiles in the project: {', '.join(files)}"
    office("comment", "add", task["id"], "--body", body)
    office("task", "done", task["id"])
    return f"all {len(children)} subtasks finished; closed {task['title']!r}"


def directives(description: str, key: str) -> list[str]:
    for line in description.splitlines():
        if line.lower().startswith(f"{key}:"):
            return line.split(":", 1)[1].split()
    return []


def write_file(name: str, me: str) -> str:
    path = Path.cwd() / Path(name).name
    template = TEMPLATES.get(path.suffix, "Written by {agent}.\n")
    path.write_text(template.format(agent=me), encoding="utf-8")
    return f"wrote {path.name} ({path.stat().st_size} bytes)"


def review(names: list[str]) -> str:
    findings = []
    for name in names:
        path = Path.cwd() / Path(name).name
        state = f"ok, {path.stat().st_size} bytes" if path.is_file() else "MISSING"
        findings.append(f"- {path.name}: {state}")
    page = Path.cwd() / "index.html"
    linked = page.is_file() and 'href="style.css"' in page.read_text(encoding="utf-8")
    findings.append(f"- index.html links style.css: {'yes' if linked else 'no'}")
    verdict = "approved" if linked and "MISSING" not in "".join(findings) else "changes needed"
    report = "# Review\n\n" + "\n".join(findings) + f"\n\nVerdict: {verdict}\n"
    (Path.cwd() / "REVIEW.md").write_text(report, encoding="utf-8")
    return f"reviewed {', '.join(names)}: {verdict} (REVIEW.md)"


def work(task: dict[str, Any], me: str) -> str:
    if task["state"] in FINISHED:
        return f"task is already {task['state']}"
    files = directives(task["description"], "file")
    to_review = directives(task["description"], "review")
    results = [write_file(name, me) for name in files]
    if to_review:
        results.append(review(to_review))
    if not results:
        results.append(write_file(f"notes-{task['id']}.txt", me))
    summary = "; ".join(results)
    office("comment", "add", task["id"], "--body", summary.capitalize())
    office("task", "done", task["id"])
    return summary


def handle(prompt: str, role_arg: str | None) -> str:
    """Do the work of one wake; return a one-line summary.

    Raises:
        AgentError: the environment is incomplete or an ``office`` command failed.
    """
    for name in ("OFFICE_API_URL", "OFFICE_TOKEN", "OFFICE_AGENT_ID"):
        if not os.environ.get(name):
            raise AgentError(f"{name} is not set: run me through the office scheduler")
    me = os.environ["OFFICE_AGENT_ID"]
    agent = office("agent", "show", me)
    role = role_arg or ("coordinator" if agent["role"] in COORDINATOR_ROLES else "worker")
    say(f"{agent['name']} ({role}) woken; prompt of {len(prompt)} characters")
    task_id = os.environ.get("OFFICE_TASK_ID", "")
    if not task_id:
        return "taskless wake: nothing to do"
    task = office("task", "show", task_id)
    act = coordinate if role == "coordinator" else work
    return act(task, agent["name"] if act is work else me)


def serve_acp(role_arg: str | None) -> int:
    """Serve one ACP connection on stdin/stdout (``--acp``)."""
    import asyncio

    import acp
    from acp import schema

    class SampleAcpAgent:
        def __init__(self) -> None:
            self.conn: Any = None

        def on_connect(self, conn: Any) -> None:
            self.conn = conn

        async def initialize(self, protocol_version: int, **_: Any) -> schema.InitializeResponse:
            return schema.InitializeResponse(
                protocol_version=acp.PROTOCOL_VERSION,
                agent_capabilities=schema.AgentCapabilities(load_session=True),
                agent_info=schema.Implementation(name="office-sample-agent", version="1"),
            )

        async def authenticate(self, method_id: str, **_: Any) -> None:
            return None

        async def new_session(self, cwd: str, **_: Any) -> schema.NewSessionResponse:
            return schema.NewSessionResponse(session_id=f"sample-{uuid.uuid4().hex}")

        async def load_session(self, cwd: str, session_id: str, **_: Any) -> None:
            return None  # no history is kept: nothing to replay

        async def cancel(self, session_id: str, **_: Any) -> None:
            return None

        async def prompt(
            self, prompt: list[Any], session_id: str, **_: Any
        ) -> schema.PromptResponse:
            text = "".join(getattr(block, "text", "") for block in prompt)
            loop = asyncio.get_running_loop()

            def progress(line: str) -> None:
                chunk = acp.update_agent_message_text(line + "\n")
                update = self.conn.session_update(session_id, chunk)
                asyncio.run_coroutine_threadsafe(update, loop).result(timeout=60)

            PROGRESS[0] = progress
            try:
                summary = await asyncio.to_thread(handle, text, role_arg)
            except AgentError as exc:
                raise acp.RequestError(-32603, f"sample agent: {exc}") from None
            result = json.dumps({"status": "ok", "summary": summary})
            await self.conn.session_update(session_id, acp.update_agent_message_text(result))
            return schema.PromptResponse(stop_reason="end_turn")

    asyncio.run(acp.run_agent(SampleAcpAgent()))  # type: ignore[arg-type]
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["coordinator", "worker"], default=None)
    parser.add_argument("--acp", action="store_true", help="speak ACP on stdin/stdout")
    args = parser.parse_args()
    if args.acp:
        return serve_acp(args.role)
    prompt = sys.stdin.read()
    try:
        summary = handle(prompt, args.role)
    except AgentError as exc:
        print(f"sample agent: {exc}", file=sys.stderr)
        print(json.dumps({"status": "error", "summary": str(exc)}))
        return 1
    print(json.dumps({"status": "ok", "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
