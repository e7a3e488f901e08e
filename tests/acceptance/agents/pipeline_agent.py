"""A scripted agent for the pipeline acceptance tests, run by the ``command`` executor.

It acts only through the HTTP API with its run token and through the ``office`` CLI, as a
real agent would. Every session saves its prompt to ``$PIPELINE_DIR/prompts/<run_id>.md``.

* coordinator (role ``coordinator``/``ceo``): on a task without subtasks it creates the
  subtasks listed in the task's description, one line each::

      step: <title> | <agent name> | <title of the step it waits for, or -> | approval|-

  It moves its task to IN_PROGRESS. Woken when every subtask has ended it comments a
  summary and marks its task done; otherwise it only notes that it is waiting.
* worker: comments on its task and marks it done with ``office task done`` (a gated task
  goes to review instead; a rejection wakes it again and it simply finishes again).

The last stdout line is a JSON result such as ``{"status": "ok", "summary": "..."}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

FINISHED = {"DONE", "CANCELLED"}


def http(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """Call ``/api/v1`` + ``path`` with the run token; return the decoded JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        os.environ["OFFICE_API_URL"].rstrip("/") + "/api/v1" + path,
        data=data,
        method=method,
        headers={
            "Authorization": f"Bearer {os.environ['OFFICE_TOKEN']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def office(*args: str) -> Any:
    """Run ``office --json ARGS`` (it reads the server and token from the environment)."""
    command = [sys.executable, "-m", "office_scheduler", "--json", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"office {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def plan(task: dict[str, Any]) -> str:
    agents = http("GET", f"/workspaces/{task['workspace_id']}/agents")["items"]
    by_name = {agent["name"]: agent["id"] for agent in agents}
    created: dict[str, str] = {}
    for line in task["description"].splitlines():
        if not line.startswith("step:"):
            continue
        title, agent, after, gate = (part.strip() for part in line[5:].split("|"))
        body = {
            "title": title,
            "parent_id": task["id"],
            "assignee_agent_id": by_name[agent],
            "requires_approval": gate == "approval",
            "blocked_by": [] if after == "-" else [created[after]],
        }
        created[title] = http("POST", f"/workspaces/{task['workspace_id']}/tasks", body)["id"]
    office("task", "update", task["id"], "--state", "IN_PROGRESS")
    return f"planned {len(created)} subtasks"


def coordinate(task: dict[str, Any]) -> str:
    children = http("GET", f"/tasks/{task['id']}/subtasks")["items"]
    if not children:
        return plan(task)
    waiting = [child["title"] for child in children if child["state"] not in FINISHED]
    if waiting:
        return f"waiting for {', '.join(waiting)}"
    http("POST", f"/tasks/{task['id']}/comments", {"body": f"all {len(children)} steps ended"})
    office("task", "done", task["id"])
    return "closed the parent task"


def work(task: dict[str, Any]) -> str:
    http("POST", f"/tasks/{task['id']}/comments", {"body": f"finished {task['title']}"})
    after = office("task", "done", task["id"])
    return f"{task['title']} is {after['state']}"


def main() -> int:
    prompt = sys.stdin.read()
    run_id = os.environ["OFFICE_RUN_ID"]
    prompts = Path(os.environ["PIPELINE_DIR"]) / "prompts"
    prompts.mkdir(parents=True, exist_ok=True)
    (prompts / f"{run_id}.md").write_text(prompt, encoding="utf-8")
    task_id = os.environ.get("OFFICE_TASK_ID", "")
    me = http("GET", f"/agents/{os.environ['OFFICE_AGENT_ID']}")
    if not task_id:
        summary = "taskless wake: nothing to do"
    else:
        task = http("GET", f"/tasks/{task_id}")
        if task["state"] in FINISHED:
            summary = f"task is already {task['state']}"
        elif me["role"] in ("coordinator", "ceo"):
            summary = coordinate(task)
        else:
            summary = work(task)
    print(json.dumps({"status": "ok", "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
