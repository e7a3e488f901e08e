"""The stall rule's bookkeeping, retry notices, model turns and cleaned failure messages."""

from __future__ import annotations

import json

import pytest

from office_scheduler.error_text import strip_ansi
from office_scheduler.executors.messages import clean_message
from office_scheduler.executors.parsers import ResultAccumulator, parse_result_line
from office_scheduler.executors.stall import (
    StallWatch,
    classify_line,
    is_model_turn,
    is_retry_notice,
)

CLAUDE_RETRY = {
    "type": "system",
    "subtype": "api_retry",
    "attempt": 3,
    "max_retries": 10,
    "retry_delay_ms": 2388,
    "error_status": 529,
    "error": "overloaded",
    "session_id": "s-1",
}
CODEX_RECONNECT = {"type": "error", "message": "Reconnecting... 2/5 (stream disconnected)"}
GEMINI_RETRY_TEXT = "Attempt 2 failed. Retrying with backoff... Error: fetch failed"


@pytest.mark.parametrize(
    "obj",
    [CLAUDE_RETRY, CODEX_RECONNECT, {"type": "retry", "attempt": 1, "max_attempts": 3}],
)
def test_retry_notices_are_not_errors(obj: dict[str, object]) -> None:
    assert is_retry_notice(obj)
    parsed = parse_result_line(obj)
    assert parsed.is_error is False


def test_a_retry_notice_never_becomes_the_verdict() -> None:
    acc = ResultAccumulator()
    acc.add({"type": "system", "subtype": "init", "session_id": "s-1"})
    acc.add(CLAUDE_RETRY)

    verdict = acc.verdict()

    assert verdict is not None
    assert verdict.is_error is False
    assert acc.session_id == "s-1"


def test_codex_fatal_error_is_still_an_error() -> None:
    assert not is_retry_notice({"type": "error", "message": "unexpected status 401"})
    assert parse_result_line({"type": "error", "message": "unexpected status 401"}).is_error


@pytest.mark.parametrize(
    ("obj", "turn"),
    [
        ({"type": "assistant", "message": {"content": []}}, True),
        (
            {"type": "assistant", "error": "authentication_failed", "is_api_error_message": True},
            False,
        ),
        ({"type": "turn.completed", "usage": {}}, True),
        ({"type": "item.completed", "item": {"type": "agent_message", "text": "hi"}}, True),
        ({"type": "item.completed", "item": {"type": "error", "message": "Falling back"}}, False),
        ({"type": "message", "role": "assistant", "content": "hi"}, True),
        ({"type": "message", "role": "user", "content": "hi"}, False),
        ({"type": "result", "status": "success"}, True),
        ({"type": "result", "subtype": "success", "is_error": True}, False),
        ({"type": "system", "subtype": "init", "session_id": "s"}, False),
        ({"status": "ok", "summary": "done"}, True),
    ],
)
def test_model_turns(obj: dict[str, object], turn: bool) -> None:
    assert is_model_turn(obj) is turn


def test_line_classes() -> None:
    assert classify_line("stdout", json.dumps(CLAUDE_RETRY))[0] == "retry"
    assert classify_line("stdout", json.dumps(CODEX_RECONNECT)) == (
        "retry",
        "Reconnecting... 2/5 (stream disconnected)",
    )
    assert classify_line("stderr", GEMINI_RETRY_TEXT) == ("retry", GEMINI_RETRY_TEXT)
    codex_log = (
        "2026-12-03T19:21:15.025134Z ERROR codex_api::endpoint::responses_websocket: "
        "failed to connect to Responses WebSocket stage=Unknown"
    )
    assert classify_line("stderr", codex_log)[0] == "retry"
    frame = "    at async retryWithBackoff (file:///x.js:1:2)"
    assert classify_line("stderr", frame) == (
        "noise",
        None,
    )
    assert classify_line("stdout", '{"type":"item.completed","item":{"type":"agent_message"}}') == (
        "progress",
        None,
    )
    assert classify_line("stderr", "Ripgrep is not available.") == ("progress", None)


def test_stall_needs_only_notices_for_the_whole_limit() -> None:
    watch = StallWatch(300.0, now=0.0)
    assert watch.deadline() is None
    watch.line("stdout", json.dumps(CODEX_RECONNECT), now=10.0)
    assert watch.deadline() == 300.0  # counted from the last progress (the start)
    watch.line("stderr", "    at frame (x.js:1:1)", now=200.0)  # noise keeps the clock
    assert not watch.stalled(299.9)
    watch.line("stdout", '{"type":"item.completed","item":{"type":"reasoning"}}', now=250.0)
    assert watch.deadline() is None  # real progress: nothing pending
    watch.line("stderr", GEMINI_RETRY_TEXT, now=260.0)
    assert not watch.stalled(549.9)
    assert watch.stalled(550.0)
    assert watch.last_notice == GEMINI_RETRY_TEXT


def test_ansi_and_temp_folder_advice_are_removed() -> None:
    text = (
        "Warning: 256-color support not detected.\n"
        "Security Warning: Skipping system defaults file '/tmp/office-run-x/g.json': Parent "
        "directory '/tmp' is insecure: ... To fix this, run: sudo chmod g-w,o-w \"/tmp\"\n"
        "\x1b[31mPlease set an Auth method in your settings.json\x1b[0m\n"
        "    at main (file:///gemini.js:1:1)\n"
    )

    cleaned = clean_message(text, temp_dirs=("/tmp/office-run-x",))

    assert cleaned == "Please set an Auth method in your settings.json"


def test_the_first_error_line_leads() -> None:
    text = (
        "WARNING: proceeding, even though we could not create PATH aliases: Refusing to "
        'create helper binaries under temporary dir "/tmp"\n'
        "some context\n"
        "Error: thread/resume failed: no rollout found for thread id x"
    )

    assert clean_message(text).splitlines() == [
        "Error: thread/resume failed: no rollout found for thread id x",
        "some context",
    ]


def test_cleaning_never_empties_a_message() -> None:
    assert clean_message("\x1b[33mRipgrep is not available.\x1b[0m") == "Ripgrep is not available."
    assert strip_ansi("\x1b]0;title\x07plain\x1b[1;31m!") == "plain!"
