"""Webhook trigger authentication and body parsing (pure).

``hmac_sha256`` signs ``"<timestamp>." + raw body`` with the trigger's secret and sends
``X-Signature-256: sha256=<hex>`` with ``X-Signature-Timestamp: <unix seconds>``; a
timestamp more than five minutes from the server's clock is rejected, so a captured request
cannot be replayed later (and a replay within the window is caught by its signature, which
the store keeps). ``bearer`` sends ``Authorization: Bearer <secret>``. ``github`` checks
``X-Hub-Signature-256: sha256=<hex HMAC of the raw body>`` as GitHub sends it (GitHub signs
no timestamp: ``X-GitHub-Delivery`` is the idempotency key, so a redelivery fires nothing).
``slack`` checks ``X-Slack-Signature: v0=<hex HMAC of "v0:<timestamp>:<body>">`` with
``X-Slack-Request-Timestamp`` within five minutes. Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from office_scheduler.domain.errors import AuthError, InvalidInputError
from office_scheduler.domain.routines import SigningMode
from office_scheduler.routines.templates import check_json

SIGNATURE_HEADER = "x-signature-256"
TIMESTAMP_HEADER = "x-signature-timestamp"
GITHUB_SIGNATURE_HEADER = "x-hub-signature-256"
GITHUB_EVENT_HEADER = "x-github-event"
GITHUB_DELIVERY_HEADER = "x-github-delivery"
SLACK_SIGNATURE_HEADER = "x-slack-signature"
SLACK_TIMESTAMP_HEADER = "x-slack-request-timestamp"
IDEMPOTENCY_HEADER = "idempotency-key"
TOLERANCE = timedelta(minutes=5)
MAX_BODY_BYTES = 256 * 1024
MAX_KEY_CHARS = 200


def new_public_id() -> str:
    """A new unguessable URL id for a webhook trigger (22 characters)."""
    return secrets.token_urlsafe(16)


def new_secret() -> str:
    """A new webhook secret (43 characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Signature-256`` value for ``body`` sent at ``timestamp`` (unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of a header value and a secret-derived string.

    Compares UTF-8 bytes: ``hmac.compare_digest`` refuses non-ASCII ``str`` (a header may
    carry any Latin-1 character), and that must read as a mismatch, not an error.
    """
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def verify(
    mode: SigningMode,
    secret: str | None,
    headers: Mapping[str, str],
    body: bytes,
    now: datetime,
) -> str | None:
    """Authenticate one delivery.

    Args:
        mode: the trigger's signing mode.
        secret: the trigger's secret (``None`` for ``none``).
        headers: request headers with lower-case names.
        body: the raw request body, exactly as received.
        now: the server's current instant (aware UTC).

    Returns:
        The verified signature of an ``hmac_sha256``, ``github`` or ``slack`` delivery
        (the replay guard's key), else ``None``.

    Raises:
        AuthError: a missing or wrong credential, a malformed or stale timestamp.
    """
    if mode is SigningMode.NONE:
        return None
    if not secret:
        raise AuthError("the trigger has no secret; create a new trigger")
    if mode is SigningMode.BEARER:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not _same(token.strip(), secret):
            raise AuthError("missing or wrong bearer secret", field="Authorization")
        return None
    if mode is SigningMode.GITHUB:
        return _verify_github(secret, headers, body)
    if mode is SigningMode.SLACK:
        return _verify_slack(secret, headers, body, now)
    signature = headers.get(SIGNATURE_HEADER, "")
    stamp = headers.get(TIMESTAMP_HEADER, "")
    if not signature:
        raise AuthError("missing X-Signature-256 header", field="X-Signature-256")
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:
        raise AuthError(
            "missing or malformed X-Signature-Timestamp header (unix seconds)",
            field="X-Signature-Timestamp",
        )
    if abs(now.timestamp() - int(stamp)) > TOLERANCE.total_seconds():
        raise AuthError(
            "X-Signature-Timestamp is more than 5 minutes from the server's clock",
            field="X-Signature-Timestamp",
        )
    if not _same(signature.strip(), sign(secret, int(stamp), body)):
        raise AuthError("signature does not match the body", field="X-Signature-256")
    return signature.strip()


def _verify_github(secret: str, headers: Mapping[str, str], body: bytes) -> str:
    signature = headers.get(GITHUB_SIGNATURE_HEADER, "").strip()
    if not signature:
        raise AuthError("missing X-Hub-Signature-256 header", field="X-Hub-Signature-256")
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not _same(signature, expected):
        raise AuthError("signature does not match the body", field="X-Hub-Signature-256")
    return signature


def _verify_slack(secret: str, headers: Mapping[str, str], body: bytes, now: datetime) -> str:
    signature = headers.get(SLACK_SIGNATURE_HEADER, "").strip()
    stamp = headers.get(SLACK_TIMESTAMP_HEADER, "").strip()
    if not signature:
        raise AuthError("missing X-Slack-Signature header", field="X-Slack-Signature")
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:
        raise AuthError(
            "missing or malformed X-Slack-Request-Timestamp header (unix seconds)",
            field="X-Slack-Request-Timestamp",
        )
    if abs(now.timestamp() - int(stamp)) > TOLERANCE.total_seconds():
        raise AuthError(
            "X-Slack-Request-Timestamp is more than 5 minutes from the server's clock",
            field="X-Slack-Request-Timestamp",
        )
    base = f"v0:{stamp}:".encode() + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not _same(signature, expected):
        raise AuthError("signature does not match the body", field="X-Slack-Signature")
    return signature


#: Most event names a ``github`` trigger's filter may list.
MAX_GITHUB_EVENTS = 50


def check_github_events(value: object) -> dict[str, list[str]] | None:
    """Validate a ``github`` trigger's filter: event name → accepted actions.

    ``None`` accepts every event; an empty action list accepts every action of its event.

    Raises:
        InvalidInputError: not a mapping of names to lists of names (field ``events``).
    """
    if value is None:
        return None
    if not isinstance(value, Mapping) or len(value) > MAX_GITHUB_EVENTS:
        raise InvalidInputError(
            "events must map GitHub event names to lists of actions", field="events"
        )
    found: dict[str, list[str]] = {}
    for name, actions in value.items():
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise InvalidInputError("an event name must be a non-empty string", field="events")
        if actions is None:
            actions = []
        if not isinstance(actions, list | tuple) or not all(
            isinstance(action, str) and action.strip() and len(action) <= 100 for action in actions
        ):
            raise InvalidInputError(
                f"events.{name} must be a list of action names", field=f"events.{name}"
            )
        found[name.strip()] = [action.strip() for action in actions]
    return found


def github_event_accepted(
    events: Mapping[str, list[str]] | None, event: str, action: object
) -> bool:
    """Whether a ``github`` trigger with filter ``events`` fires for ``event``/``action``."""
    if events is None:
        return True
    if event not in events:
        return False
    accepted = events[event]
    return not accepted or (isinstance(action, str) and action in accepted)


def parse_json_object(body: bytes) -> dict[str, Any]:
    """A delivery's whole JSON object (``{}`` for an empty body).

    Raises:
        InvalidInputError: larger than 256 KiB, not JSON, not an object, or holding a value
            no database can store.
    """
    if len(body) > MAX_BODY_BYTES:
        raise InvalidInputError("body is larger than 256 KiB", field="body")
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidInputError("body is not valid JSON", field="body") from None
    if not isinstance(data, dict):
        raise InvalidInputError("body must be a JSON object", field="body")
    check_json(data, field="body")
    return data


FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


def parse_github_payload(headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """The JSON object of a GitHub delivery, whichever content type the hook was set up with.

    GitHub's form offers ``application/json`` and (its default)
    ``application/x-www-form-urlencoded``, which sends the same JSON as the form field
    ``payload``. The signature covers the raw body either way, so it is checked before.

    Raises:
        InvalidInputError: larger than 256 KiB, a form without one ``payload`` field, or a
            payload that is not a storable JSON object (field ``body``).
    """
    kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != FORM_CONTENT_TYPE:
        return parse_json_object(body)
    if len(body) > MAX_BODY_BYTES:
        raise InvalidInputError("body is larger than 256 KiB", field="body")
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True, errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise InvalidInputError("body is not a valid form", field="body") from None
    payload = fields.get("payload", [])
    if len(payload) != 1:
        raise InvalidInputError("a form-encoded delivery needs one payload field", field="body")
    return parse_json_object(payload[0].encode("utf-8"))


def parse_body(body: bytes) -> dict[str, Any]:
    """The provided variables of a delivery: its JSON object (or ``{}`` for an empty body).

    A body ``{"variables": {...}}`` provides the inner object; any other object provides
    its top-level keys.

    Raises:
        InvalidInputError: larger than 256 KiB, not JSON, not an object, or holding a value
            no database can store (a non-finite number, a NUL character).
    """
    data = parse_json_object(body)
    inner = data.get("variables")
    if isinstance(inner, dict) and set(data) == {"variables"}:
        return inner
    return data


def idempotency_key(headers: Mapping[str, str]) -> str | None:
    """The caller's ``Idempotency-Key`` header, or ``None``.

    Raises:
        InvalidInputError: an empty key or one longer than 200 characters.
    """
    if IDEMPOTENCY_HEADER not in headers:
        return None
    key = headers[IDEMPOTENCY_HEADER].strip()
    if not key or len(key) > MAX_KEY_CHARS:
        raise InvalidInputError(
            f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} characters", field="Idempotency-Key"
        )
    return key
