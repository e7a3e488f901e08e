"""Group commit: concurrent callers' blocking writes share one worker-thread call.

While one batch is being written, the calls that arrive queue up; the next batch takes
all of them (up to a cap) in arrival order. A lone call is a batch of one, so it waits
for nothing: grouping only happens when calls overlap, which is exactly when one commit
(one ``fsync`` on SQLite, one round trip on PostgreSQL) for many pays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeAlias, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

#: What a batch function returns for each item: its result, or the exception to raise to
#: that item's caller alone.
Outcome: TypeAlias = ResultT | Exception


class GroupCommit(Generic[ItemT, ResultT]):
    """Batches concurrent :meth:`submit` calls into calls of ``write_batch`` in a thread.

    Args:
        write_batch: blocking; gets the items of one batch (arrival order, at least one)
            and returns one outcome per item, in the same order: a result, or an
            ``Exception`` that only that item's caller receives. An exception it raises
            itself goes to every caller of the batch.
        max_batch: most items one call of ``write_batch`` gets.

    Bound to the event loop of its first call; a call from another loop (a later
    ``asyncio.run``) starts afresh there.
    """

    def __init__(
        self,
        write_batch: Callable[[Sequence[ItemT]], Sequence[Outcome[ResultT]]],
        *,
        max_batch: int,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._write_batch = write_batch
        self._max_batch = max_batch
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[ItemT, asyncio.Future[ResultT]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: ItemT) -> ResultT:
        """Write ``item`` with whatever other items are waiting; return its result.

        Cancelling the caller does not withdraw an item whose batch is being written (as
        with any call handed to a thread).

        Raises:
            Exception: the item's own exception from ``write_batch``, or the batch's.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._pending, self._flusher = loop, [], None
        future: asyncio.Future[ResultT] = loop.create_future()
        self._pending.append((item, future))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._write(batch)
        except asyncio.CancelledError:
            for _, future in self._pending:
                future.cancel()
            self._pending.clear()
            raise
        finally:
            self._flusher = None

    async def _write(self, batch: list[tuple[ItemT, asyncio.Future[ResultT]]]) -> None:
        try:
            outcomes = await asyncio.to_thread(self._write_batch, [item for item, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:
            outcomes = [exc] * len(batch)
        if len(outcomes) != len(batch):
            error = RuntimeError(f"write_batch returned {len(outcomes)} outcomes for {len(batch)}")
            outcomes = [error] * len(batch)
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
