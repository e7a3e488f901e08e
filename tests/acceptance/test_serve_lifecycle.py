"""``office serve`` lifecycle: signals, one scheduler per SQLite file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from server_harness import Server


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_serve_cleanly_with_exit_0(tmp_path: Path, signum: int) -> None:
    server = Server(tmp_path / "home")
    code, out, err = server.stop(signum)
    assert code == 0, err
    assert "office stopped" in err
    assert "Traceback" not in err + out


def test_second_serve_on_the_same_sqlite_file_refuses_and_says_why(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = Server(home)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
        second = subprocess.run(
            [sys.executable, "-m", "office_scheduler", "serve", "--port", "0"],
            env={**env, "OFFICE_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        code, _, err = first.stop()
    assert code == 0, err
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert lines[-1].startswith("office: another scheduler already runs against")
    assert "use PostgreSQL to scale out" in lines[-1]
    assert "Traceback" not in second.stderr


def test_restart_after_clean_stop_serves_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, _, err = Server(home).stop()
    assert code == 0, err
    again = Server(home)
    assert again.token_line == ""  # the admin token is minted once
    code, _, err = again.stop()
    assert code == 0, err
