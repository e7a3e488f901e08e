"""GroupCommit: concurrent calls share batches; each caller gets its own outcome."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from office_scheduler.intake.group import GroupCommit, Outcome


class Recorder:
    """A batch function that doubles numbers, fails odd ones, and records every batch."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = threading.Event()
        self.release.set()

    def __call__(self, items: Sequence[int]) -> list[Outcome[int]]:
        self.release.wait(5)
        self.batches.append(list(items))
        return [ValueError(f"odd {n}") if n % 2 else n * 2 for n in items]


async def test_a_lone_call_is_a_batch_of_one() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder, max_batch=10)
    assert await group.submit(4) == 8
    assert recorder.batches == [[4]]


async def test_concurrent_calls_share_a_batch_in_arrival_order() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder, max_batch=10)
    results = await asyncio.gather(*(group.submit(n) for n in (2, 4, 6)))
    assert results == [4, 8, 12]
    assert recorder.batches == [[2, 4, 6]]


async def test_calls_arriving_during_a_write_form_the_next_batch_capped() -> None:
    recorder = Recorder()
    recorder.release.clear()
    group = GroupCommit(recorder, max_batch=2)
    first = asyncio.ensure_future(group.submit(0))
    await asyncio.sleep(0.05)  # the first batch is in its thread, held by `release`
    later = [asyncio.ensure_future(group.submit(n)) for n in (2, 4, 6, 8, 10)]
    await asyncio.sleep(0)
    recorder.release.set()
    assert await first == 0
    assert await asyncio.gather(*later) == [4, 8, 12, 16, 20]
    assert recorder.batches == [[0], [2, 4], [6, 8], [10]]


async def test_an_items_exception_reaches_its_caller_alone() -> None:
    group = GroupCommit(Recorder(), max_batch=10)
    results = await asyncio.gather(*(group.submit(n) for n in (2, 3, 4)), return_exceptions=True)
    assert results[0] == 4
    assert isinstance(results[1], ValueError)
    assert str(results[1]) == "odd 3"
    assert results[2] == 8


async def test_a_failing_batch_fails_each_of_its_callers_and_the_next_one_runs() -> None:
    calls: list[list[int]] = []

    def broken_once(items: Sequence[int]) -> list[Outcome[int]]:
        calls.append(list(items))
        if len(calls) == 1:
            raise OSError("disk full")
        return list(items)

    group = GroupCommit(broken_once, max_batch=10)
    results = await asyncio.gather(*(group.submit(n) for n in (1, 2)), return_exceptions=True)
    assert [type(r) for r in results] == [OSError, OSError]
    assert await group.submit(3) == 3
    assert calls == [[1, 2], [3]]


async def test_a_short_answer_from_the_batch_fails_its_callers_instead_of_hanging() -> None:
    group: GroupCommit[int, int] = GroupCommit(lambda items: [1], max_batch=10)
    results = await asyncio.gather(*(group.submit(n) for n in (1, 2)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_a_cancelled_caller_leaves_the_others_their_results() -> None:
    recorder = Recorder()
    recorder.release.clear()
    group = GroupCommit(recorder, max_batch=10)
    blocker = asyncio.ensure_future(group.submit(0))
    await asyncio.sleep(0.05)
    doomed = asyncio.ensure_future(group.submit(2))
    kept = asyncio.ensure_future(group.submit(4))
    await asyncio.sleep(0)
    doomed.cancel()
    recorder.release.set()
    assert await blocker == 0
    assert await kept == 8
    assert doomed.cancelled()
    assert recorder.batches == [[0], [2, 4]]  # its item was written all the same


def test_each_event_loop_gets_its_own_batches() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder, max_batch=10)
    assert asyncio.run(group.submit(2)) == 4
    assert asyncio.run(group.submit(6)) == 12
    assert recorder.batches == [[2], [6]]


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        GroupCommit(Recorder(), max_batch=0)
