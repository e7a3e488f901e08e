"""Group commit: concurrent callers' blocking writes share one worker-thread call.

While one batch is being written, the calls that arrive queue up; the next batch takes
them (up to a cap) in arrival order. A lone call is a batch of one, so it waits for
nothing: grouping only happens when calls overlap, which is exactly when one commit (one
``fsync`` on SQLite, one round trip on PostgreSQL) for many pays.

Every item has a key (intake: its agent). A batch may answer :data:`BUSY` for an item whose
key someone else holds (the agent's row locked by another transaction): the item, and
every later item of the same key, then waits in this event loop (no thread is parked on
the lock) and is tried again in a later batch, with backoff, until the key is free or
``give_up_after_s`` has passed. Items of one key are always written in arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Literal, TypeAlias, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


class _Busy(Enum):
    BUSY = "busy"


#: An outcome of ``write_batch``: the item's key is held elsewhere; try it again later.
BUSY: Literal[_Busy.BUSY] = _Busy.BUSY

#: What a batch function returns for each item: its result, the exception to raise to that
#: item's caller alone, or :data:`BUSY`.
Outcome: TypeAlias = ResultT | Exception | Literal[_Busy.BUSY]

#: First pause before a busy key is tried again, and the longest (seconds); it doubles
#: while no item of the key gets written. Claims hold an agent for a millisecond or two.
RETRY_FIRST_S = 0.002
RETRY_MAX_S = 0.5


@dataclass
class _Entry(Generic[ItemT, ResultT]):
    item: ItemT
    future: asyncio.Future[ResultT]
    #: When it was submitted (``time.monotonic()``): its own give-up clock.
    queued_at: float = field(default_factory=time.monotonic)


@dataclass
class _Waiting(Generic[ItemT, ResultT]):
    """The entries of one busy key, oldest first, and when to try them again."""

    entries: list[_Entry[ItemT, ResultT]]
    attempts: int = 0
    retry_at: float = 0.0


@dataclass
class _LoopState(Generic[ItemT, ResultT]):
    """What one event loop has queued, waiting on busy keys, and writing."""

    pending: deque[_Entry[ItemT, ResultT]] = field(default_factory=deque)
    busy: dict[Hashable, _Waiting[ItemT, ResultT]] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    flusher: asyncio.Task[None] | None = None
    closing: bool = False


class GroupCommit(Generic[ItemT, ResultT]):
    """Batches concurrent :meth:`submit` calls into calls of ``write_batch`` in a thread.

    Args:
        write_batch: blocking; gets the items of one batch (arrival order; several items
            of one key keep theirs) and returns one :data:`Outcome` per item, in the same
            order. An exception it raises itself goes to every caller of the batch.
        key: the key of an item (items of a busy key wait together, in order).
        max_batch: most items one call of ``write_batch`` gets.
        give_up_after_s: how long an item may wait, counted from its submission, while
            its key is busy (seconds): the first try after that which finds the key busy
            gives its caller ``gave_up(item)``.
        gave_up: the exception for an item whose key stayed busy too long, or that was
            still waiting when :meth:`close` was called.

    Each event loop that calls :meth:`submit` has its own queue and batches.
    """

    def __init__(
        self,
        write_batch: Callable[[Sequence[ItemT]], Sequence[Outcome[ResultT]]],
        *,
        key: Callable[[ItemT], Hashable],
        max_batch: int,
        give_up_after_s: float,
        gave_up: Callable[[ItemT], Exception],
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._write_batch = write_batch
        self._key = key
        self._max_batch = max_batch
        self._give_up_after_s = give_up_after_s
        self._gave_up = gave_up
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, _LoopState[ItemT, ResultT]
        ] = weakref.WeakKeyDictionary()

    async def submit(self, item: ItemT) -> ResultT:
        """Write ``item`` with whatever other items are waiting; return its result.

        A caller cancelled while its item waits (queued, or waiting for its busy key)
        withdraws it; an item whose batch is being written at that moment is written all
        the same.

        Raises:
            Exception: the item's own exception, its batch's, or ``gave_up(item)``.
        """
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState()
        future: asyncio.Future[ResultT] = loop.create_future()
        state.pending.append(_Entry(item, future))
        state.arrived.set()
        if state.flusher is None:
            state.flusher = loop.create_task(self._flush(state))
        return await future

    async def close(self) -> None:
        """Finish this event loop's writes; fail what still waits for a busy key.

        Queued items are written; items waiting for a busy key get ``gave_up``. Returns
        when no write of this event loop is left in flight. Call it before the database is
        closed. Idempotent; the group stays usable.
        """
        state = self._loops.get(asyncio.get_running_loop())
        if state is None:
            return
        state.closing = True
        state.arrived.set()
        try:
            flusher = state.flusher
            if flusher is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(flusher)
        finally:
            state.closing = False

    async def _flush(self, state: _LoopState[ItemT, ResultT]) -> None:
        try:
            while state.pending or state.busy:
                batch, retried = self._take(state)
                if batch:
                    await self._write(state, batch, retried)
                    continue
                if state.closing:
                    self._fail_waiting(state)
                    continue
                if not state.busy:  # its last items gave up or were withdrawn
                    continue
                pause = min(waiting.retry_at for waiting in state.busy.values()) - time.monotonic()
                state.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.arrived.wait(), max(pause, 0.0))
        except BaseException:
            for entry in state.pending:
                entry.future.cancel()
            state.pending.clear()
            self._fail_waiting(state, cancel=True)
            raise
        finally:
            state.flusher = None

    def _take(
        self, state: _LoopState[ItemT, ResultT]
    ) -> tuple[list[_Entry[ItemT, ResultT]], dict[Hashable, _Waiting[ItemT, ResultT]]]:
        """The next batch, and the busy keys it tries again.

        Busy keys due for another try come first (oldest first), then new items in arrival
        order; a new item of a key still busy queues behind that key.
        """
        now = time.monotonic()
        batch: list[_Entry[ItemT, ResultT]] = []
        retried: dict[Hashable, _Waiting[ItemT, ResultT]] = {}
        for key, waiting in list(state.busy.items()):
            waiting.entries = [entry for entry in waiting.entries if not entry.future.done()]
            if not waiting.entries:
                del state.busy[key]
            elif waiting.retry_at <= now and len(batch) < self._max_batch:
                # The oldest items of the key, as many as fit; the rest stay queued, due.
                room = self._max_batch - len(batch)
                batch += waiting.entries[:room]
                waiting.entries = waiting.entries[room:]
                retried[key] = waiting
                if not waiting.entries:
                    del state.busy[key]
        while state.pending and len(batch) < self._max_batch:
            entry = state.pending.popleft()
            if entry.future.done():  # withdrawn by its cancelled caller
                continue
            key = self._key(entry.item)
            if key in state.busy:
                state.busy[key].entries.append(entry)
            else:
                batch.append(entry)
        return batch, retried

    async def _write(
        self,
        state: _LoopState[ItemT, ResultT],
        batch: list[_Entry[ItemT, ResultT]],
        retried: dict[Hashable, _Waiting[ItemT, ResultT]],
    ) -> None:
        outcomes: Sequence[Outcome[ResultT]]
        try:
            outcomes = await asyncio.to_thread(self._write_batch, [e.item for e in batch])
        except Exception as exc:
            outcomes = [exc] * len(batch)
        except BaseException as exc:
            for entry in batch:
                _resolve(entry.future, RuntimeError(f"the batch was interrupted: {exc!r}"))
            raise
        if len(outcomes) != len(batch):
            error = RuntimeError(f"write_batch returned {len(outcomes)} outcomes for {len(batch)}")
            outcomes = [error] * len(batch)
        busy: dict[Hashable, list[_Entry[ItemT, ResultT]]] = {}
        progressed: set[Hashable] = set()
        now = time.monotonic()
        for entry, outcome in zip(batch, outcomes, strict=True):
            if outcome is not BUSY:
                progressed.add(self._key(entry.item))
                _resolve(entry.future, outcome)
            elif now - entry.queued_at > self._give_up_after_s:  # that was its last try
                _resolve(entry.future, self._gave_up(entry.item))
            else:
                busy.setdefault(self._key(entry.item), []).append(entry)
        for key, entries in busy.items():
            # Ahead of the key's items still queued: they arrived later.
            waiting = state.busy.get(key) or retried.get(key) or _Waiting([])
            waiting.entries = entries + (waiting.entries if key in state.busy else [])
            waiting.attempts = 1 if key in progressed else waiting.attempts + 1
            waiting.retry_at = now + min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (waiting.attempts - 1))
            state.busy[key] = waiting

    def _fail_waiting(self, state: _LoopState[ItemT, ResultT], *, cancel: bool = False) -> None:
        for waiting in state.busy.values():
            for entry in waiting.entries:
                if cancel:
                    entry.future.cancel()
                else:
                    _resolve(entry.future, self._gave_up(entry.item))
        state.busy.clear()


def _resolve(future: asyncio.Future[Any], outcome: object) -> None:
    """Answer a caller that still waits; never raises."""
    if future.done():
        return
    if isinstance(outcome, StopIteration):  # a future refuses to carry one
        outcome = RuntimeError(f"the write raised {outcome!r}")
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
