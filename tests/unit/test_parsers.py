from __future__ import annotations

import json
from typing import Any

import pytest

from office_scheduler.domain.execution import Usage
from office_scheduler.domain.status import ErrorFamily
from office_scheduler.executors.parsers import (
    MAX_COST_USD,
    MAX_TOKENS,
    MESSAGE_LIMIT,
    ParsedResult,
    ResultAccumulator,
    parse_result_line,
)
from office_scheduler.executors.presets import is_lost_session

CASES: list[tuple[str, dict[str, Any], ParsedResult]] = [
    (
        "claude success",
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "Done: fixed the bug.",
            "session_id": "3f1c-uuid",
            "total_cost_usd": 0.0123,
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": 5,
                "cache_read_input_tokens": 100,
                "output_tokens": 42,
            },
        },
        ParsedResult(
            message="Done: fixed the bug.",
            session_id="3f1c-uuid",
            usage=Usage(input_tokens=115, output_tokens=42, cost_subcents=123, priced=True),
        ),
    ),
    (
        "claude modelUsage wins over top-level usage",
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "ok",
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "modelUsage": {
                "claude-sonnet": {
                    "inputTokens": 100,
                    "outputTokens": 20,
                    "cacheReadInputTokens": 50,
                    "cacheCreationInputTokens": 0,
                    "costUSD": 0.01,
                },
                "claude-haiku": {"inputTokens": 10, "outputTokens": 2, "costUSD": 0.001},
            },
        },
        ParsedResult(
            message="ok",
            usage=Usage(input_tokens=160, output_tokens=22, cost_subcents=110, priced=True),
        ),
    ),
    (
        "claude is_error on resume of unknown session",
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "result": "No conversation found with session ID: abc",
            "session_id": "new-id",
        },
        ParsedResult(
            is_error=True,
            message="No conversation found with session ID: abc",
            session_id="new-id",
        ),
    ),
    (
        "claude error subtype without text",
        {"type": "result", "subtype": "error_max_turns", "is_error": False, "num_turns": 3},
        ParsedResult(
            is_error=True,
            message="error_max_turns: the agent reached its maximum number of turns (3 turns)",
            error_family=ErrorFamily.TIMEOUT,
        ),
    ),
    (
        "claude errors list",
        {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "errors": ["first", {"message": "second"}],
        },
        ParsedResult(is_error=True, message="first; second"),
    ),
    (
        "claude rate limit",
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "result": "API Error: 429 rate limit exceeded",
        },
        ParsedResult(
            is_error=True,
            message="API Error: 429 rate limit exceeded",
            error_family=ErrorFamily.RATE_LIMIT,
        ),
    ),
    (
        "claude login required",
        {"type": "result", "is_error": True, "result": "Invalid API key · Please run /login"},
        ParsedResult(
            is_error=True,
            message="Invalid API key · Please run /login",
            error_family=ErrorFamily.AUTH,
        ),
    ),
    (
        "claude init line",
        {"type": "system", "subtype": "init", "session_id": "sess-1", "model": "x"},
        ParsedResult(session_id="sess-1"),
    ),
    (
        "codex thread.started",
        {"type": "thread.started", "thread_id": "th_abc"},
        ParsedResult(session_id="th_abc"),
    ),
    (
        "codex turn.completed",
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 500, "cached_input_tokens": 400, "output_tokens": 30},
        },
        ParsedResult(usage=Usage(input_tokens=500, output_tokens=30, priced=False)),
    ),
    (
        "codex agent message",
        {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "hi"}},
        ParsedResult(message="hi"),
    ),
    (
        "codex turn.failed",
        {"type": "turn.failed", "error": {"message": "model at capacity"}},
        ParsedResult(is_error=True, message="model at capacity"),
    ),
    (
        "codex error event",
        {"type": "error", "message": "stream disconnected: 429 Too Many Requests"},
        ParsedResult(
            is_error=True,
            message="stream disconnected: 429 Too Many Requests",
            error_family=ErrorFamily.RATE_LIMIT,
        ),
    ),
    (
        "gemini json success",
        {
            "session_id": "g-1",
            "response": "The answer.",
            "stats": {
                "models": {
                    "gemini-2.5-pro": {"tokens": {"prompt": 70, "candidates": 8, "thoughts": 2}},
                }
            },
        },
        ParsedResult(
            message="The answer.",
            session_id="g-1",
            usage=Usage(input_tokens=70, output_tokens=10, model="gemini-2.5-pro", priced=False),
        ),
    ),
    (
        "gemini json flat stats",
        {"response": "x", "stats": {"inputTokens": 12, "outputTokens": 8}},
        ParsedResult(message="x", usage=Usage(input_tokens=12, output_tokens=8, priced=False)),
    ),
    (
        "gemini json auth error",
        {
            "session_id": "g-2",
            "error": {"type": "Error", "message": "Please set an Auth method", "code": 41},
        },
        ParsedResult(
            is_error=True,
            message="Please set an Auth method",
            session_id="g-2",
            error_family=ErrorFamily.AUTH,
        ),
    ),
    (
        "gemini stream result",
        {"type": "result", "status": "success", "stats": {"input_tokens": 5, "output_tokens": 6}},
        ParsedResult(usage=Usage(input_tokens=5, output_tokens=6, priced=False)),
    ),
    (
        "gemini stream result error",
        {"type": "result", "status": "error", "error": {"message": "quota"}},
        ParsedResult(is_error=True, message="quota"),
    ),
    (
        "generic ok",
        {"status": "ok", "summary": "all good", "session_id": "s"},
        ParsedResult(message="all good", session_id="s"),
    ),
    (
        "generic error status",
        {"status": "error", "message": "could not push"},
        ParsedResult(is_error=True, message="could not push"),
    ),
    (
        "generic error string",
        {"error": "boom"},
        ParsedResult(is_error=True, message="boom"),
    ),
    (
        "generic error without text",
        {"status": "failed"},
        ParsedResult(is_error=True, message="failed"),
    ),
    (
        "generic cost_usd",
        {"status": "ok", "usage": {"input_tokens": 3, "output_tokens": 4}, "cost_usd": 1.5},
        ParsedResult(
            usage=Usage(input_tokens=3, output_tokens=4, cost_subcents=15000, priced=True)
        ),
    ),
    ("null error is no error", {"error": None, "result": "r"}, ParsedResult(message="r")),
    ("unknown object", {"foo": 1}, ParsedResult()),
    (
        "junk values are ignored",
        {
            "session_id": 5,
            "usage": {"input_tokens": "ten", "output_tokens": True},
            "total_cost_usd": "free",
        },
        ParsedResult(),
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_result_line(obj: dict[str, Any], expected: ParsedResult) -> None:
    assert parse_result_line(obj) == expected


def test_message_is_capped() -> None:
    parsed = parse_result_line({"status": "error", "message": "x" * (MESSAGE_LIMIT * 2)})
    assert len(parsed.message) == MESSAGE_LIMIT


def test_accumulator_folds_codex_stream() -> None:
    acc = ResultAccumulator()
    lines: list[dict[str, Any]] = [
        {"type": "thread.started", "thread_id": "th_1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "Fixed it."}},
        {"type": "turn.completed", "usage": {"input_tokens": 9, "output_tokens": 3}},
    ]
    for line in lines:
        acc.add(line)
    assert acc.session_id == "th_1"
    assert acc.usage == Usage(input_tokens=9, output_tokens=3, priced=False)
    assert acc.summary == "Fixed it."
    assert acc.last == ParsedResult(usage=Usage(input_tokens=9, output_tokens=3, priced=False))


def test_accumulator_keeps_latest_session_and_usage() -> None:
    acc = ResultAccumulator()
    acc.add({"type": "system", "subtype": "init", "session_id": "a"})
    acc.add({"type": "assistant", "message": {"content": []}})
    acc.add({"type": "result", "is_error": False, "result": "r", "session_id": "b"})
    assert acc.session_id == "b"
    assert acc.usage == Usage()
    assert acc.summary == "r"


@pytest.mark.parametrize(
    "line",
    [
        '{"type": "result", "total_cost_usd": NaN, "usage": {"input_tokens": 5}}',
        '{"type": "result", "total_cost_usd": Infinity, "usage": {"input_tokens": 5}}',
        '{"type": "result", "total_cost_usd": -Infinity, "usage": {"input_tokens": 5}}',
        '{"type": "result", "usage": {"input_tokens": 1e400, "output_tokens": NaN}}',
        '{"modelUsage": {"m": {"inputTokens": Infinity, "costUSD": NaN}}}',
        '{"stats": {"models": {"g": {"tokens": {"prompt": -Infinity}}}}}',
    ],
)
def test_non_finite_numbers_count_as_missing(line: str) -> None:
    parsed = parse_result_line(json.loads(line))

    assert parsed.usage.cost_subcents == 0
    assert parsed.usage.input_tokens in (0, 5)
    assert parsed.usage.output_tokens == 0


def test_token_counts_are_clamped_to_zero_and_a_trillion() -> None:
    obj = {"usage": {"input_tokens": -500, "output_tokens": 10**23}, "total_cost_usd": 1e300}

    usage = parse_result_line(obj).usage

    assert (usage.input_tokens, usage.output_tokens) == (0, MAX_TOKENS)
    assert MAX_TOKENS == 10**12
    assert usage.cost_subcents == round(MAX_COST_USD * 10000)


def test_summed_model_usage_is_clamped_too() -> None:
    entry = {"inputTokens": 10**12, "outputTokens": 10**12, "costUSD": 1e8}
    usage = parse_result_line({"modelUsage": {"a": entry, "b": entry}}).usage

    assert (usage.input_tokens, usage.output_tokens) == (MAX_TOKENS, MAX_TOKENS)
    assert usage.cost_subcents == round(MAX_COST_USD * 10000)


@pytest.mark.parametrize(
    ("text", "lost"),
    [
        ("No conversation found with session ID: 5d3a-prior", True),
        ("ERROR: No saved session found with ID 0199a213. Run `codex resume`", True),
        ("Error: thread/resume failed: no rollout found for thread id 0199 (code -32600)", True),
        ('Error resuming session: Invalid session identifier "abc".', True),
        ("Error: session not found", True),
        ("rate limit exceeded", False),
        ("No conversation yet", False),
    ],
)
def test_lost_session_texts_of_the_clis(text: str, lost: bool) -> None:
    assert is_lost_session(text) is lost
