"""An agent for the attempt-fencing test (``test_attempt_fencing.py``).

The run's first session leaves a zombie behind: a detached process holding the session's
run token, outside the session's process group and without ``OFFICE_SESSION_ID`` (as an
agent on another machine would be, out of reach of the orphan killer). The zombie waits
until the test writes the URL of a live server into ``$FENCE_DIR/go``, then calls
``office task done`` with the old token and writes what happened to ``late.json``. The
first session itself waits until its node dies.

A later session (the run's next attempt) moves the task to IN_REVIEW with its own token,
writes ``second.json`` and ends once the test writes ``$FENCE_DIR/release``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: Generous: the machine may be slow; the test bounds the whole with its own deadlines.
WAIT_S = 600


def _wait_for(path: Path) -> str:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.1)
    return path.read_text().strip()


def _write(path: Path, data: dict[str, object]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


def _office(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "office_scheduler", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def zombie(fence: Path, task_id: str) -> None:
    """The first session's leftover: a late ``office task done`` with its old token."""
    url = _wait_for(fence / "go")
    result = _office("task", "done", task_id, env={**os.environ, "OFFICE_API_URL": url})
    _write(fence / "late.json", result)


def main() -> None:
    fence = Path(os.environ["FENCE_DIR"])
    task_id = os.environ["OFFICE_TASK_ID"]
    if len(sys.argv) > 1 and sys.argv[1] == "zombie":
        zombie(fence, task_id)
        return
    sys.stdin.read()
    try:
        os.close(os.open(fence / "first.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        result = _office("task", "update", task_id, "--state", "IN_REVIEW")
        _write(fence / "second.json", {**result, "run_id": os.environ["OFFICE_RUN_ID"]})
        _wait_for(fence / "release")
        print(json.dumps({"status": "ok", "summary": "moved the task to review"}))
        return
    env = {k: v for k, v in os.environ.items() if k != "OFFICE_SESSION_ID"}
    left = subprocess.Popen(
        [sys.executable, __file__, "zombie"],
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _write(
        fence / "first.json",
        {"pid": os.getpid(), "zombie": left.pid, "run_id": os.environ["OFFICE_RUN_ID"]},
    )
    time.sleep(WAIT_S)  # its node is killed meanwhile, and the orphan killer ends it


if __name__ == "__main__":
    main()
