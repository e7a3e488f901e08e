"""Interpretation of the JSON lines agent CLIs print on stdout.

One lenient reader covers the shapes of the documented output formats:

* Claude Code ``--output-format json``/``stream-json``
  (https://docs.anthropic.com/en/docs/claude-code/sdk/sdk-headless): the ``system``/``init``
  line (``session_id``, ``model``), ``assistant`` lines (``message.stop_reason`` may be
  ``refusal``) and the final ``{"type": "result", "subtype": "success" | "error_max_turns" |
  "error_during_execution", "is_error": ..., "result": ..., "session_id": ...,
  "total_cost_usd": ..., "usage": {...}, "modelUsage": {...}}``.
* Codex ``exec --json`` (https://github.com/openai/codex/blob/main/docs/exec.md):
  ``thread.started`` (``thread_id``), ``item.completed`` agent messages, ``turn.completed``
  (``usage``, no cost), ``turn.failed`` and ``error``.
* Gemini CLI ``--output-format json``/``stream-json``
  (https://geminicli.com/docs/cli/headless/): one object with ``response``, ``stats`` and
  ``error``; or the stream ``init`` (session id, model), ``message`` (assistant chunks,
  ``delta``), ``error`` (non-fatal) and ``result`` (``status``, ``stats``).
* A generic object: ``status``, ``summary``/``result``/``message``, ``session_id``,
  ``usage``, ``error``.

Numbers are untrusted: non-finite values (``NaN``, ``Infinity``, ``1e400``) count as
missing, token counts are clamped to ``0..10**12`` and costs to ``0..1e8`` USD
(:func:`clamp_tokens`), so nothing an agent prints makes parsing raise.

Cost is in 1/100 cent. :attr:`Usage.priced` is true when a line states a price, false when
it states tokens without one (Codex, Gemini: "unpriced", never $0), ``None`` otherwise.
Error families come from :func:`classify_failure` (the retry module's table plus a few CLI
usage errors). Everything here is pure; unknown shapes parse as a non-error line with no data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from office_scheduler.domain.execution import Usage
from office_scheduler.domain.status import ErrorFamily
from office_scheduler.executors.stall import is_model_turn, is_retry_notice
from office_scheduler.retry import classify_error

#: Longest message kept from a result; the full object stays in ``Outcome.result``.
MESSAGE_LIMIT = 4000
#: Largest token count taken from an agent (10**12); larger counts are capped to it.
MAX_TOKENS = 10**12
#: Largest cost taken from one agent line, in USD; larger amounts are capped to it.
MAX_COST_USD = 1e8

_ERROR_TYPES = frozenset({"error", "turn.failed"})
_ERROR_STATUSES = frozenset({"error", "failed", "failure"})
_AGENT_ITEMS = frozenset({"agent_message", "assistant_message"})

#: Command-line usage errors of the CLIs' argument parsers (clap: Codex; commander: Claude
#: Code; yargs: Gemini) and Gemini's refusal of an untrusted folder (exit 55) that the retry
#: table does not name: a configuration problem.
_CLI_USAGE = re.compile(
    r"unexpected argument|unknown (?:option|argument|command)|invalid value .{0,80}? for"
    r"|not a valid model|\bmodel\b.{0,80}?(?:does not exist|is not supported|not found)"
    r"|not running in a trusted directory",
    re.IGNORECASE,
)
#: Turn limits the retry table does not name (Gemini ``FatalTurnLimitedError``, exit 53).
_TURN_LIMIT = re.compile(r"max(?:imum)? session turns|turn ?limit(?:ed)?", re.IGNORECASE)

#: What a Claude result ``subtype`` means when the line carries no text of its own.
_SUBTYPE_TEXT = {
    "error_max_turns": "error_max_turns: the agent reached its maximum number of turns",
    "error_during_execution": "error_during_execution: the agent failed while running",
}


def classify_failure(text: str) -> ErrorFamily:
    """Sort a failure text (message, stderr) into an :class:`ErrorFamily`.

    :func:`office_scheduler.retry.classify_error` decides (rate limit, auth, refusal, max
    turns as ``timeout``, config, transient, crash); of what it leaves as ``crash``, Gemini's
    turn limit (``max session turns``, ``FatalTurnLimitedError``) is ``timeout`` and
    command-line usage errors (``unexpected argument``, ``unknown option``, an unknown model)
    are ``config``.

    Args:
        text: the failure text; only its tail is scanned by the retry classifier.

    Returns:
        The family; ``crash`` when nothing matches.
    """
    family = classify_error(text)
    if family is not ErrorFamily.CRASH:
        return family
    scanned = text[-65536:]
    if _TURN_LIMIT.search(scanned):
        return ErrorFamily.TIMEOUT
    if _CLI_USAGE.search(scanned):
        return ErrorFamily.CONFIG
    return family


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedResult:
    """What one JSON line says about the session.

    Attributes:
        is_error: the line reports a failure (even when the process exits 0).
        message: the error text when ``is_error``, else the summary text (may be empty).
        session_id: the agent's own session id, when the line names one.
        usage: tokens and cost the line reports (zero when it reports none).
        error_family: the failure's family when ``is_error`` and the text says which
            (:func:`classify_failure`), else None.
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
    if is_retry_notice(obj):
        # The CLI retrying by itself (Claude ``api_retry``, Codex ``Reconnecting…``): not a
        # failure of the session, even though the line carries an ``error`` field.
        return ParsedResult(session_id=_session_id(obj))
    refused = _is_refusal(obj)
    is_error = refused or _is_error(obj)
    message = _error_text(obj) if is_error else _summary_text(obj)
    family: ErrorFamily | None = None
    if refused:
        family = ErrorFamily.REFUSAL
    elif is_error:
        found = classify_failure(_error_haystack(obj, message))
        family = None if found is ErrorFamily.CRASH else found
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
    reports usage in the last; Claude names its session in ``init`` as well as ``result``;
    Gemini streams the answer in assistant ``message`` chunks and reports only stats in
    ``result``. The latest session id and the latest non-zero usage win (the final lines
    report totals); the model named by an ``init`` line fills in a usage that names none.
    Retry notices (:func:`~office_scheduler.executors.stall.is_retry_notice`) never become
    the verdict. :attr:`model_turn` tells whether the model answered at all.
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._usage = Usage()
        self.model: str | None = None
        self.summary = ""
        self.last: ParsedResult | None = None
        self.refusal: ParsedResult | None = None
        self._streamed = ""
        #: True once a line shows the model answering (a turn the session can resume).
        self.model_turn = False

    @property
    def usage(self) -> Usage:
        """The session's usage, with the model from ``init`` when the totals name none."""
        if self._usage.model is None and self.model is not None and self._usage != Usage():
            return replace(self._usage, model=self.model)
        return self._usage

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
        if is_retry_notice(obj):
            return parsed
        self.model_turn = self.model_turn or is_model_turn(obj)
        if parsed.usage != Usage():
            self._usage = parsed.usage
        model = _str(obj.get("model"))
        if model:
            self.model = model
        chunk = _assistant_chunk(obj)
        if chunk is not None:
            self._streamed = self._streamed + chunk if obj.get("delta") is True else chunk
            self.summary = self._streamed.strip()[:MESSAGE_LIMIT]
        elif parsed.message and not parsed.is_error:
            self.summary = parsed.message
        if parsed.error_family is ErrorFamily.REFUSAL and self.refusal is None:
            self.refusal = parsed
        self.last = parsed
        return parsed

    def verdict(self) -> ParsedResult | None:
        """The line that decides the session: the last one, unless the model refused.

        A refusal ends the turn cleanly, so the CLI may still print a success result after
        it; the refusal wins then, so a refused session is never counted as done.
        """
        if self.refusal is not None and (self.last is None or not self.last.is_error):
            return self.refusal
        return self.last


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def clamp_tokens(value: object) -> int:
    """A token count as an int in ``0..MAX_TOKENS``; anything else (bool, NaN, ±inf, text) is 0.

    Agents' numbers are data, not trusted: a negative count becomes 0, an absurd one
    (beyond :data:`MAX_TOKENS`, e.g. ``1e23``, which would overflow a BIGINT column) is
    capped at :data:`MAX_TOKENS`.
    """
    # bool is an int subclass but never a token count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return min(max(int(value), 0), MAX_TOKENS)


_int = clamp_tokens


def _float(value: object) -> float | None:
    """A finite, non-negative USD amount capped at :data:`MAX_COST_USD`, else None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    if not math.isfinite(number):
        return None
    return min(max(number, 0.0), MAX_COST_USD)


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


def _is_refusal(obj: Mapping[str, Any]) -> bool:
    """Claude's ``stop_reason: refusal``, on the line or on its assistant message."""
    if obj.get("stop_reason") == "refusal":
        return True
    message = obj.get("message")
    return isinstance(message, Mapping) and message.get("stop_reason") == "refusal"


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
    if _is_refusal(obj):
        return "refusal: the model declined to continue"
    subtype = _str(obj.get("subtype"))
    if subtype in _SUBTYPE_TEXT:
        turns = obj.get("num_turns")
        suffix = f" ({turns} turns)" if isinstance(turns, int) and turns > 0 else ""
        return _SUBTYPE_TEXT[subtype] + suffix
    return subtype or _str(obj.get("status")) or "agent reported an error"


def _error_haystack(obj: Mapping[str, Any], message: str) -> str:
    """The texts that say which family an error belongs to."""
    error = obj.get("error")
    parts = [message, _str(obj.get("subtype")), _str(error)]
    if isinstance(error, Mapping):
        parts += [_str(error.get("type")), _str(error.get("code")), str(error.get("status", ""))]
    return " ".join(part for part in parts if part)


def _summary_text(obj: Mapping[str, Any]) -> str:
    for key in ("result", "response", "summary", "message"):
        text = obj.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip()
    item = obj.get("item")
    if isinstance(item, Mapping) and (item.get("type") or item.get("item_type")) in _AGENT_ITEMS:
        return _str(item.get("text")).strip()
    return _assistant_chunk(obj) or ""


def _assistant_chunk(obj: Mapping[str, Any]) -> str | None:
    """The text of a Gemini stream ``message`` line from the assistant, else None."""
    if obj.get("type") != "message" or obj.get("role") != "assistant":
        return None
    return _str(obj.get("content"))


def _session_id(obj: Mapping[str, Any]) -> str | None:
    for key in ("session_id", "sessionId", "thread_id"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _usage(obj: Mapping[str, Any]) -> Usage:
    input_tokens, output_tokens, model_cost, model = _token_counts(obj)
    # Sums of several clamped counts are clamped again.
    input_tokens, output_tokens = min(input_tokens, MAX_TOKENS), min(output_tokens, MAX_TOKENS)
    stated = obj.get("total_cost_usd", obj.get("cost_usd"))
    usd = _float(stated)
    if usd is None:
        usd = None if model_cost is None else min(model_cost, MAX_COST_USD)
    tokens = input_tokens + output_tokens
    priced: bool | None = None
    if usd is not None:
        priced = True
    elif tokens:
        priced = False
    if not tokens and usd is None:
        return Usage()
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_subcents=max(0, round((usd or 0.0) * 10000)),
        model=model,
        priced=priced,
    )


def _only_key(entries: Mapping[str, Any]) -> str | None:
    return next(iter(entries)) if len(entries) == 1 else None


def _token_counts(obj: Mapping[str, Any]) -> tuple[int, int, float | None, str | None]:
    """Input and output tokens, per-model cost (USD, None when unstated) and the model."""
    model_usage = obj.get("modelUsage")
    if isinstance(model_usage, Mapping) and model_usage:
        # Claude's per-model totals include subagents, which the top-level usage misses.
        tin = tout = 0
        cost: float | None = None
        for entry in model_usage.values():
            if isinstance(entry, Mapping):
                tin += _int(entry.get("inputTokens"))
                tin += _int(entry.get("cacheReadInputTokens"))
                tin += _int(entry.get("cacheCreationInputTokens"))
                tout += _int(entry.get("outputTokens"))
                entry_cost = _float(entry.get("costUSD"))
                if entry_cost is not None:
                    cost = (cost or 0.0) + entry_cost
        return tin, tout, cost, _only_key(model_usage)
    usage = obj.get("usage")
    if isinstance(usage, Mapping):
        # Claude counts cache reads/writes apart from input_tokens; Codex's
        # cached_input_tokens is already part of input_tokens, so it is not added.
        tin = _int(usage.get("input_tokens"))
        tin += _int(usage.get("cache_read_input_tokens"))
        tin += _int(usage.get("cache_creation_input_tokens"))
        return tin, _int(usage.get("output_tokens")), None, None
    stats = obj.get("stats")
    if isinstance(stats, Mapping):
        return _gemini_tokens(stats)
    return 0, 0, None, None


def _gemini_tokens(stats: Mapping[str, Any]) -> tuple[int, int, float | None, str | None]:
    models = stats.get("models")
    if isinstance(models, Mapping) and models:
        tin = tout = 0
        for entry in models.values():
            tokens = entry.get("tokens") if isinstance(entry, Mapping) else None
            if isinstance(tokens, Mapping):
                tin += _int(tokens.get("prompt"))
                # Thinking tokens are billed as output.
                tout += _int(tokens.get("candidates")) + _int(tokens.get("thoughts"))
        return tin, tout, None, _only_key(models)
    tin = _int(stats.get("input_tokens", stats.get("inputTokens")))
    tout = _int(stats.get("output_tokens", stats.get("outputTokens")))
    return tin, tout, None, None
