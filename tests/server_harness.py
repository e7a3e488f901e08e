"""``office serve`` as a real process, for acceptance tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


class Server:
    """``office serve`` as a real process on a free port."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "office_scheduler", "serve", "--port", "0", *args],
            env={**base, **(env or {}), "OFFICE_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.token_line = ""
        self.serving_line = self.proc.stdout.readline()
        if self.serving_line.startswith("Admin token"):  # only on the first start
            self.token_line, self.serving_line = self.serving_line, self.proc.stdout.readline()
        if "API at " not in self.serving_line:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
            raise RuntimeError(f"office serve did not start: {self.serving_line!r} {err}")
        self.url = self.serving_line.split("API at ")[1].split(",")[0]

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str, str]:
        self.proc.send_signal(signum)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err
