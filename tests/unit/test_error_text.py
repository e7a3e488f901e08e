"""The cleaned first error line shown on cards, inbox items and run pages."""

from __future__ import annotations

from pathlib import Path

from office_scheduler.error_text import FALLBACK, first_error_line, strip_ansi

CLAUDE = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "claude"


def test_ansi_codes_and_blank_lines_are_dropped() -> None:
    text = "\n\x1b[31mError:\x1b[0m \x1b]0;title\x07Invalid API key\nmore\n"

    assert first_error_line(text) == "Error: Invalid API key"
    assert strip_ansi("\x1b[1;32mok\x1b[0m") == "ok"


def test_stream_json_noise_is_skipped_and_the_error_result_read() -> None:
    captured = (CLAUDE / "success.jsonl").read_text() + (CLAUDE / "auth.jsonl").read_text()

    assert first_error_line(captured) == "Invalid API key · Please run /login"


def test_error_objects_and_long_lines() -> None:
    assert first_error_line('{"type":"error","error":{"message":"overloaded"}}') == "overloaded"
    assert first_error_line("x" * 500, limit=20) == "x" * 19 + "…"
    assert first_error_line("") == FALLBACK
    assert first_error_line(None) == FALLBACK
    assert first_error_line('{"type":"system"}\n') == FALLBACK
