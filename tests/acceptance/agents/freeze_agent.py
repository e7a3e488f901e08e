"""An agent for the leader-freeze test: its first session of a run lasts until it is killed.

It hides from the scan for orphaned agents (it re-executes itself without
``OFFICE_SESSION_ID``), as an agent on another machine would be out of the other node's
reach: only the scheduler process that launched it can stop it. Every start is recorded as
``FREEZE_DIR/starts/<run_id>-<n>`` holding its pid; a run's second session succeeds at once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

SESSION_VARIABLE = "OFFICE_SESSION_ID"


def main() -> int:
    if SESSION_VARIABLE in os.environ:
        env = dict(os.environ)
        env["FREEZE_SESSION_ID"] = env.pop(SESSION_VARIABLE)
        os.execve(sys.executable, [sys.executable, __file__], env)
    starts = Path(os.environ["FREEZE_DIR"]) / "starts"
    run_id = os.environ["OFFICE_RUN_ID"]
    attempt = len(list(starts.glob(f"{run_id}-*"))) + 1
    (starts / f"{run_id}-{attempt}").write_text(str(os.getpid()))
    sys.stdin.read()
    if attempt == 1:
        time.sleep(600)  # the frozen node's session: stopped by its own node only
    print(json.dumps({"status": "ok", "summary": f"attempt {attempt}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
