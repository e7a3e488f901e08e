"""GroupCommit: concurrent calls share batches; each caller gets its own outcome."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from office_scheduler.intake.group import ALONE, GroupCommit, Outcome


class Recorder:
    """Doubles numbers: odd ones fail, multiples of 10 are handed back to be written alone.

    Records every batch and every lone write; ``release`` holds batches, ``release_one``
    holds lone writes of items listed in ``held``.
    """

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.alone: list[int] = []
        self.release = threading.Event()
        self.release.set()
        self.release_one = threading.Event()
        self.release_one.set()
        self.held: set[int] = set()

    def batch(self, items: Sequence[int]) -> list[Outcome[int]]:
        self.release.wait(5)
        self.batches.append(list(items))
        return [self._outcome(n) for n in items]

    def one(self, item: int) -> int:
        if item in self.held:
            self.release_one.wait(5)
        self.alone.append(item)
        if item % 2:
            raise ValueError(f"odd {item}")
        return item * 2

    @staticmethod
    def _outcome(n: int) -> Outcome[int]:
        if n % 10 == 0 and n:
            return ALONE
        return ValueError(f"odd {n}") if n % 2 else n * 2

    def group(self, max_batch: int = 10) -> GroupCommit[int, int]:
        return GroupCommit(self.batch, self.one, max_batch=max_batch)


async def test_a_lone_call_is_written_alone() -> None:
    recorder = Recorder()
    assert await recorder.group().submit(4) == 8
    assert (recorder.batches, recorder.alone) == ([], [4])


async def test_concurrent_calls_share_a_batch_in_arrival_order() -> None:
    recorder = Recorder()
    group = recorder.group()
    results = await asyncio.gather(*(group.submit(n) for n in (2, 4, 6)))
    assert results == [4, 8, 12]
    assert recorder.batches == [[2, 4, 6]]


async def test_calls_arriving_during_a_write_form_the_next_batch_capped() -> None:
    recorder = Recorder()
    recorder.release.clear()
    group = recorder.group(max_batch=2)
    first = asyncio.ensure_future(group.submit(2))
    second = asyncio.ensure_future(group.submit(4))
    await asyncio.sleep(0.05)  # the first batch is in its thread, held by `release`
    later = [asyncio.ensure_future(group.submit(n)) for n in (6, 8, 12, 14, 16)]
    await asyncio.sleep(0)
    recorder.release.set()
    assert list(await asyncio.gather(first, second)) == [4, 8]
    assert await asyncio.gather(*later) == [12, 16, 24, 28, 32]
    assert recorder.batches == [[2, 4], [6, 8], [12, 14]]
    assert recorder.alone == [16]  # the last batch held one item: written alone


async def test_an_items_exception_reaches_its_caller_alone() -> None:
    group = Recorder().group()
    results = await asyncio.gather(*(group.submit(n) for n in (2, 3, 4)), return_exceptions=True)
    assert results[0] == 4
    assert isinstance(results[1], ValueError)
    assert str(results[1]) == "odd 3"
    assert results[2] == 8


async def test_an_item_handed_back_is_answered_when_its_own_write_ends() -> None:
    recorder = Recorder()
    recorder.held = {20}
    recorder.release_one.clear()
    group = recorder.group()
    slow = asyncio.ensure_future(group.submit(20))  # handed back, then held in its write
    quick = asyncio.ensure_future(group.submit(2))
    assert await asyncio.wait_for(quick, 5) == 4  # not held up by the slow one
    assert not slow.done()
    recorder.release_one.set()
    assert await slow == 40
    assert (recorder.batches, recorder.alone) == ([[20, 2]], [20])


async def test_a_failing_batch_fails_each_of_its_callers_and_the_next_one_runs() -> None:
    calls: list[list[int]] = []

    def broken_once(items: Sequence[int]) -> list[Outcome[int]]:
        calls.append(list(items))
        if len(calls) == 1:
            raise OSError("disk full")
        return list(items)

    group = GroupCommit(broken_once, lambda n: n, max_batch=10)
    results = await asyncio.gather(*(group.submit(n) for n in (1, 2)), return_exceptions=True)
    assert [type(r) for r in results] == [OSError, OSError]
    assert list(await asyncio.gather(group.submit(3), group.submit(4))) == [3, 4]
    assert calls == [[1, 2], [3, 4]]


async def test_a_short_answer_from_the_batch_fails_its_callers_instead_of_hanging() -> None:
    group: GroupCommit[int, int] = GroupCommit(lambda items: [1], lambda n: n, max_batch=10)
    results = await asyncio.gather(*(group.submit(n) for n in (1, 2)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_a_base_exception_in_the_batch_answers_every_caller() -> None:
    """Break-it: a BaseException left every caller of the batch pending forever."""

    class Interrupt(BaseException):
        pass

    def interrupted(items: Sequence[int]) -> list[Outcome[int]]:
        raise Interrupt

    group: GroupCommit[int, int] = GroupCommit(interrupted, lambda n: n, max_batch=10)
    callers = [asyncio.ensure_future(group.submit(n)) for n in (1, 2)]
    done, _ = await asyncio.wait(callers, timeout=5)
    assert len(done) == 2
    for caller in callers:
        error = caller.exception()
        assert isinstance(error, RuntimeError)
        assert "interrupted" in str(error)


async def test_a_stop_iteration_outcome_reaches_its_caller_as_a_runtime_error() -> None:
    """Break-it: a future refuses a StopIteration, which left the batch's callers hanging."""
    group: GroupCommit[int, int] = GroupCommit(
        lambda items: [StopIteration(), *items[1:]], lambda n: n, max_batch=10
    )
    results = await asyncio.wait_for(
        asyncio.gather(*(group.submit(n) for n in (1, 2, 3)), return_exceptions=True), 5
    )
    assert isinstance(results[0], RuntimeError)
    assert results[1:] == [2, 3]


async def test_a_caller_cancelled_while_waiting_withdraws_its_item() -> None:
    """Break-it: a cancelled waiting item was written and never announced."""
    recorder = Recorder()
    recorder.release.clear()
    group = recorder.group()
    held = [asyncio.ensure_future(group.submit(n)) for n in (2, 4)]
    await asyncio.sleep(0.05)  # that batch is being written
    withdrawn = asyncio.ensure_future(group.submit(6))
    kept = [asyncio.ensure_future(group.submit(n)) for n in (8, 12)]
    await asyncio.sleep(0)
    withdrawn.cancel()
    recorder.release.set()
    assert await asyncio.gather(*held, *kept) == [4, 8, 16, 24]
    assert withdrawn.cancelled()
    assert recorder.batches == [[2, 4], [8, 12]]


async def test_a_caller_cancelled_while_its_batch_is_written_leaves_it_written() -> None:
    recorder = Recorder()
    recorder.release.clear()
    group = recorder.group()
    doomed = asyncio.ensure_future(group.submit(2))
    kept = asyncio.ensure_future(group.submit(4))
    await asyncio.sleep(0.05)
    doomed.cancel()
    recorder.release.set()
    assert await kept == 8
    assert doomed.cancelled()
    assert recorder.batches == [[2, 4]]


def test_each_event_loop_gets_its_own_batches_even_at_once() -> None:
    """Break-it: a second loop's items were taken by the first loop's flusher."""
    recorder = Recorder()
    recorder.release.clear()
    group = recorder.group()
    results: dict[str, list[int]] = {}

    def on_its_own_loop(name: str, items: tuple[int, ...]) -> None:
        async def send() -> list[int]:
            return list(await asyncio.gather(*(group.submit(n) for n in items)))

        results[name] = asyncio.run(send())

    threads = [
        threading.Thread(target=on_its_own_loop, args=("a", (2, 4))),
        threading.Thread(target=on_its_own_loop, args=("b", (6, 8))),
    ]
    for thread in threads:
        thread.start()
    recorder.release.set()
    for thread in threads:
        thread.join(10)
    assert results == {"a": [4, 8], "b": [12, 16]}
    assert sorted(map(sorted, recorder.batches)) == [[2, 4], [6, 8]]


def test_a_later_asyncio_run_starts_afresh() -> None:
    recorder = Recorder()
    group = recorder.group()
    assert asyncio.run(group.submit(2)) == 4
    assert asyncio.run(group.submit(6)) == 12
    assert recorder.alone == [2, 6]


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Recorder().group(max_batch=0)
