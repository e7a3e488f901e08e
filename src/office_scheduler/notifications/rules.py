"""What a notification channel may be: names, kinds, URLs, secrets and events (pure).

Shared by the service (API, CLI) and ``office import``, so both accept the same channels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.notifications import ChannelKind, NotificationEvent
from office_scheduler.notifications.signing import check_secret, new_secret

#: Longest channel name; letters, digits and ``_.-``.
MAX_NAME_CHARS = 100
CHANNEL_FIELDS = frozenset({"kind", "url", "secret", "events", "enabled"})
KNOWN_EVENTS = frozenset(event.value for event in NotificationEvent)


def check_name(name: str) -> str:
    """Validate a channel name.

    Raises:
        InvalidInputError: blank, too long or with other characters than ``[A-Za-z0-9_.-]``.
    """
    value = name.strip()
    ok = value and len(value) <= MAX_NAME_CHARS
    if not ok or not all(ch.isascii() and (ch.isalnum() or ch in "_.-") for ch in value):
        raise InvalidInputError(
            f"a channel name is 1 to {MAX_NAME_CHARS} of A-Z a-z 0-9 _ . -", field="name"
        )
    return value


def _check_url(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("url is required (http:// or https://)", field="url")
    url = value.strip()
    bad = InvalidInputError("url must be an http:// or https:// URL with a host", field="url")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise bad
    try:
        # The sender parses the URL again with httpx: what it refuses (a bad port, a broken
        # IPv6 literal) must be refused here, not fail every delivery later.
        parts = urlsplit(url)
        _ = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        raise bad from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad
    return url


def _check_events(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInputError("events must be a list of event names", field="events")
    events: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or item not in KNOWN_EVENTS:
            known = ", ".join(sorted(KNOWN_EVENTS))
            raise InvalidInputError(
                f"unknown event {item!r}; known: {known}", field=f"events[{index}]"
            )
        if item not in events:
            events.append(item)
    return events


def channel_values(fields: Mapping[str, object]) -> tuple[dict[str, Any], str | None]:
    """Validate the fields of a channel.

    Args:
        fields: ``kind`` (``webhook`` | ``slack``), ``url``, ``secret`` (``whsec_<base64>``,
            webhook only; made when missing), ``events`` (list; empty or missing: all),
            ``enabled`` (default true).

    Returns:
        The column values, and the secret when one was made here (to show once).

    Raises:
        InvalidInputError: an unknown field or a bad value (``field`` names it).
    """
    unknown = sorted(set(fields) - CHANNEL_FIELDS)
    if unknown:
        raise InvalidInputError(f"unknown channel field {unknown[0]!r}", field=unknown[0])
    raw_kind = fields.get("kind", ChannelKind.WEBHOOK.value)
    if raw_kind not in {kind.value for kind in ChannelKind}:
        raise InvalidInputError("kind must be webhook or slack", field="kind")
    kind = ChannelKind(str(raw_kind))
    enabled = fields.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidInputError("enabled must be true or false", field="enabled")
    made: str | None = None
    secret = fields.get("secret")
    if kind is ChannelKind.SLACK:
        if secret not in (None, ""):
            raise InvalidInputError(
                "a slack channel has no secret (its URL is the credential)", field="secret"
            )
        secret = None
    elif secret in (None, ""):
        secret = made = new_secret()
    elif isinstance(secret, str):
        secret = check_secret(secret)
    else:
        raise InvalidInputError("secret must be a string (whsec_<base64>)", field="secret")
    values = {
        "kind": kind.value,
        "url": _check_url(fields.get("url")),
        "secret": secret,
        "events": _check_events(fields.get("events")),
        "enabled": enabled,
    }
    return values, made
