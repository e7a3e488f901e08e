"""The demo's "Try:" hint names an ``office`` command that works from the user's shell."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from office_scheduler.cli.demo import _office_command


def test_the_hint_uses_the_virtualenv_path_when_office_is_not_on_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _office_command() == str(Path(sys.executable).parent / "office")


def test_the_hint_uses_the_bare_name_when_path_finds_this_office(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    assert _office_command() == "office"
