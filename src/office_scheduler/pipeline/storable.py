r"""Make agent-produced text and JSON safe to store (pure functions).

Agents print anything. PostgreSQL rejects NUL (``\x00``) in ``text`` and ``jsonb`` values
(``psycopg.DataError``), UTF-8 cannot encode a lone surrogate (``\ud800``), and JSON has
no ``NaN``/``Infinity``; any one of them in a run event, a result or an error would make
the write fail and lose the batch. Everything an executor reports passes through here
before the store sees it: NUL and lone surrogates are removed from every string (keys
too), non-finite floats become ``null``, and run-event ``data`` is size-capped (each
string at :data:`MAX_DATA_STRING` characters, the whole object at about
:data:`MAX_DATA_CHARS` characters of JSON).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from office_scheduler.domain.execution import Outcome

#: Longest string inside a run event's ``data``, in characters.
MAX_DATA_STRING = 4000
#: Largest run event ``data`` (its JSON text), in characters.
MAX_DATA_CHARS = 16_000
#: Strings kept per string when an event's ``data`` is over :data:`MAX_DATA_CHARS`.
_SHRUNK_STRING = 200
#: Items kept per list or object when an event's ``data`` is over :data:`MAX_DATA_CHARS`.
_SHRUNK_ITEMS = 20
#: Deepest nesting kept; deeper values become ``"…"``.
MAX_DEPTH = 64
#: Longest error text stored on a run, in characters.
MAX_ERROR_CHARS = 4000

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# SQLAlchemy appends the statement, its parameters and a help link to a driver error.
_SQL_DETAIL = re.compile(r"\s*\[SQL: .*|\s*\(Background on this error at: .*", re.DOTALL)


def clean_text(text: str, *, limit: int | None = None) -> str:
    """``text`` without NUL characters and lone surrogates, cut at ``limit`` characters.

    A cut text ends with ``…(N more chars)`` (so it may exceed ``limit`` by that note).
    """
    text = _UNSTORABLE.sub("", text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + f"…({len(text) - limit} more chars)"
    return text


def clean_json(
    value: Any, *, limit: int | None = None, items: int | None = None, depth: int = 0
) -> Any:
    """A copy of a JSON-like value that every database can store.

    Strings (values and keys) go through :func:`clean_text` (cut at ``limit``), non-finite
    floats become None, tuples become lists, lists and objects keep their first ``items``
    entries (all when None), values nested deeper than :data:`MAX_DEPTH` become ``"…"``,
    and anything else that is not JSON becomes its (cleaned) ``str``.
    """
    if isinstance(value, str):
        return clean_text(value, limit=limit)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, Mapping):
        keys = list(value)[:items] if items is not None else list(value)
        return {
            clean_text(str(key), limit=limit): clean_json(
                value[key], limit=limit, items=items, depth=depth + 1
            )
            for key in keys
        }
    if isinstance(value, list | tuple):
        kept = value[:items] if items is not None else value
        return [clean_json(item, limit=limit, items=items, depth=depth + 1) for item in kept]
    return clean_text(str(value), limit=limit)


def cap_event_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """Run-event ``data`` cleaned and size-capped (see the module docstring).

    Each string is cut at :data:`MAX_DATA_STRING` characters; when the JSON text is still
    over :data:`MAX_DATA_CHARS`, strings are cut at 200 characters and lists/objects at 20
    items, with ``"truncated": true`` added; if even that is too large, only the key names
    are kept (``{"truncated": true, "keys": [...]}``).
    """
    cleaned: dict[str, Any] = clean_json(dict(data), limit=MAX_DATA_STRING)
    if _size(cleaned) <= MAX_DATA_CHARS:
        return cleaned
    shrunk: dict[str, Any] = clean_json(cleaned, limit=_SHRUNK_STRING, items=_SHRUNK_ITEMS)
    shrunk["truncated"] = True
    if _size(shrunk) <= MAX_DATA_CHARS:
        return shrunk
    keys = [clean_text(str(key), limit=100) for key in list(cleaned)[:50]]
    return {"truncated": True, "keys": keys}


def short_error(text: str | None) -> str | None:
    """An error text fit for a run row: cleaned, without SQL or parameters, capped.

    A database error's text (SQLAlchemy appends ``[SQL: ...]``, ``[parameters: ...]`` and
    a help link) keeps only the driver's class and message, e.g. ``(psycopg.DataError)
    PostgreSQL text fields cannot contain NUL (0x00) bytes``; statements and parameters
    may hold agent output and secrets and belong in the server log only.
    """
    if text is None:
        return None
    return clean_text(_SQL_DETAIL.sub("", text), limit=MAX_ERROR_CHARS)


def storable_outcome(outcome: Outcome) -> Outcome:
    """``outcome`` with its message, result, session id and model made storable."""
    usage = outcome.usage
    if usage.model is not None:
        usage = replace(usage, model=clean_text(usage.model, limit=200))
    session = outcome.external_session_id
    return replace(
        outcome,
        message=clean_text(outcome.message),
        result=clean_json(outcome.result) if outcome.result is not None else None,
        external_session_id=clean_text(session)[:500] if session is not None else None,
        usage=usage,
    )


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, default=str))
