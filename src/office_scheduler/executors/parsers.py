"""Interpretation of the JSON lines agent CLIs print on stdout.

One lenient reader covers the shapes seen in practice:

* Claude Code ``--output-format json``/``stream-json``: the final
  ``{"type": "result", "subtype": ..., "is_error": ..., "result": ..., "session_id": ...,
  "total_cost_usd": ..., "usage": {...}, "modelUsage": {...}}`` and the ``system``/``init``
  line carrying the session id.
* Codex ``exec --json``: ``thread.started`` (``thread_id``), ``turn.completed`` (``usage``),
  ``turn.failed``/``error`` and ``item.completed`` agent messages.
* Gemini CLI ``-o json`` (``response``, ``stats``, ``error``) and ``-o stream-json``
  (``init``, ``result`` with ``status`` and ``stats``).
* A generic object: ``status``, ``summary``/``result``/``message``, ``session_id``,
  ``usage``, ``error``.

Everything here is pure; unknown shapes parse as a non-error result with no data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from office_scheduler.domain.models import Usage
from office_scheduler.domain.status import ErrorFamily

#: Longest message kept from a result; the full object stays in ``Outcome.result``.
MESSAGE_LIMIT = 4000

_ERROR_TYPES = frozenset({"error", "turn.failed"})
_ERROR_STATUSES = frozenset({"error", "failed", "failure"})

_RATE_LIMIT = re.compile(r"rate[ _-]?limit|\b429\b|too many requests|usage limit", re.IGNORECASE)
_AUTH = re.compile(
    r"authenticat|unauthori[sz]ed|\b401\b|invalid[ _-]?(x-)?api[ _-]?key|api key is missing"
    r"|not logged in|please run /login|login required|auth method",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedResult:
    """What one JSON line says about the session.

    Attributes:
        is_error: the line reports a failure (even when the process exits 0).
        message: the error text when ``is_error``, else the summary text (may be empty).
        session_id: the agent's own session id, when the line names one.
        usage: tokens and cost the line reports (zero when it reports none).
        error_family: ``rate_limit`` or ``auth`` when the error clearly says so, else None.
    """

    is_error: bool = False
    message: str = ""
    session_id: str | None = None
    usage: Usage = field(default_factory=Usage)
    error_family: ErrorFamily | None = None


def parse_result_line(obj: Mapping[str, Any]) -> ParsedResult:
    """Interpret one JSON object printed by an agent CLI.

    Args:
        obj: a decoded JSON object (one stdout line).

    Returns:
        The parsed view; never raises for unexpected shapes.
    """
    is_error = _is_error(obj)
    message = _error_text(obj) if is_error else _summary_text(obj)
    family = _classify(obj, message) if is_error else None
    return ParsedResult(
        is_error=is_error,
        message=message[:MESSAGE_LIMIT],
        session_id=_session_id(obj),
        usage=_usage(obj),
        error_family=family,
    )


class ResultAccumulator:
    """Folds every JSON line of one session into what the last line alone may lack.

    Stream formats spread facts over lines: Codex names its thread in the first line and
    reports usage in the last; Claude names its session in ``init`` as well as ``result``.
    The latest session id and the latest non-zero usage win (the final lines report totals).
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.usage = Usage()
        self.summary = ""
        self.last: ParsedResult | None = None

    def add(self, obj: Mapping[str, Any]) -> ParsedResult:
        """Fold one JSON line in and return its parsed view.

        Args:
            obj: a decoded JSON object, in output order.

        Returns:
            The line's :class:`ParsedResult` (also kept as :attr:`last`).
        """
        parsed = parse_result_line(obj)
        if parsed.session_id:
            self.session_id = parsed.session_id
        if parsed.usage != Usage():
            self.usage = parsed.usage
        if parsed.message and not parsed.is_error:
            self.summary = parsed.message
        self.last = parsed
        return parsed


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    # bool is an int subclass but never a token count.
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        return int(value)
    return 0


def _is_error(obj: Mapping[str, Any]) -> bool:
    if obj.get("is_error") is True:
        return True
    if obj.get("type") in _ERROR_TYPES:
        return True
    if _str(obj.get("subtype")).startswith("error"):
        return True
    if _str(obj.get("status")).lower() in _ERROR_STATUSES:
        return True
    error = obj.get("error")
    return error is not None and error is not False and error != "" and error != {}


def _error_text(obj: Mapping[str, Any]) -> str:
    error = obj.get("error")
    if isinstance(error, Mapping):
        text = _str(error.get("message"))
        if text:
            return text
    candidates: list[object] = [error, obj.get("message"), obj.get("result")]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    errors = obj.get("errors")
    if isinstance(errors, list):
        texts = [_str(e.get("message")) if isinstance(e, Mapping) else _str(e) for e in errors]
        joined = "; ".join(t.strip() for t in texts if t.strip())
        if joined:
            return joined
    return _str(obj.get("subtype")) or _str(obj.get("status")) or "agent reported an error"


def _summary_text(obj: Mapping[str, Any]) -> str:
    for key in ("result", "response", "summary", "message"):
        text = obj.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip()
    item = obj.get("item")
    if isinstance(item, Mapping) and item.get("type") == "agent_message":
        return _str(item.get("text")).strip()
    return ""


def _classify(obj: Mapping[str, Any], message: str) -> ErrorFamily | None:
    error = obj.get("error")
    parts = [message, _str(obj.get("subtype")), _str(error)]
    if isinstance(error, Mapping):
        parts += [_str(error.get("type")), _str(error.get("code")), str(error.get("status", ""))]
    haystack = " ".join(parts)
    if _RATE_LIMIT.search(haystack):
        return ErrorFamily.RATE_LIMIT
    if _AUTH.search(haystack):
        return ErrorFamily.AUTH
    return None


def _session_id(obj: Mapping[str, Any]) -> str | None:
    for key in ("session_id", "sessionId", "thread_id"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _usage(obj: Mapping[str, Any]) -> Usage:
    input_tokens, output_tokens, model_cost = _token_counts(obj)
    cost = obj.get("total_cost_usd", obj.get("cost_usd"))
    usd = _float(cost) if cost is not None else model_cost
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_subcents=max(0, round(usd * 10000)),
    )


def _token_counts(obj: Mapping[str, Any]) -> tuple[int, int, float]:
    """Return input tokens, output tokens and per-model cost (USD) from the known places."""
    model_usage = obj.get("modelUsage")
    if isinstance(model_usage, Mapping) and model_usage:
        # Claude's per-model totals include subagents, which the top-level usage misses.
        tin = tout = 0
        cost = 0.0
        for entry in model_usage.values():
            if isinstance(entry, Mapping):
                tin += _int(entry.get("inputTokens"))
                tin += _int(entry.get("cacheReadInputTokens"))
                tin += _int(entry.get("cacheCreationInputTokens"))
                tout += _int(entry.get("outputTokens"))
                cost += _float(entry.get("costUSD"))
        return tin, tout, cost
    usage = obj.get("usage")
    if isinstance(usage, Mapping):
        # Claude counts cache reads/writes apart from input_tokens; Codex's
        # cached_input_tokens is already part of input_tokens, so it is not added.
        tin = _int(usage.get("input_tokens"))
        tin += _int(usage.get("cache_read_input_tokens"))
        tin += _int(usage.get("cache_creation_input_tokens"))
        return tin, _int(usage.get("output_tokens")), 0.0
    stats = obj.get("stats")
    if isinstance(stats, Mapping):
        return (*_gemini_tokens(stats), 0.0)
    return 0, 0, 0.0


def _float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 0.0


def _gemini_tokens(stats: Mapping[str, Any]) -> tuple[int, int]:
    models = stats.get("models")
    if isinstance(models, Mapping) and models:
        tin = tout = 0
        for entry in models.values():
            tokens = entry.get("tokens") if isinstance(entry, Mapping) else None
            if isinstance(tokens, Mapping):
                tin += _int(tokens.get("prompt"))
                # Thinking tokens are billed as output.
                tout += _int(tokens.get("candidates")) + _int(tokens.get("thoughts"))
        return tin, tout
    tin = _int(stats.get("input_tokens", stats.get("inputTokens")))
    tout = _int(stats.get("output_tokens", stats.get("outputTokens")))
    return tin, tout
