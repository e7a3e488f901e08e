"""Standard Webhooks signing of outbound deliveries (https://www.standardwebhooks.com/).

Each POST carries ``webhook-id`` (the delivery's stable id), ``webhook-timestamp`` (unix
seconds of this attempt) and ``webhook-signature: v1,<base64 HMAC-SHA256>`` over
``"<id>.<timestamp>.<body>"``, keyed with the base64-decoded part of a ``whsec_<base64>``
secret. The ``standardwebhooks`` package computes the signature.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from datetime import datetime

from standardwebhooks import Webhook

from office_scheduler.domain.errors import InvalidInputError

SECRET_PREFIX = "whsec_"  # noqa: S105 - the scheme's prefix, not a secret


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def check_secret(secret: str, *, field: str = "secret") -> str:
    """Validate a ``whsec_<base64>`` secret (at least 16 bytes) and return it stripped.

    Raises:
        InvalidInputError: another shape (``field`` names the input).
    """
    value = secret.strip()
    if not value.startswith(SECRET_PREFIX):
        raise InvalidInputError("a webhook secret is written whsec_<base64>", field=field)
    try:
        key = base64.b64decode(value[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError(
            "the part after whsec_ must be base64 (e.g. from 'office notify secret')", field=field
        ) from None
    if len(key) < 16:
        raise InvalidInputError("a webhook secret needs at least 16 bytes of key", field=field)
    return value


def signature_headers(secret: str, delivery_id: str, at: datetime, body: str) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt.

    Args:
        secret: the channel's ``whsec_<base64>`` secret.
        delivery_id: the stable delivery id (same on every attempt).
        at: the attempt's instant (aware UTC); sent in whole seconds.
        body: the exact JSON text posted.
    """
    signature = Webhook(secret).sign(delivery_id, at, body)
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }
