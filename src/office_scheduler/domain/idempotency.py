"""Request fingerprints stored beside idempotency keys (pure).

A caller's key names one request: the same key with the same request is a retry (answered
as a duplicate), with another request a mistake (refused, HTTP 422), as the IETF
``Idempotency-Key`` HTTP header draft has it. A fingerprint is the SHA-256 of the request's
canonical JSON, so key order and whitespace do not matter.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def fingerprint(request: Any) -> str:
    """SHA-256 (64 lowercase hex digits) of ``request`` as canonical JSON.

    Args:
        request: any JSON-serialisable value (objects' keys are sorted; non-JSON values
            such as datetimes are rendered with ``str``).

    Returns:
        The hex digest.
    """
    encoded = json.dumps(
        request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def conflicts(stored: str | None, offered: str | None) -> bool:
    """Whether a key's stored fingerprint rules out the request offered with it again.

    A side without a fingerprint (a row from before fingerprints, or an internal wake that
    has none) never conflicts.
    """
    return stored is not None and offered is not None and stored != offered
