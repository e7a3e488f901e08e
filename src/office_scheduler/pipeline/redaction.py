"""Secrets out of the run log: the values a session was given are masked in what it prints.

An agent may echo its environment (``env``, a debug dump, an error quoting a request
header). Before output lines and run events are stored, every occurrence of the run's
secrets — its run token and the values of its executor's ``env`` — is replaced by
:data:`MASK`. Values shorter than :data:`MIN_SECRET_CHARS` are not treated as secrets (a
``DEBUG=1`` would otherwise mask every ``1``). Text is first stripped of what storage
strips (NUL characters, lone surrogates), so a secret split by them (an agent printing
UTF-16) is still found and is not joined back together by the storage later.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from office_scheduler.pipeline.storable import clean_text

MASK = "[redacted]"
MIN_SECRET_CHARS = 6


class Redactor:
    """Replaces known secret values in text and JSON-like data.

    Args:
        secrets: the values to mask (short and empty ones are ignored).
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._secrets = kept
        #: Compiled on the first text that holds a secret (most runs' output holds none).
        self._pattern: re.Pattern[str] | None = None

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by :data:`MASK`.

        NUL characters and lone surrogates are removed first (when there are secrets).
        """
        if not self._secrets:
            return value
        cleaned = clean_text(value)
        if not any(secret in cleaned for secret in self._secrets):
            return cleaned
        if self._pattern is None:
            self._pattern = re.compile("|".join(map(re.escape, self._secrets)))
        return self._pattern.sub(MASK, cleaned)

    def data(self, value: Any) -> Any:
        """A copy of a JSON-like value with secrets masked in every string (keys too)."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value
