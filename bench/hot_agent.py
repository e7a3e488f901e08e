"""Benchmark 8: a hot agent — intake while thousands of wakes merge into one run (SQLite).

One agent's run stays queued (no runs loop) while user wakes keep arriving, as for an
agent that is paused, busy in a long session or cooling down while a busy repository's
webhooks or a chat channel wake it. Wakes go through ``Intake.enqueue`` one at a time (a
transaction each, as separate HTTP requests would), all merging into that one run.

Timed, in the same process and on the same run: ``--hot-slice`` wakes (default 200)
merged once the run holds 50 wakes, and as many once it holds ``--hot-wakes`` (default
5,000), each in five equal parts. The rate at a size is that of its fastest part (as
``timeit`` takes the best of its repeats): on a shared machine a part that met another
process's burst, or a WAL checkpoint, says nothing about the merge. The figure is the
second rate over the first; **goal ≥ 0.8** (a merge costs the same whatever the run
already carries). The details record every part's rate, the statements per merged wake
at both sizes and the largest statement parameter (bytes of its ``repr``), which must
not grow with the run.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from bench.common import Results, migrated, progress, scratch_dir
from bench.workload import build_office
from office_scheduler.config import Settings
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import IntakeOutcome, WakeSource
from office_scheduler.service import Service
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
#: Wakes the run holds when the first slice is timed.
SMALL = 50
#: Parts each timed slice is cut into (the fastest part gives the rate).
PARTS = 5


class _Counter:
    """Counts statements and the largest parameter while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.statements = 0
        self.largest = 0

    def __call__(self, _c: Any, _cur: Any, _statement: str, params: Any, *_rest: Any) -> None:
        if self.on:
            self.statements += 1
            self.largest = max(self.largest, len(repr(params)))


async def _measure(service: Service, request: Any, total: int, size: int) -> dict[str, Any]:
    intake = service.intake
    counter = _Counter()
    db = service.store.db
    sa.event.listen(db.writer, "before_cursor_execute", counter)
    sent = 0

    async def send(count: int) -> float:
        nonlocal sent
        began = time.perf_counter()
        for _ in range(count):
            result = await intake.enqueue(request(sent))
            sent += 1
            assert sent == 1 or result.outcome is IntakeOutcome.COALESCED
        return time.perf_counter() - began

    figures: dict[str, Any] = {}
    try:
        for held in (SMALL, total):
            await send(held - sent)
            progress(f"hot agent: timing {size} merges into a run of {held} wakes")
            counter.on, counter.statements, counter.largest = True, 0, 0
            part = max(1, size // PARTS)
            rates = [part / await send(part) for _ in range(PARTS)]
            counter.on = False
            figures[str(held)] = {
                "wakes_per_s": round(max(rates), 1),
                "parts_wakes_per_s": [round(rate, 1) for rate in rates],
                "statements_per_wake": round(counter.statements / (part * PARTS), 2),
                "largest_parameter_bytes": counter.largest,
            }
    finally:
        sa.event.remove(db.writer, "before_cursor_execute", counter)
    return figures


def run(results: Results, *, wakes: int, size: int) -> None:
    """Merge ``wakes`` wakes into one run; time ``size`` merges at 50 and at ``wakes``."""
    if wakes <= SMALL:
        raise ValueError(f"--hot-wakes must be above {SMALL}")
    with scratch_dir() as home, migrated(f"sqlite:///{home}/hot.db") as db:
        store = Store.from_database(db)
        office = build_office(store, 1, T0, home)
        service = Service(
            Settings(home=home / "office", database_url=db.url),
            clock=FakeClock(T0),
            executors={},
            store=store,
        )

        def request(n: int) -> WakeRequest:
            return WakeRequest(
                workspace_id=office.workspace,
                agent_id=office.agents[0],
                source=WakeSource.USER,
                payload={"user_id": "bench", "reason": f"webhook delivery {n}"},
                hold=False,
            )

        async def drive() -> dict[str, Any]:
            try:
                return await _measure(service, request, wakes, size)
            finally:
                await service.stop()

        figures = asyncio.run(drive())
    small, large = figures[str(SMALL)], figures[str(wakes)]
    ratio = large["wakes_per_s"] / small["wakes_per_s"]
    results.details["hot_agent_sqlite"] = {"slice": size, "by_run_size": figures}
    results.add(
        "8 hot agent sqlite",
        f"intake with {wakes:,} merged / with {SMALL}",
        ratio,
        "x",
        goal="ratio >= 0.8",
        ok=ratio >= 0.8,
        note=(
            f"{large['wakes_per_s']:,.0f}/s vs {small['wakes_per_s']:,.0f}/s; "
            f"{large['statements_per_wake']} vs {small['statements_per_wake']} statements/wake"
        ),
    )
