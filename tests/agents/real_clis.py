"""The published agent CLIs the ``real_agents`` tests run, pinned, and how they are installed.

The versions here are the ones the captures under ``tests/fixtures/agents/<cli>/real-<version>-*``
were taken from; ``tests/unit/test_real_captures.py`` (part of ``make test``) fails when a pin
moves without new captures. :func:`install` puts each package into its own folder of a cache
(``$OFFICE_REAL_AGENTS_CACHE``, default ``~/.cache/office-real-agents``) with ``npm install
--prefix``, once; later runs reuse it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pin:
    """One npm package at one version and the executable it installs."""

    package: str
    version: str
    binary: str

    @property
    def spec(self) -> str:
        """``package@version`` as npm takes it."""
        return f"{self.package}@{self.version}"


#: Preset name (or ``claude-code-acp``) → pinned package.
PINS: dict[str, Pin] = {
    "claude": Pin("@anthropic-ai/claude-code", "2.1.332", "claude"),
    "codex": Pin("@openai/codex", "0.171.0", "codex"),
    "gemini": Pin("@google/gemini-cli", "0.61.0", "gemini"),
    "claude-code-acp": Pin("@zed-industries/claude-code-acp", "0.16.2", "claude-code-acp"),
}


def cache_dir() -> Path:
    """Where the pinned packages are installed."""
    configured = os.environ.get("OFFICE_REAL_AGENTS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "office-real-agents"


def bin_dir(pin: Pin) -> Path:
    """The ``node_modules/.bin`` folder of the pinned package's install."""
    return cache_dir() / pin.spec.replace("/", "+") / "node_modules" / ".bin"


def install(names: list[str], *, timeout_s: float = 480) -> dict[str, Path]:
    """Install the named pins (in parallel, only those missing) and return their bin folders.

    Raises:
        RuntimeError: npm is missing or an install failed (with npm's last words).
    """
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed")
    started: dict[str, subprocess.Popen[str]] = {}
    for name in names:
        pin = PINS[name]
        if (bin_dir(pin) / pin.binary).exists():
            continue
        prefix = bin_dir(pin).parents[1]
        prefix.mkdir(parents=True, exist_ok=True)
        started[name] = subprocess.Popen(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), pin.spec],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    for name, proc in started.items():
        _, err = proc.communicate(timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"npm install {PINS[name].spec} failed: {err.strip()[-300:]}")
    return {name: bin_dir(PINS[name]) for name in names}


def registry_reachable() -> str | None:
    """None when npm and its registry answer, else the reason they do not."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "npm/node are not installed"
    ping = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=60, check=False)
    if ping.returncode != 0:
        return f"the npm registry is unreachable: {ping.stderr.strip()[-200:]}"
    return None
