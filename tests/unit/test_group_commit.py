"""GroupCommit: concurrent calls share batches; each caller gets its own outcome."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from office_scheduler.intake.group import BUSY, GroupCommit, Outcome


class GaveUp(Exception):
    pass


class Recorder:
    """Doubles numbers; odd ones fail. An item's key is ``n // 100``; items of a key in
    ``busy`` come back BUSY. Records every batch; ``release`` holds batches."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = threading.Event()
        self.release.set()
        self.busy: set[int] = set()
        self.done: list[int] = []

    def batch(self, items: Sequence[int]) -> list[Outcome[int]]:
        self.release.wait(5)
        self.batches.append(list(items))
        self.done += [n for n in items if n // 100 not in self.busy]
        return [self._outcome(n) for n in items]

    def _outcome(self, n: int) -> Outcome[int]:
        if n // 100 in self.busy:
            return BUSY
        return ValueError(f"odd {n}") if n % 2 else n * 2

    def group(self, max_batch: int = 10, give_up_after_s: float = 5.0) -> GroupCommit[int, int]:
        return GroupCommit(
            self.batch,
            key=lambda n: n // 100,
            max_batch=max_batch,
            give_up_after_s=give_up_after_s,
            gave_up=lambda n: GaveUp(f"gave up on {n}"),
        )


async def test_a_lone_call_is_a_batch_of_one() -> None:
    recorder = Recorder()
    assert await recorder.group().submit(4) == 8
    assert recorder.batches == [[4]]


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
    await asyncio.sleep(0.05)  # the first batch is in its thread, held by `release`
    later = [asyncio.ensure_future(group.submit(n)) for n in (4, 6, 8, 12, 14)]
    await asyncio.sleep(0)
    recorder.release.set()
    assert await first == 4
    assert list(await asyncio.gather(*later)) == [8, 12, 16, 24, 28]
    assert recorder.batches == [[2], [4, 6], [8, 12], [14]]


async def test_an_items_exception_reaches_its_caller_alone() -> None:
    group = Recorder().group()
    results = await asyncio.gather(*(group.submit(n) for n in (2, 3, 4)), return_exceptions=True)
    assert results[0] == 4
    assert isinstance(results[1], ValueError)
    assert str(results[1]) == "odd 3"
    assert results[2] == 8


async def test_a_busy_key_waits_in_order_and_holds_up_no_other_key() -> None:
    recorder = Recorder()
    recorder.busy = {1}
    group = recorder.group()
    first = asyncio.ensure_future(group.submit(102))
    other = asyncio.ensure_future(group.submit(4))
    assert await asyncio.wait_for(other, 5) == 8  # not held up by key 1
    later = asyncio.ensure_future(group.submit(104))  # queues behind 102
    quick = asyncio.ensure_future(group.submit(6))
    assert await asyncio.wait_for(quick, 5) == 12
    assert not first.done()
    assert not later.done()
    recorder.busy = set()
    assert list(await asyncio.wait_for(asyncio.gather(first, later), 5)) == [204, 208]
    tried_key_1 = [batch for batch in recorder.batches if any(n // 100 == 1 for n in batch)]
    assert tried_key_1[-1][:2] == [102, 104]  # written together, in arrival order
    assert all(102 in batch for batch in tried_key_1)  # 104 never went ahead of 102


async def test_a_busy_key_with_more_items_than_a_batch_is_retried_in_capped_batches() -> None:
    recorder = Recorder()
    recorder.busy = {1}
    group = recorder.group(max_batch=4)
    items = [100 + 2 * n for n in range(10)]
    callers = [asyncio.ensure_future(group.submit(n)) for n in items]
    await asyncio.sleep(0.05)  # tried, busy, and queued behind the first
    recorder.busy = set()
    assert list(await asyncio.wait_for(asyncio.gather(*callers), 5)) == [2 * n for n in items]
    assert max(len(batch) for batch in recorder.batches) <= 4
    assert recorder.done == items  # arrival order, whatever the retries


async def test_a_key_busy_too_long_gives_up_on_its_items() -> None:
    recorder = Recorder()
    recorder.busy = {1}
    group = recorder.group(give_up_after_s=0.05)
    results = await asyncio.wait_for(
        asyncio.gather(group.submit(102), group.submit(104), return_exceptions=True), 5
    )
    assert [str(r) for r in results] == ["gave up on 102", "gave up on 104"]
    assert all(isinstance(r, GaveUp) for r in results)


async def test_a_give_up_or_a_withdrawal_leaves_no_error_behind() -> None:
    """Break-it: the flusher crashed (``min()`` of nothing) once its last waiter left."""
    errors: list[object] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
    recorder = Recorder()
    recorder.busy = {1, 2}
    group = recorder.group(give_up_after_s=0.05)
    with pytest.raises(GaveUp):
        await asyncio.wait_for(group.submit(102), 5)
    withdrawn = asyncio.ensure_future(group.submit(202))
    await asyncio.sleep(0.02)
    withdrawn.cancel()
    await asyncio.sleep(0.1)
    recorder.busy = set()
    assert await asyncio.wait_for(group.submit(4), 5) == 8
    assert errors == []


async def test_each_item_has_its_own_give_up_clock_and_progress_resets_the_backoff() -> None:
    """Break-it: items that arrived late behind a busy key, or whose key was making
    progress, inherited the key's first give-up clock."""
    recorder = Recorder()
    group = recorder.group(give_up_after_s=1.0)
    recorder.busy = {1}
    early = asyncio.ensure_future(group.submit(102))
    await asyncio.sleep(0.2)
    late = asyncio.ensure_future(group.submit(104))  # tried with 102, 0.2 s younger
    with pytest.raises(GaveUp):
        await asyncio.wait_for(early, 5)
    assert not late.done()
    recorder.busy = set()
    assert await asyncio.wait_for(late, 5) == 208


async def test_close_fails_what_waits_for_a_busy_key_and_leaves_the_group_usable() -> None:
    recorder = Recorder()
    recorder.busy = {1}
    group = recorder.group()
    waiting = asyncio.ensure_future(group.submit(102))
    assert await group.submit(4) == 8
    await asyncio.wait_for(group.close(), 5)
    with pytest.raises(GaveUp):
        await waiting
    assert await group.submit(6) == 12


async def test_a_failing_batch_fails_each_of_its_callers_and_the_next_one_runs() -> None:
    calls: list[list[int]] = []

    def broken_once(items: Sequence[int]) -> list[Outcome[int]]:
        calls.append(list(items))
        if len(calls) == 1:
            raise OSError("disk full")
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(
        broken_once, key=lambda n: n, max_batch=10, give_up_after_s=1, gave_up=GaveUp
    )
    results = await asyncio.gather(*(group.submit(n) for n in (1, 2)), return_exceptions=True)
    assert [type(r) for r in results] == [OSError, OSError]
    assert list(await asyncio.gather(group.submit(3), group.submit(4))) == [3, 4]
    assert calls == [[1, 2], [3, 4]]


def _group(write: object) -> GroupCommit[int, int]:
    return GroupCommit(write, key=lambda n: n, max_batch=10, give_up_after_s=1, gave_up=GaveUp)  # type: ignore[arg-type]


async def test_a_short_answer_from_the_batch_fails_its_callers_instead_of_hanging() -> None:
    group = _group(lambda items: [1])
    results = await asyncio.gather(*(group.submit(n) for n in (1, 2)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_a_base_exception_in_the_batch_answers_every_caller() -> None:
    """Break-it: a BaseException left every caller of the batch pending forever."""

    class Interrupt(BaseException):
        pass

    def interrupted(items: Sequence[int]) -> list[Outcome[int]]:
        raise Interrupt

    group = _group(interrupted)
    callers = [asyncio.ensure_future(group.submit(n)) for n in (1, 2)]
    done, _ = await asyncio.wait(callers, timeout=5)
    assert len(done) == 2
    for caller in callers:
        error = caller.exception()
        assert isinstance(error, RuntimeError)
        assert "interrupted" in str(error)


async def test_a_stop_iteration_outcome_reaches_its_caller_as_a_runtime_error() -> None:
    """Break-it: a future refuses a StopIteration, which left the batch's callers hanging."""
    group = _group(lambda items: [StopIteration(), *items[1:]])
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
    assert list(await asyncio.gather(*held, *kept)) == [4, 8, 16, 24]
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
    assert recorder.batches == [[2], [6]]


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Recorder().group(max_batch=0)
