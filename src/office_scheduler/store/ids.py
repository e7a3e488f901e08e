"""Identifiers for entities (text keys); queue tables use integer keys from the database."""

from __future__ import annotations

import uuid


def new_id() -> str:
    """A new random entity id (32 lowercase hex digits)."""
    return uuid.uuid4().hex
