"""One readable line out of an agent CLI's failure output (for cards, inbox items, lists).

Agent CLIs fail with colour codes, progress noise and, with ``--output-format stream-json``,
lines of JSON: the line people need is the first one that says what went wrong.
:func:`first_error_line` strips ANSI escape sequences, reads the error text out of JSON
lines (``error``, ``message``, ``result`` of an error result) and skips JSON lines that
carry none, then cuts the line to ``limit`` characters. Pure: no I/O.
"""

from __future__ import annotations

import json
import re

#: CSI (colours, cursor moves) and OSC (titles, links) escape sequences.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: Shown when no line says anything.
FALLBACK = "agent session failed"


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (and without other control characters)."""
    text = _ANSI.sub("", text)
    return "".join(ch for ch in text if ch in "\n\t" or ord(ch) >= 0x20)


def _json_error(line: str) -> str | None:
    """The error text of a JSON object line; ``""`` when it carries none; ``None``: not JSON."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return ""
    error = value.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error.get("type")
    if isinstance(error, str) and error.strip():
        return error
    if value.get("is_error") or value.get("subtype", "").startswith("error"):
        for key in ("result", "message"):
            text = value.get(key)
            if isinstance(text, str) and text.strip():
                return text
    message = value.get("message")
    if value.get("type") == "error" and isinstance(message, str):
        return message
    return ""


def first_error_line(text: str | None, limit: int = 200) -> str:
    """The first line of ``text`` that says what went wrong, cleaned and cut to ``limit``.

    Args:
        text: a run's error text or output, possibly with ANSI codes and JSON lines.
        limit: most characters returned (an ellipsis marks a cut).

    Returns:
        The line, or :data:`FALLBACK` when no line says anything.
    """
    for raw in strip_ansi(text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("{"):
            found = _json_error(line)
            if found == "":
                continue
            if found is not None:
                line = " ".join(found.split())
        if len(line) > limit:
            return line[: limit - 1].rstrip() + "…"
        return line
    return FALLBACK
