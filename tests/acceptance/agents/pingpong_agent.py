"""A scripted agent that answers every comment with a comment on its partner's task.

Run by the ``command`` executor; it acts only through the HTTP API with its run token. A
run woken by a comment posts "your turn" on the other open task titled ``ping-pong …``
(the partner's); any other run (its assignment) does nothing. Once the file
``$PINGPONG_DIR/stop`` exists it stops answering. The last stdout line is the JSON result.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any


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


def main() -> None:
    run = http("GET", f"/runs/{os.environ['OFFICE_RUN_ID']}")
    stop = Path(os.environ["PINGPONG_DIR"]) / "stop"
    summary = "nothing to answer"
    if run["source"] == "comment" and not stop.exists():
        mine = os.environ["OFFICE_TASK_ID"]
        tasks = http("GET", f"/workspaces/{os.environ['OFFICE_WORKSPACE_ID']}/tasks")["items"]
        other = next(t for t in tasks if t["title"].startswith("ping-pong") and t["id"] != mine)
        http("POST", f"/tasks/{other['id']}/comments", {"body": f"your turn (run {run['id']})"})
        summary = f"pinged task {other['id']}"
    print(json.dumps({"status": "ok", "summary": summary}))


if __name__ == "__main__":
    main()
