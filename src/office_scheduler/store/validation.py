"""Validation of store inputs; failures raise :class:`InvalidInputError` naming the field."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TypeVar

from office_scheduler.domain.errors import InvalidInputError

E = TypeVar("E", bound=StrEnum)


def enum_value(kind: type[E], value: object, *, field: str) -> E:
    """Convert ``value`` to the StrEnum ``kind``.

    Raises:
        InvalidInputError: ``value`` is not one of the enum's values (``field`` names it;
            the message lists the allowed values).
    """
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    allowed = ", ".join(member.value for member in kind)
    raise InvalidInputError(f"unknown {field} {value!r} (one of: {allowed})", field=field)


def clean_text(value: object, *, field: str, required: bool = True) -> str:
    """Validate a text input.

    Returns:
        ``value`` without surrounding whitespace when ``required``, else ``value`` unchanged.

    Raises:
        InvalidInputError: ``value`` is not a string, or is blank while ``required``.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be text", field=field)
    if not required:
        return value
    text = value.strip()
    if not text:
        raise InvalidInputError(f"{field} must not be empty", field=field)
    return text


def optional_text(value: object, *, field: str) -> str | None:
    """Validate an optional text input (``None`` allowed, blank text becomes ``None``)."""
    if value is None:
        return None
    text = clean_text(value, field=field, required=False)
    return text if text.strip() else None


def text_tuple(value: object, *, field: str) -> tuple[str, ...]:
    """Validate a sequence of non-empty strings; duplicates are dropped, order kept."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInputError(f"{field} must be a list of text", field=field)
    items = [clean_text(item, field=field) for item in value]
    return tuple(dict.fromkeys(items))


def flag(value: object, *, field: str) -> bool:
    """Validate a boolean input."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{field} must be true or false", field=field)
    return value
