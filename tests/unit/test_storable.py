"""Agent text and JSON made storable (``pipeline/storable.py``)."""

from __future__ import annotations

import json

from office_scheduler.domain.execution import Outcome, Usage
from office_scheduler.domain.status import OutcomeStatus
from office_scheduler.pipeline.storable import (
    MAX_DATA_CHARS,
    MAX_DATA_STRING,
    cap_event_data,
    clean_json,
    clean_text,
    short_error,
    storable_outcome,
)


def test_nul_and_lone_surrogates_are_removed_everywhere() -> None:
    value = {"a\x00b": ["x\x00y", "\ud800z", 1.5, float("nan"), float("inf"), True, None, (1,)]}

    assert clean_json(value) == {"ab": ["xy", "z", 1.5, None, None, True, None, [1]]}
    assert clean_text("ok \U0001f600") == "ok \U0001f600"  # a proper pair survives


def test_event_data_strings_and_size_are_capped() -> None:
    capped = cap_event_data({"title": "T" * 1_000_000, "n": 3})
    assert capped["n"] == 3
    assert capped["title"].startswith("T" * MAX_DATA_STRING)
    assert len(capped["title"]) < MAX_DATA_STRING + 40

    many = cap_event_data({"entries": [{"content": "c" * 3000} for _ in range(100)]})
    assert many["truncated"] is True
    assert len(many["entries"]) == 20
    assert len(json.dumps(many)) <= MAX_DATA_CHARS

    wide = cap_event_data({f"k{i}": "v" * 3000 for i in range(500)})
    assert wide["truncated"] is True
    assert len(json.dumps(wide)) <= MAX_DATA_CHARS


def test_database_error_text_keeps_class_and_message_only() -> None:
    text = (
        "internal error: (psycopg.DataError) PostgreSQL text fields cannot contain NUL "
        "(0x00) bytes\n[SQL: INSERT INTO run_events (run_id, kind) VALUES (%(run_id)s)]\n"
        "[parameters: {'run_id': 7, 'message': 'secret'}]\n"
        "(Background on this error at: https://sqlalche.me/e/20/9h9h)"
    )

    assert short_error(text) == (
        "internal error: (psycopg.DataError) PostgreSQL text fields cannot contain NUL (0x00) bytes"
    )
    assert short_error("plain\x00 failure") == "plain failure"
    assert short_error(None) is None


def test_an_outcome_is_made_storable() -> None:
    outcome = Outcome(
        status=OutcomeStatus.FAILED,
        message="bad\x00",
        result={"x": "\x00", "cost": float("nan")},
        external_session_id="s\x00id",
        usage=Usage(model="m\x00"),
    )

    cleaned = storable_outcome(outcome)

    assert cleaned.message == "bad"
    assert cleaned.result == {"x": "", "cost": None}
    assert cleaned.external_session_id == "sid"
    assert cleaned.usage.model == "m"
