"""Group commit: concurrent callers' blocking writes share one worker-thread call.

While one batch is being written, the calls that arrive queue up; the next batch takes
all of them (up to a cap) in arrival order. A lone call is a batch of one, so it waits
for nothing: grouping only happens when calls overlap, which is exactly when one commit
(one ``fsync`` on SQLite, one round trip on PostgreSQL) for many pays.

A batch may hand items back (:data:`ALONE`): each is then written by a call of its own,
concurrently, and its caller is answered as soon as that write ends. That is how one
item that must wait (its agent locked by someone else) or that failed the batch's
transaction stops holding up the others.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Literal, TypeAlias, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


class _Alone(Enum):
    ALONE = "alone"


#: An outcome of ``write_batch``: write this item again with ``write_one``, on its own.
ALONE: Literal[_Alone.ALONE] = _Alone.ALONE

#: What a batch function returns for each item: its result, the exception to raise to that
#: item's caller alone, or :data:`ALONE`.
Outcome: TypeAlias = ResultT | Exception | Literal[_Alone.ALONE]


@dataclass
class _LoopState(Generic[ItemT, ResultT]):
    """What one event loop has waiting and writing."""

    pending: list[tuple[ItemT, asyncio.Future[ResultT]]] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    alone: set[asyncio.Task[None]] = field(default_factory=set)


class GroupCommit(Generic[ItemT, ResultT]):
    """Batches concurrent :meth:`submit` calls into calls of ``write_batch`` in a thread.

    Args:
        write_batch: blocking; gets the items of one batch (arrival order, at least two)
            and returns one :data:`Outcome` per item, in the same order. An exception it
            raises itself goes to every caller of the batch.
        write_one: blocking; writes one item alone (a lone call, or an item its batch
            handed back as :data:`ALONE`) and returns its result or raises.
        max_batch: most items one call of ``write_batch`` gets.

    Each event loop that calls :meth:`submit` has its own queue and batches.
    """

    def __init__(
        self,
        write_batch: Callable[[Sequence[ItemT]], Sequence[Outcome[ResultT]]],
        write_one: Callable[[ItemT], ResultT],
        *,
        max_batch: int,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._write_batch = write_batch
        self._write_one = write_one
        self._max_batch = max_batch
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, _LoopState[ItemT, ResultT]
        ] = weakref.WeakKeyDictionary()

    async def submit(self, item: ItemT) -> ResultT:
        """Write ``item`` with whatever other items are waiting; return its result.

        A caller cancelled while its item waits for a batch withdraws it; once its batch
        is being written, the item is written all the same (as any call handed to a
        thread).

        Raises:
            Exception: the item's own exception, or its batch's.
        """
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState()
        future: asyncio.Future[ResultT] = loop.create_future()
        state.pending.append((item, future))
        if state.flusher is None:
            state.flusher = loop.create_task(self._flush(state))
        return await future

    async def _flush(self, state: _LoopState[ItemT, ResultT]) -> None:
        try:
            while state.pending:
                batch = [entry for entry in state.pending[: self._max_batch] if _waiting(entry)]
                del state.pending[: self._max_batch]
                if len(batch) == 1:
                    await self._alone(batch[0])
                elif batch:
                    await self._write(state, batch)
        except BaseException:
            for _, future in state.pending:
                future.cancel()
            state.pending.clear()
            raise
        finally:
            state.flusher = None

    async def _write(
        self, state: _LoopState[ItemT, ResultT], batch: list[tuple[ItemT, asyncio.Future[ResultT]]]
    ) -> None:
        outcomes: Sequence[Outcome[ResultT]]
        try:
            outcomes = await asyncio.to_thread(self._write_batch, [item for item, _ in batch])
        except Exception as exc:
            outcomes = [exc] * len(batch)
        except BaseException as exc:
            _fail(batch, RuntimeError(f"the batch was interrupted: {exc!r}"))
            raise
        if len(outcomes) != len(batch):
            error = RuntimeError(f"write_batch returned {len(outcomes)} outcomes for {len(batch)}")
            outcomes = [error] * len(batch)
        for entry, outcome in zip(batch, outcomes, strict=True):
            if outcome is ALONE:
                if _waiting(entry):
                    task = asyncio.get_running_loop().create_task(self._alone(entry))
                    state.alone.add(task)
                    task.add_done_callback(state.alone.discard)
            else:
                _resolve(entry[1], outcome)

    async def _alone(self, entry: tuple[ItemT, asyncio.Future[ResultT]]) -> None:
        item, future = entry
        try:
            result = await asyncio.to_thread(self._write_one, item)
        except Exception as exc:
            _resolve(future, exc)
        except BaseException as exc:
            _resolve(future, RuntimeError(f"the write was interrupted: {exc!r}"))
            raise
        else:
            _resolve(future, result)


def _waiting(entry: tuple[object, asyncio.Future[Any]]) -> bool:
    """Its caller still waits (it was not cancelled)."""
    return not entry[1].done()


def _resolve(future: asyncio.Future[ResultT], outcome: ResultT | Exception) -> None:
    """Answer a caller that still waits; never raises."""
    if future.done():
        return
    if isinstance(outcome, StopIteration):  # a future refuses to carry one
        outcome = RuntimeError(f"the write raised {outcome!r}")
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _fail(batch: list[tuple[ItemT, asyncio.Future[ResultT]]], error: Exception) -> None:
    for _, future in batch:
        _resolve(future, error)
