"""Quoting of agent- and user-written text inside prompts (pure functions).

Everything a person or an agent wrote (task descriptions, comments, wake payloads, result
text) is data for the woken agent, not instructions from the scheduler: it is stripped of
control characters (newline and tab are kept) and invisible format characters, capped, and
shown in a fenced block whose fence is longer than any backtick run inside, so the text
cannot close the block early.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

#: Longest string field of a wake payload, in characters.
MAX_FIELD_CHARS = 500
#: Longest rendered payload (JSON text), in characters.
MAX_PAYLOAD_CHARS = 2000
#: Deepest nesting of a payload rendered before values are elided.
MAX_DEPTH = 4
#: Most items of one payload list or object rendered.
MAX_ITEMS = 25

TRUNCATED = "…(truncated)"

# C0 controls except tab (\x09) and newline (\x0a), DEL, C1 controls, and the Unicode line
# and paragraph separators / bidi overrides that can disguise text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_BACKTICKS = re.compile("`+")
#: Invisible format characters (Unicode category ``Cf``) that are kept: ZWNJ (U+200C) and
#: ZWJ (U+200D) shape Persian/Indic text and join emoji sequences. Every other ``Cf``
#: character (LRM/RLM U+200E/F, ALM U+061C, ZWSP U+200B, BOM/ZWNBSP U+FEFF, soft hyphen,
#: word joiner, bidi embeddings and isolates, tag characters, ...) is removed.
KEPT_FORMAT_CHARS = frozenset("\u200c\u200d")


def clean(text: str, *, limit: int | None = None) -> str:
    """Strip control characters (keeping newline and tab) and cap at ``limit`` characters.

    Carriage returns are dropped (CR LF becomes LF); invisible format characters (Unicode
    category ``Cf``) are removed except those in :data:`KEPT_FORMAT_CHARS`. A capped text
    ends with ``…(truncated)``; the result is never longer than ``limit`` characters.
    """
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    if not text.isascii():
        text = "".join(
            ch for ch in text if ch in KEPT_FORMAT_CHARS or unicodedata.category(ch) != "Cf"
        )
    if limit is not None and len(text) > limit:
        keep = max(limit - len(TRUNCATED), 0)
        text = text[:keep] + TRUNCATED
    return text


def one_line(text: str, *, limit: int) -> str:
    """:func:`clean` ``text`` and fold all whitespace runs to single spaces."""
    return clean(" ".join(text.split()), limit=limit)


def fenced(text: str, *, info: str = "text", indent: str = "") -> list[str]:
    """Lines of a fenced block holding ``text`` verbatim (already cleaned by the caller).

    The fence is one backtick longer than the longest backtick run of ``text`` (at least
    three), so nothing inside can end the block.
    """
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text.splitlines() or [""]
    return [f"{indent}{fence}{info}", *(f"{indent}{line}" for line in body), f"{indent}{fence}"]


def sanitize_payload(value: Any, *, depth: int = 0) -> Any:
    """A copy of a JSON value with every string cleaned and capped at 500 characters.

    Lists and objects keep their first 25 items (objects by sorted key); deeper than four
    levels, values become ``"…"``.
    """
    if isinstance(value, str):
        return clean(value, limit=MAX_FIELD_CHARS)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        keys = sorted(value, key=str)[:MAX_ITEMS]
        cleaned = {
            clean(str(key), limit=100): sanitize_payload(value[key], depth=depth + 1)
            for key in keys
        }
        if len(value) > MAX_ITEMS:
            cleaned["…"] = f"{len(value) - MAX_ITEMS} more key(s)"
        return cleaned
    if isinstance(value, list | tuple):
        items = [sanitize_payload(item, depth=depth + 1) for item in list(value)[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"… {len(value) - MAX_ITEMS} more item(s)")
        return items
    return clean(str(value), limit=MAX_FIELD_CHARS)


def payload_json(payload: Any) -> str:
    """The sanitized payload as sorted JSON, capped at 2,000 characters."""
    text = json.dumps(sanitize_payload(payload), sort_keys=True, ensure_ascii=False)
    if len(text) > MAX_PAYLOAD_CHARS:
        text = text[: MAX_PAYLOAD_CHARS - len(TRUNCATED)] + TRUNCATED
    return text


def estimate_tokens(text: str) -> int:
    """Estimated model tokens of ``text``: UTF-8 bytes divided by 4, rounded up.

    Four bytes per token is the usual rule of thumb for English prose and code with
    current tokenizers; non-ASCII text costs more bytes per character, so the estimate
    errs on the high side there. It is an estimate for reporting, never a limit.
    """
    return (len(text.encode("utf-8")) + 3) // 4


def clip_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, at a character boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")
