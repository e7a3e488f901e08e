"""Records a session's process id and output into the run's event log, in batches.

Everything recorded is made storable first (:mod:`office_scheduler.pipeline.storable`):
NUL characters and lone surrogates are removed from lines, messages and event ``data``,
lines and messages are capped at :data:`MAX_LINE_CHARS` characters, and event ``data``
is size-capped (4,000 characters per string, about 16,000 per event). The run's secrets
(its token, its executor's ``env`` values) are masked first
(:mod:`office_scheduler.pipeline.redaction`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from office_scheduler.clock import Clock
from office_scheduler.pipeline.redaction import Redactor
from office_scheduler.pipeline.storable import cap_event_data, clean_text
from office_scheduler.store.facade import Store

BATCH_LINES = 100
BATCH_SECONDS = 0.5
MAX_LINE_CHARS = 4000


class OutputRecorder:
    """An :class:`~office_scheduler.executors.base.ExecutionSink` backed by ``run_events``.

    Output lines are written in batches (every 100 lines or half a second) so that a
    chatty agent costs few transactions; after ``limit`` lines the rest is counted but
    not stored, and one ``output_truncated`` event says how many were dropped.
    """

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        run_id: int,
        limit: int,
        redactor: Redactor | None = None,
    ) -> None:
        self._store = store
        self._redact = redactor or Redactor(())
        self._clock = clock
        self._run_id = run_id
        self._limit = limit
        self._stored = 0
        self._dropped = 0
        self._buffer: list[tuple[int, str, str, dict[str, Any], datetime]] = []
        self._last_flush = 0.0

    async def started(self, pid: int) -> None:
        """Record the session's process id on the run and in its log."""
        await asyncio.to_thread(self._store.queue.set_pid, self._run_id, pid, now=self._clock.now())

    async def output(self, stream: str, line: str) -> None:
        """Buffer one output line; flush when the batch is full or old enough."""
        if self._stored >= self._limit:
            self._dropped += 1
            return
        self._stored += 1
        line = clean_text(self._redact.text(line), limit=MAX_LINE_CHARS)
        self._buffer.append((self._run_id, f"output.{stream}", line, {}, self._clock.now()))
        loop_now = asyncio.get_running_loop().time()
        if len(self._buffer) >= BATCH_LINES or loop_now - self._last_flush >= BATCH_SECONDS:
            await self.flush()

    async def event(self, kind: str, message: str, data: Mapping[str, Any]) -> None:
        """Buffer one structured run event, kept in order with the output lines.

        Events are not subject to the output ``limit``: executors send few of them (the
        ``acp`` executor caps its own), and decisions such as a session fallback or a
        permission answer must not be lost behind a flood of output.
        """
        message = clean_text(self._redact.text(message), limit=MAX_LINE_CHARS)
        data = self._redact.data(data)
        record = (self._run_id, clean_text(kind, limit=100), message, cap_event_data(data))
        self._buffer.append((*record, self._clock.now()))
        loop_now = asyncio.get_running_loop().time()
        if len(self._buffer) >= BATCH_LINES or loop_now - self._last_flush >= BATCH_SECONDS:
            await self.flush()

    async def flush(self) -> None:
        """Write buffered lines (and the truncation note, once output has ended)."""
        self._last_flush = asyncio.get_running_loop().time()
        batch, self._buffer = self._buffer, []
        if batch:
            await asyncio.to_thread(self._store.runlog.add_run_events, batch)

    async def close(self) -> None:
        """Flush, and note how many lines were dropped past the limit."""
        await self.flush()
        if self._dropped:
            await asyncio.to_thread(
                self._store.runlog.add_run_event,
                self._run_id,
                kind="output_truncated",
                message=f"{self._dropped} more output lines were not stored",
                data={"dropped_lines": self._dropped},
                now=self._clock.now(),
            )
