"""Process helpers shared by the executors that spawn agent processes (``command``, ``acp``).

Every agent process leads its own process group (``start_new_session=True``), so a signal
sent to the group reaches the agent and anything it started. Output streams are cut into
lines with a bounded buffer, so one endless line cannot exhaust memory.
"""

from __future__ import annotations

import contextlib
import os
import signal


def signal_group(pid: int, signum: signal.Signals) -> None:
    """Send ``signum`` to the process group led by ``pid``; a vanished group is ignored.

    The leader's pid is the group id (``start_new_session``); the group outlives a reaped
    leader while any member lives, so this also reaches orphaned grandchildren.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def describe_exit(code: int | None) -> str:
    """Describe a process's return code: ``exit code N`` or ``killed by signal NAME``."""
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class LineSplitter:
    """Cuts a byte stream into lines while holding a bounded part of one line.

    Args:
        line_limit: bytes kept of an ordinary line; the rest is counted as dropped.
        json_limit: bytes kept of a line that starts with ``{`` (it may be the JSON result).
    """

    def __init__(self, *, line_limit: int, json_limit: int) -> None:
        self._line_limit = line_limit
        self._json_limit = json_limit
        self._limit = line_limit
        self._buf = bytearray()
        self._dropped = 0
        self._fresh = True

    def feed(self, chunk: bytes) -> list[tuple[bytearray, int]]:
        """Add a chunk; return the lines it completes as (kept bytes, dropped byte count)."""
        lines: list[tuple[bytearray, int]] = []
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            self._append(chunk, start, end)
            if newline < 0:
                break
            lines.append(self._take())
            start = newline + 1
        return lines

    def finish(self) -> tuple[bytearray, int] | None:
        """Return the unterminated last line at end of stream, if any."""
        return None if self._fresh else self._take()

    def _append(self, chunk: bytes, start: int, end: int) -> None:
        if start == end:
            return
        if self._fresh:
            # Only a line that may be the JSON result is worth keeping beyond the sink cap.
            self._limit = self._json_limit if chunk[start] == ord("{") else self._line_limit
            self._fresh = False
        keep = max(0, min(end - start, self._limit - len(self._buf)))
        self._buf += memoryview(chunk)[start : start + keep]
        self._dropped += end - start - keep

    def _take(self) -> tuple[bytearray, int]:
        # Hand the buffer over instead of copying it: a result line can be megabytes.
        line, dropped = self._buf, self._dropped
        self._buf = bytearray()
        self._dropped = 0
        self._fresh = True
        if line.endswith(b"\r") and not dropped:
            del line[-1:]
        return line, dropped
