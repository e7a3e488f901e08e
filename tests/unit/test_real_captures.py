"""What the published agent CLIs really print, replayed through the ``command`` executor.

``tests/fixtures/agents/<cli>/real-<version>-<case>.{jsonl,stderr}`` are captures of the CLIs
pinned in ``tests/agents/real_clis.py`` (stdout and stderr, taken offline and without
credentials; ``real_captures.json`` says how each was taken, its exit status and what the
session must end as). A fake CLI prints a capture and exits with its status, or, for a
capture of an endless retry loop, keeps repeating its last line; the outcome's family,
cleaned message and session id are checked. The captures' versions must be the pinned ones,
so moving a pin without capturing again fails here.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agents.real_clis import PINS
from office_scheduler.domain.execution import Launch
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.executors.command import CommandExecutor
from office_scheduler.executors.presets import is_lost_session

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
MANIFEST: dict[str, dict[str, Any]] = json.loads(
    (FIXTURES / "real_captures.json").read_text(encoding="utf-8")
)
_NAME = re.compile(r"^real-(?P<version>\d+\.\d+\.\d+)-[a-z0-9-]+$")


class Sink:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    async def started(self, pid: int) -> None:
        pass

    async def output(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))


def test_captures_are_of_the_pinned_versions() -> None:
    captured = {
        path.parent.name + "/" + path.stem
        for path in FIXTURES.glob("*/real-*")
        if path.suffix in (".jsonl", ".stderr")
    }
    assert captured == set(MANIFEST)
    for key in MANIFEST:
        cli, name = key.split("/")
        match = _NAME.match(name)
        assert match is not None, key
        assert match["version"] == PINS[cli].version, f"{key}: capture again for the new pin"


def replayer(path: Path, key: str, case: dict[str, Any]) -> Path:
    """A fake CLI printing the capture ``key`` (then looping or exiting like the real one)."""
    stdout = FIXTURES / f"{key}.jsonl"
    stderr = FIXTURES / f"{key}.stderr"
    script = path / "cli"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import os, sys, time
            def read(p):
                return open(p, encoding="utf-8").read() if os.path.exists(p) else ""
            out, err = read({str(stdout)!r}), read({str(stderr)!r})
            sys.stdout.write(out); sys.stdout.flush()
            sys.stderr.write(err); sys.stderr.flush()
            loop, code = {case.get("loop")!r}, {case["exit_code"]!r}
            if loop is None:
                sys.exit(code)
            stream = sys.stdout if loop == "stdout" else sys.stderr
            last = (out if loop == "stdout" else err).rstrip("\\n").split("\\n")[-1]
            while True:
                stream.write(last + "\\n"); stream.flush()
                time.sleep(0.05)
            """
        )
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("key", sorted(MANIFEST))
async def test_real_capture_ends_as_recorded(tmp_path: Path, key: str) -> None:
    case = MANIFEST[key]
    script = replayer(tmp_path, key, case)
    launch = Launch(
        run_id=1,
        agent_id="ag_1",
        task_id="tk_1",
        workspace_id="ws_1",
        prompt="say hi",
        # The loop cases end by the stall rule; the wall clock is a mere backstop.
        config=ExecutorConfig(
            name="cli",
            argv=(str(script),),
            timeout_s=50,
            inactivity_timeout_s=50,
            stall_timeout_s=0.3,
        ),
        env={"PATH": os.environ.get("PATH", "")},
        cwd=str(tmp_path),
    )

    outcome = await CommandExecutor(kill_grace_s=0.5).run(launch, Sink())

    assert outcome.error_family is not None
    assert outcome.error_family.value == case["family"], outcome.message
    assert outcome.message == case["message"]
    assert outcome.external_session_id == case["session_id"]
    assert "\x1b" not in outcome.message
    assert "sudo" not in outcome.message
    assert is_lost_session(outcome.message) is bool(case.get("lost_session"))
