"""Wake notification payloads: when the notified run may first be claimed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from office_scheduler.store.notify import earliest_due, wake_payload


@pytest.mark.parametrize(
    ("payloads", "expected"),
    [
        (["1795993260.250", "1795993258.000"], datetime.fromtimestamp(1795993258, tz=UTC)),
        (["1795993260.250"], datetime(2026, 11, 29, 23, 1, 0, 250000, tzinfo=UTC)),
        (["1795993260.250", ""], None),  # one wake is due now: look now
        (["not a number"], None),  # unreadable: the safe reading is "now"
        (["1e400"], None),
    ],
    ids=["earliest-of-two", "one", "one-due-now", "garbage", "overflow"],
)
def test_earliest_due_of_a_batch(payloads: list[str], expected: datetime | None) -> None:
    assert earliest_due(payloads) == expected


def test_a_payload_is_never_earlier_than_its_instant() -> None:
    due = datetime(2026, 11, 29, 23, 1, 0, 250400, tzinfo=UTC)
    assert wake_payload(due) == "1795993260.251"
    assert earliest_due([wake_payload(due)]) == datetime(2026, 11, 29, 23, 1, 0, 251000, tzinfo=UTC)
    assert wake_payload(due.replace(microsecond=250000)) == "1795993260.250"
    assert wake_payload(None) == ""
