"""A misbehaving agent for the chaos test: succeeds, fails, rate-limits, hangs or crashes.

It takes two exclusive, non-blocking locks for as long as it lives: one per agent slot
(``agent-<id>.lock``) and one per run (``run-<id>.lock``). The kernel drops them when the
process dies, even by SIGKILL, so a failed lock is proof that two sessions of one agent (or
of one run) were alive at once; it is written to ``violations.log``. Every start is
appended to ``starts.log`` as ``<run_id> <agent_id> <pid>``.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import sys
import time
from pathlib import Path

ROOT = Path(os.environ["CHAOS_DIR"])


def _lock(name: str) -> object:
    handle = (ROOT / "locks" / name).open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with (ROOT / "violations.log").open("a") as log:
            log.write(f"{name} {os.getpid()}\n")
    return handle


def main() -> int:
    run_id = os.environ["OFFICE_RUN_ID"]
    agent_id = os.environ["OFFICE_AGENT_ID"]
    held = [_lock(f"agent-{agent_id}.lock"), _lock(f"run-{run_id}.lock")]
    with (ROOT / "starts.log").open("a") as log:
        log.write(f"{run_id} {agent_id} {os.getpid()}\n")
    sys.stdin.read()
    roll = random.random()
    time.sleep(random.uniform(0.0, 0.15))
    if roll < 0.08:
        print("error: the tool call failed", file=sys.stderr)
        return 1
    if roll < 0.13:
        print("429 Too Many Requests: rate limit exceeded, retry-after: 1", file=sys.stderr)
        return 1
    if roll < 0.16:
        time.sleep(600)  # hangs until the executor's timeout kills it
    if roll < 0.20:
        os.kill(os.getpid(), signal.SIGKILL)
    print('{"status": "ok", "summary": "done"}')
    del held
    return 0


if __name__ == "__main__":
    sys.exit(main())
