"""Recorded-format output of Claude Code, Codex and Gemini CLI, folded like the executor does.

Each file under ``tests/fixtures/agents/<cli>/`` is one session's stdout, written from the
CLI's documented format (``.jsonl``: one JSON object per line; ``.json``: Gemini's single
``--output-format json`` object). ``expected.json`` next to them states what the session
means: success or failure, message, error family, session id, usage and, for rate limits,
the reset the retry planner reads from the message at :data:`NOW`.

Files named ``real-<version>-<case>`` are captures of the published CLIs (replayed through the
executor by ``test_real_captures.py``); a capture of a CLI retrying the network folds to no
error, since its retry notices are not failures: the stall rule ends such a session.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from office_scheduler.domain.status import ErrorFamily
from office_scheduler.executors.parsers import ResultAccumulator
from office_scheduler.retry import parse_reset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SESSIONS = sorted(
    path
    for path in FIXTURES.glob("*/*")
    if path.suffix in (".json", ".jsonl") and path.stem != "expected"
)


def fold(path: Path) -> ResultAccumulator:
    """Feed a fixture's objects to an accumulator in output order."""
    acc = ResultAccumulator()
    if path.suffix == ".json":
        acc.add(json.loads(path.read_text(encoding="utf-8")))
        return acc
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            acc.add(json.loads(line))
    return acc


def meaning(acc: ResultAccumulator) -> dict[str, Any]:
    """What the executor would report for the folded session."""
    verdict = acc.verdict()
    assert verdict is not None
    family = verdict.error_family
    reset = parse_reset(verdict.message, NOW) if family is ErrorFamily.RATE_LIMIT else None
    usage = acc.usage
    return {
        "ok": not verdict.is_error,
        "message": verdict.message if verdict.is_error else acc.summary,
        "family": None if family is None else family.value,
        "session_id": acc.session_id,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_subcents": usage.cost_subcents,
            "priced": usage.priced,
            "model": usage.model,
        },
        "reset": None if reset is None else reset.isoformat().replace("+00:00", "Z"),
    }


def expected_for(path: Path) -> dict[str, Any]:
    table = json.loads((path.parent / "expected.json").read_text(encoding="utf-8"))
    assert path.name in table, f"{path} has no entry in expected.json"
    entry: dict[str, Any] = table[path.name]
    return entry


def test_every_cli_has_fixtures() -> None:
    clis = {path.parent.name for path in SESSIONS}
    assert clis == {"claude", "codex", "gemini"}
    for cli in clis:
        table = json.loads((FIXTURES / cli / "expected.json").read_text(encoding="utf-8"))
        assert sorted(table) == sorted(p.name for p in SESSIONS if p.parent.name == cli)


@pytest.mark.parametrize("path", SESSIONS, ids=[f"{p.parent.name}/{p.name}" for p in SESSIONS])
def test_fixture_means_what_expected_says(path: Path) -> None:
    assert meaning(fold(path)) == expected_for(path)
