"""The wheel alone: `office init`, `office import` and `office demo` from an installed wheel.

The wheel is built from this checkout (``uv build``, as ``make dist`` does) and installed
with ``--no-deps`` into a new virtualenv that sees this one's site-packages (its
dependencies), not its editable install: the demo office and the sample agent must come
from inside the wheel.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


@pytest.mark.timeout(420)
def test_an_installed_wheel_inits_imports_and_runs_the_demo(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFICE_")}
    env.pop("VIRTUAL_ENV", None)
    _run(
        [
            str(BIN / "uv"),
            "build",
            "--quiet",
            "--wheel",
            "--out-dir",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        env,
        240,
    )
    (wheel,) = (tmp_path / "dist").glob("office_scheduler-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env, 60)
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    (purelib / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run(
        [
            str(BIN / "uv"),
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--python",
            str(venv / "bin" / "python"),
            str(wheel),
        ],
        env,
        120,
    )
    office = str(venv / "bin" / "office")
    env["OFFICE_HOME"] = str(tmp_path / "home")

    where = _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import office_scheduler; print(office_scheduler.__file__)",
        ],
        env,
        60,
    )
    init = _run([office, "init", str(tmp_path / "o")], env, 60)
    imported = _run([office, "import", str(tmp_path / "o"), "--yes"], env, 120)
    demo = _run([office, "demo", "--exit-when-idle"], env, 200)

    assert where.stdout.strip().startswith(str(purelib))
    assert "using the sample agent" in init.stdout
    assert "Applied." in imported.stdout
    assert "The demo office finished its task." in demo.stdout
    assert oct((tmp_path / "home").stat().st_mode & 0o777) == "0o700"
