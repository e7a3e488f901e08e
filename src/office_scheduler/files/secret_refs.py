"""Executor environment values as references: ``${env:NAME}`` instead of the secret.

``office export`` never writes an executor's ``env`` values (API keys live there); it
writes ``${env:NAME}`` for each. ``office import`` reads such a reference from the
environment of the importing process, so exporting and importing again (with the
variables set) is lossless while no secret ever sits in a config file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")


def env_reference(name: str) -> str:
    """The reference text written in place of the value of variable ``name``."""
    return "${env:" + name + "}"


def referenced_name(value: str) -> str | None:
    """The variable a value refers to (``${env:NAME}`` → ``NAME``), else ``None``."""
    match = _REFERENCE.match(value)
    return match.group(1) if match else None


def resolve_env_value(value: str, environ: Mapping[str, str]) -> str | None:
    """``value`` with a reference replaced by the variable's value.

    Returns:
        The value itself when it is no reference; the variable's value for a reference;
        ``None`` for a reference to a variable ``environ`` does not have.
    """
    name = referenced_name(value)
    if name is None:
        return value
    return environ.get(name)
