"""Webhook authentication of hostile header values (pure, no server)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from office_scheduler.domain.errors import AuthError
from office_scheduler.domain.routines import SigningMode
from office_scheduler.routines.webhooks import sign, verify

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SECRET = "s3cret-value"
BODY = b'{"branch": "main"}'


def _signed_headers(**overrides: str) -> dict[str, str]:
    stamp = int(NOW.timestamp())
    headers = {
        "x-signature-256": sign(SECRET, stamp, BODY),
        "x-signature-timestamp": str(stamp),
    }
    headers.update(overrides)
    return headers


def test_a_correct_signature_is_accepted_and_returned() -> None:
    headers = _signed_headers()
    assert verify(SigningMode.HMAC_SHA256, SECRET, headers, BODY, NOW) == headers["x-signature-256"]


@pytest.mark.parametrize("value", ["sha256=caf\u00e9", "\u00ff" * 71, "sha256=\u00e9"])
def test_a_non_ascii_signature_is_a_mismatch_not_a_crash(value: str) -> None:
    with pytest.raises(AuthError, match="signature does not match"):
        verify(
            SigningMode.HMAC_SHA256,
            SECRET,
            _signed_headers(**{"x-signature-256": value}),
            BODY,
            NOW,
        )


@pytest.mark.parametrize("stamp", ["\u0661\u0662\u0663", "\u00b2", "12\u00e93"])
def test_a_non_ascii_timestamp_is_malformed(stamp: str) -> None:
    with pytest.raises(AuthError, match="malformed X-Signature-Timestamp"):
        verify(
            SigningMode.HMAC_SHA256,
            SECRET,
            _signed_headers(**{"x-signature-timestamp": stamp}),
            BODY,
            NOW,
        )


def test_a_non_ascii_bearer_token_is_a_mismatch() -> None:
    headers = {"authorization": "Bearer s3cret-v\u00e4lue"}
    with pytest.raises(AuthError, match="wrong bearer secret"):
        verify(SigningMode.BEARER, SECRET, headers, BODY, NOW)
    assert (
        verify(SigningMode.BEARER, SECRET, {"authorization": f"Bearer {SECRET}"}, BODY, NOW) is None
    )
