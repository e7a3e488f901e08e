"""Stall detection: a session whose output is only the agent CLI's own retry notices.

Agent CLIs retry a failing model API by themselves and say so, which keeps their output
flowing while nothing happens, so the inactivity timeout never fires. The notices each CLI
prints (captured from the published CLIs, ``tests/fixtures/agents/<cli>/real-*``):

* Codex ``exec --json``: ``{"type": "error", "message": "Reconnecting... 2/5 (...)"}`` and,
  offline, ``Reconnecting... waiting for network (...)`` forever; on stderr its log lines
  ``<timestamp> ERROR codex_api::...: failed to connect ...``;
* Claude Code ``stream-json``: ``{"type": "system", "subtype": "api_retry", "attempt": 1,
  "max_retries": 10, "retry_delay_ms": ..., "error_status": ..., "error": ...}``;
* Gemini CLI: on stderr ``Attempt 1 failed. Retrying with backoff... Error: ...`` followed
  by a JavaScript stack trace (``    at ...`` lines); in ``stream-json`` a ``{"type":
  "retry", ...}`` event.

:class:`StallWatch` tracks when the session last printed anything else ("progress"); once
only retry notices have been printed for ``stall_timeout_s``, the session is stalled and
the last notice is its message. :func:`is_model_turn` tells whether a line shows the model
answering, so a failed session without a turn is not resumed. Pure: the caller passes
``now`` (monotonic seconds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

#: Codex's reconnect notices (``Reconnecting... 3/5``, ``Reconnecting… waiting for network``).
_RECONNECT: Final = re.compile(r"^\s*Reconnecting(?:\.\.\.|…)", re.IGNORECASE)
#: Plain-text retry notices on stderr: Gemini's backoff line, Codex's connection log lines.
_TEXT_RETRY: Final = re.compile(
    r"^Attempt \d+ failed\. Retrying with backoff"
    r"|^\S+Z\s+ERROR codex_api::\S+: failed to connect"
    r"|^\s*Reconnecting(?:\.\.\.|…)",
)
#: Lines that continue a notice without being one: a JavaScript/Node stack frame.
_CONTINUATION: Final = re.compile(r"^\s+at \S|^\s*$")


def is_retry_notice(obj: Mapping[str, Any]) -> bool:
    """Whether one JSON line is the CLI reporting its own retry (not a session result).

    Args:
        obj: a decoded stdout JSON object.

    Returns:
        True for Claude ``system``/``api_retry``, Gemini ``retry`` and Codex ``error``
        events whose message starts with ``Reconnecting``.
    """
    kind = obj.get("type")
    if kind == "system" and obj.get("subtype") == "api_retry":
        return True
    if kind == "retry":
        return True
    message = obj.get("message")
    return kind == "error" and isinstance(message, str) and _RECONNECT.match(message) is not None


_GENERIC_SUCCESS: Final = frozenset({"ok", "success", "succeeded", "done"})
#: Codex items that only the model produces (an ``error`` item is the CLI's own).
_TURN_ITEMS = frozenset(
    {"agent_message", "reasoning", "command_execution", "file_change", "mcp_tool_call", "plan"}
)


def is_model_turn(obj: Mapping[str, Any]) -> bool:
    """Whether one JSON line shows the model answering (so its session has history).

    Claude: an ``assistant`` line that is not the CLI's own API error message
    (``is_api_error_message``/``error``); Codex: ``turn.completed`` or a completed model
    item; Gemini: an assistant ``message``, ``tool_use`` or a ``result`` with status
    ``success``; a generic line with a success ``status``.
    """
    kind = obj.get("type")
    if kind == "assistant":
        return not obj.get("is_api_error_message") and not obj.get("error")
    if kind == "turn.completed" or kind == "tool_use":
        return True
    if kind == "item.completed":
        item = obj.get("item")
        return isinstance(item, Mapping) and item.get("type") in _TURN_ITEMS
    if kind == "message":
        return obj.get("role") == "assistant"
    if kind == "result":
        return obj.get("status") == "success" or (
            obj.get("is_error") is False and obj.get("subtype") == "success"
        )
    status = obj.get("status")
    return kind is None and isinstance(status, str) and status.lower() in _GENERIC_SUCCESS


def notice_text(obj: Mapping[str, Any]) -> str:
    """A one-line description of a retry notice (its message, else a summary of its fields)."""
    message = obj.get("message")
    if isinstance(message, str) and message.strip():
        return message.strip()
    if obj.get("subtype") == "api_retry":
        status = obj.get("error_status")
        return (
            f"api_retry attempt {obj.get('attempt')}/{obj.get('max_retries')}: "
            f"{obj.get('error')}" + (f" (status {status})" if status is not None else "")
        )
    error = obj.get("error")
    detail = error.get("message") if isinstance(error, Mapping) else error
    return f"retry attempt {obj.get('attempt')}" + (f": {detail}" if detail else "")


def classify_line(stream: str, line: str) -> tuple[str, str | None]:
    """Sort one output line: ``("retry", text)``, ``("noise", None)`` or ``("progress", None)``.

    Args:
        stream: ``stdout`` or ``stderr``.
        line: the decoded line.

    Returns:
        ``retry`` with the notice's text for a retry notice; ``noise`` for a line that
        continues one (a stack frame, a blank line); ``progress`` for anything else.
    """
    stripped = line.strip()
    if stream == "stdout" and stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError):
            return "progress", None
        if isinstance(obj, dict) and is_retry_notice(obj):
            return "retry", notice_text(obj)
        return "progress", None
    if _TEXT_RETRY.search(line):
        return "retry", stripped
    if _CONTINUATION.match(line):
        return "noise", None
    return "progress", None


class StallWatch:
    """Tells when a session has printed only retry notices for ``stall_timeout_s``.

    Args:
        stall_timeout_s: how long retry notices alone may go on, seconds.
        now: the session's start (monotonic seconds).
    """

    def __init__(self, stall_timeout_s: float, now: float) -> None:
        self._limit = stall_timeout_s
        self._progress_at = now
        self.last_notice: str | None = None

    def line(self, stream: str, line: str, now: float) -> None:
        """Account for one output line printed at ``now``."""
        kind, text = classify_line(stream, line)
        if kind == "retry":
            self.last_notice = text
        elif kind == "progress":
            self._progress_at = now
            self.last_notice = None

    def deadline(self) -> float | None:
        """When the session counts as stalled, or None while no notice is pending."""
        return None if self.last_notice is None else self._progress_at + self._limit

    def stalled(self, now: float) -> bool:
        """Whether only retry notices have been printed for ``stall_timeout_s`` at ``now``."""
        deadline = self.deadline()
        return deadline is not None and now >= deadline
