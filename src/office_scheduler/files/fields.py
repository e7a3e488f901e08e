"""Typed, validated access to the YAML mappings of a config directory."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from office_scheduler.domain.errors import InvalidInputError


class Fields:
    """Typed, validated access to one YAML mapping; errors name ``file: key``."""

    def __init__(self, data: object, where: str, prefix: str = "") -> None:
        self.where, self.prefix = where, prefix
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.error("", "must be a mapping")
        self.data: dict[Any, Any] = data
        self._seen: set[str] = set()

    def error(self, key: str, message: str) -> InvalidInputError:
        """An error naming ``file: prefix.key`` (``field`` carries the same label)."""
        name = f"{self.prefix}{key}".rstrip(".")
        label = f"{self.where}: {name}" if name else self.where
        return InvalidInputError(f"{label}: {message}", field=label)

    def get(self, key: str) -> object:
        """The raw value of ``key`` (``None`` when absent); marks the key as known."""
        self._seen.add(key)
        return self.data.get(key)

    def text(self, key: str, default: str = "", *, required: bool = False) -> str:
        """A string; ``required`` ones must be non-blank and are stripped."""
        value = self.get(key)
        if value is None and not required:
            return default
        if not isinstance(value, str) or (required and not value.strip()):
            raise self.error(key, "must be a non-empty string" if required else "must be a string")
        return value.strip() if required else value

    def optional_text(self, key: str) -> str | None:
        """A string, or ``None`` when absent or empty."""
        value = self.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self.error(key, "must be a string")
        return value

    def number(self, key: str, default: float, *, minimum: float = 0.0) -> float:
        """A number of at least ``minimum`` (booleans refused)."""
        value = self.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise self.error(key, f"must be a number >= {minimum:g}")
        return float(value)

    def integer(self, key: str, default: int, *, minimum: int, maximum: int) -> int:
        """An integer in ``minimum..maximum`` (booleans refused)."""
        value = self.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise self.error(key, f"must be an integer in {minimum}..{maximum}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """``true`` or ``false``."""
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false")
        return value

    def strings(self, key: str, default: Sequence[str] = ()) -> tuple[str, ...]:
        """A list of strings."""
        value = self.get(key)
        if value is None:
            return tuple(default)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(key, "must be a list of strings")
        return tuple(value)

    def choice(self, key: str, enum: type[StrEnum], default: str | None = None) -> str:
        """One of the values of ``enum``."""
        value = self.get(key)
        if value is None and default is not None:
            return default
        allowed = [member.value for member in enum]
        if isinstance(value, str):
            # The enum's own lookup, so that an alias it accepts is taken too.
            with contextlib.suppress(ValueError):
                return str(enum(value).value)
        raise self.error(key, f"must be one of {', '.join(allowed)}")

    def done(self) -> None:
        """Refuse keys that no accessor asked for, suggesting the closest known key.

        Raises:
            InvalidInputError: one line per unknown key (sorted), e.g. ``agents/a.yml:
                cooldown: unknown key (did you mean 'cooldown_s'?)``; ``field`` names the
                first.
        """
        unknown = sorted(str(key) for key in self.data if str(key) not in self._seen)
        if not unknown:
            return
        errors = [
            self.error(key, "unknown key" + _did_you_mean(key, self._seen)) for key in unknown
        ]
        if len(errors) == 1:
            raise errors[0]
        message = "\n".join(error.message for error in errors)
        raise InvalidInputError(message, field=errors[0].field)


def _did_you_mean(key: str, known: set[str]) -> str:
    """`` (did you mean 'x'?)`` for the known key closest to ``key``, else ``""``."""
    import difflib

    normal = key.lower().replace("-", "_")
    found = difflib.get_close_matches(normal, sorted(known), n=1, cutoff=0.6)
    if not found:
        found = sorted(k for k in known if k.startswith(normal) or normal.startswith(k))[:1]
    return f" (did you mean {found[0]!r}?)" if found else ""


def _nul_path(data: object, trail: str = "") -> str | None:
    """The key path of the first string holding a NUL character, if any."""
    if isinstance(data, str):
        return trail or "(document)" if "\x00" in data else None
    if isinstance(data, dict):
        for key, value in data.items():
            here = f"{trail}.{key}" if trail else str(key)
            if isinstance(key, str) and "\x00" in key:
                return here
            found = _nul_path(value, here)
            if found is not None:
                return found
    if isinstance(data, list):
        for index, value in enumerate(data):
            found = _nul_path(value, f"{trail}[{index}]")
            if found is not None:
                return found
    return None


def read_yaml(path: Path, where: str) -> object:
    """Parse one YAML file; errors name it as ``where`` (and the line of a syntax error).

    A NUL character anywhere (YAML's backslash-zero escape) is refused here, before
    anything is written: no database can store it in text.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"{where}: file not found in {path.parent}", field=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{where}: cannot read: {exc}", field=where) from None
    except yaml.YAMLError as exc:
        where_line = getattr(exc, "problem_mark", None)
        line = f" (line {where_line.line + 1})" if where_line is not None else ""
        raise InvalidInputError(f"{where}: invalid YAML{line}", field=where) from None
    bad = _nul_path(data)
    if bad is not None:
        shown = bad.replace("\x00", "\\0")
        raise InvalidInputError(f"{where}: {shown}: NUL characters are not allowed", field=where)
    return data
