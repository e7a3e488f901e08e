"""The ``notifications:`` mapping of ``office.yml``: load, export, plan and apply.

Each entry maps a channel name to ``{kind: webhook|slack, url, secret, events, enabled}``.
URLs and secrets are credentials: export writes ``${env:NOTIFY_<NAME>_URL}`` and
``${env:NOTIFY_<NAME>_SECRET}`` references, and import reads a reference from its own
environment (a missing variable is an error naming the key). Import matches channels by
name, creates or updates them, and never deletes one (like every other record).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.notifications import ChannelKind, NotificationChannel
from office_scheduler.files.fields import Fields
from office_scheduler.files.model import Action, Change, ChannelSpec
from office_scheduler.files.secret_refs import env_reference, referenced_name, resolve_env_value
from office_scheduler.notifications.rules import channel_values, check_name
from office_scheduler.store.facade import Store


def _resolved(spec: Fields, key: str, allow_env: frozenset[str]) -> str | None:
    value = spec.optional_text(key)
    if value is None:
        return None
    variable = referenced_name(value)
    if variable is not None and variable.startswith("OFFICE_") and variable not in allow_env:
        raise spec.error(
            key,
            f"refers to {value}, one of the office's own variables: add"
            f" --allow-env {variable} to import it",
        )
    resolved = resolve_env_value(value, os.environ)
    if resolved is None:
        raise spec.error(key, f"refers to {value}, which is not set")
    return resolved


def load_notifications(
    data: object, allow_env: frozenset[str] = frozenset()
) -> tuple[ChannelSpec, ...]:
    """Read the ``notifications`` mapping of ``office.yml`` (absent: none).

    ``${env:OFFICE_*}`` references are refused unless named in ``allow_env`` (a URL or
    secret must not carry the importer's own token to a receiver).

    Raises:
        InvalidInputError: a malformed entry (``field`` names ``office.yml:
            notifications.<name>.<key>``).
    """
    if data is None:
        return ()
    if not isinstance(data, dict):
        message = "office.yml: notifications: must map channel names to channels"
        raise InvalidInputError(message, field="office.yml: notifications")
    found: list[ChannelSpec] = []
    for raw_name, item in data.items():
        where = f"notifications.{raw_name}."
        spec = Fields(item, "office.yml", where)
        try:
            name = check_name(str(raw_name))
        except InvalidInputError as exc:
            raise spec.error("", str(exc)) from None
        fields: dict[str, object] = {
            "kind": spec.text("kind", ChannelKind.WEBHOOK.value),
            "url": _resolved(spec, "url", allow_env),
            "events": spec.strings("events"),
            "enabled": spec.boolean("enabled", True),
        }
        secret = _resolved(spec, "secret", allow_env)
        if secret is not None:
            fields["secret"] = secret
        spec.done()
        if fields["kind"] == ChannelKind.WEBHOOK.value and secret is None:
            raise spec.error("secret", "a webhook channel needs a secret (whsec_<base64>)")
        try:
            values, _ = channel_values(fields)
        except InvalidInputError as exc:
            key = (exc.field or "").split("[")[0]
            raise spec.error(key, str(exc)) from None
        found.append(ChannelSpec(name=name, values=values))
    return tuple(sorted(found, key=lambda channel: channel.name))


def _variable(name: str, part: str) -> str:
    return f"NOTIFY_{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}_{part}"


def notifications_data(store: Store, workspace_id: str) -> dict[str, Any]:
    """The workspace's channels as the ``notifications`` mapping (credentials as references).

    Names that read the same as a variable (``ops-team``, ``ops.team``, ``OPS_team``) get
    ``NOTIFY_OPS_TEAM``, ``NOTIFY_OPS_TEAM_2``, ... in name order, so no two channels share
    a reference (an import would give them the same URL and secret).
    """
    data: dict[str, Any] = {}
    used: set[str] = set()
    for channel in sorted(
        store.notifications.list_channels(workspace_id), key=lambda item: item.name
    ):
        stem = _variable(channel.name, "")
        number = 1
        while stem in used:
            number += 1
            stem = _variable(channel.name, f"{number}_")
        used.add(stem)
        entry: dict[str, Any] = {
            "kind": channel.kind.value,
            "url": env_reference(stem + "URL"),
        }
        if channel.secret is not None:
            entry["secret"] = env_reference(stem + "SECRET")
        if channel.events:
            entry["events"] = list(channel.events)
        if not channel.enabled:
            entry["enabled"] = False
        data[channel.name] = entry
    return data


def _diff(channel: NotificationChannel, values: Mapping[str, Any]) -> list[str]:
    current = {
        "kind": channel.kind.value,
        "url": channel.url,
        "secret": channel.secret,
        "events": list(channel.events),
        "enabled": channel.enabled,
    }
    keys = ("kind", "url", "secret", "events", "enabled")
    return [key for key in keys if current[key] != values[key]]


def plan_notifications(
    store: Store, workspace_id: str | None, channels: Iterable[ChannelSpec]
) -> list[Change]:
    """One change per channel (``kind`` ``notification``, ``name`` the channel's)."""
    existing = (
        {}
        if workspace_id is None
        else {c.name: c for c in store.notifications.list_channels(workspace_id)}
    )
    changes = []
    for spec in channels:
        channel = existing.get(spec.name)
        if channel is None:
            changes.append(Change(kind="notification", name=spec.name, action=Action.CREATE))
            continue
        fields = tuple(_diff(channel, spec.values))
        action = Action.UPDATE if fields else Action.UNCHANGED
        changes.append(Change(kind="notification", name=spec.name, action=action, fields=fields))
    return changes


def apply_notifications(
    store: Store, workspace_id: str, channels: Iterable[ChannelSpec], now: datetime
) -> None:
    """Create or update the channels of the file (unchanged ones are not written)."""
    existing = {c.name: c for c in store.notifications.list_channels(workspace_id)}
    for spec in channels:
        channel = existing.get(spec.name)
        if channel is None or _diff(channel, spec.values):
            store.notifications.put_channel(workspace_id, spec.name, spec.values, now=now)
