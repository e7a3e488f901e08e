"""The agent's stdio as an ``acp`` message transport with bounded lines.

The ``acp`` package's own stdio framing reads a whole line however long it is and logs a
traceback for every line that is not JSON; a JSON value that is not an object ends its
receive loop. :class:`BoundedTransport` replaces that framing (``acp`` accepts any object
with ``send``/``receive``/``close`` as a transport):

* a line longer than :data:`LINE_LIMIT` bytes is never held whole: reading stops, the
  connection sees end of stream, and :attr:`BoundedTransport.overflow` tells the executor
  to fail the run (family ``crash``, "agent sent a line over N bytes");
* lines that are not JSON, or not a JSON-RPC object, are dropped before the connection
  sees them; :attr:`BoundedTransport.garbage` counts them and
  :attr:`BoundedTransport.garbage_sample` keeps the first (capped), for one
  ``acp_protocol_garbage`` run event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

#: Longest line (one JSON-RPC message) accepted from the agent, in bytes.
LINE_LIMIT = 8 * 2**20
#: Characters kept of the first garbage line.
SAMPLE_CHARS = 200
_READ_SIZE = 65536


class BoundedTransport:
    """Newline-delimited JSON-RPC over the agent's stdin/stdout, one line at most ``limit`` bytes.

    Args:
        reader: the agent's stdout.
        writer: the agent's stdin.
        touch: called whenever the agent wrote something (inactivity deadline).
        limit: longest accepted line in bytes (:data:`LINE_LIMIT`).

    Attributes:
        overflow: the limit, once a line went over it (reading has stopped then).
        garbage: lines dropped because they were not JSON-RPC objects.
        garbage_sample: the first dropped line, cut at :data:`SAMPLE_CHARS` characters.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        touch: Callable[[], None],
        limit: int = LINE_LIMIT,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._touch = touch
        self._limit = limit
        self._data = b""
        self._pos = 0
        self._partial: list[bytes] = []
        self._size = 0
        self._eof = False
        self._lock = asyncio.Lock()
        self.overflow: int | None = None
        self.garbage = 0
        self.garbage_sample: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as a JSON line (messages never interleave)."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next JSON-RPC object from the agent; None at end of stream or on overflow."""
        while True:
            line = await self._next_line()
            if line is None:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                message = None
            if _is_message(message):
                assert isinstance(message, dict)
                return message
            self._note_garbage(line)

    async def close(self) -> None:
        """Nothing to release: the executor closes the agent's stdin itself."""

    async def _next_line(self) -> bytes | None:
        """The next line without its newline; None at end of stream or past the limit.

        A partial line is held as a list of chunks (never one growing buffer, whose
        reallocation would briefly need twice its size), at most ``limit`` bytes of it.
        """
        while True:
            if self._pos >= len(self._data):
                if self._eof:
                    return self._take(b"") if self._size else None
                self._data, self._pos = await self._reader.read(_READ_SIZE), 0
                if not self._data:
                    self._eof = True
                    continue
                self._touch()
            newline = self._data.find(b"\n", self._pos)
            end = len(self._data) if newline < 0 else newline
            piece = self._data[self._pos : end]
            self._pos = end + 1 if newline >= 0 else end
            if self._size + len(piece) > self._limit:
                self.overflow = self._limit
                self._partial, self._size, self._data = [], 0, b""
                return None
            if newline >= 0:
                return self._take(piece)
            self._partial.append(piece)
            self._size += len(piece)

    def _take(self, last: bytes) -> bytes:
        self._partial.append(last)
        line = b"".join(self._partial)
        self._partial, self._size = [], 0
        return line

    def _note_garbage(self, line: bytes) -> None:
        self.garbage += 1
        if self.garbage_sample is None:
            sample = line[: SAMPLE_CHARS * 4].decode("utf-8", "replace")
            self.garbage_sample = sample[:SAMPLE_CHARS]


def _is_message(value: object) -> bool:
    """A JSON-RPC request, notification or response the ``acp`` connection can handle."""
    if not isinstance(value, dict):
        return False
    method = value.get("method")
    if "method" in value and not isinstance(method, str):
        return False
    if "id" in value:
        request_id = value["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, int | str | None):
            return False
    elif method is None:
        return False
    return True
