"""Benchmark 1 (SQLite) and the first half of 3 (PostgreSQL): wake → run → finish throughput.

Three variants process the same workload (:mod:`bench.workload`), interleaved slice by
slice in one process so the machine's noise hits all of them alike:

* ``product``: the real service in drain mode — ``Intake.enqueue`` for every wake (validation,
  workspace lookup, the intake transaction, the ``WakeupReceived`` event), then
  ``Service.run_until_idle()`` after each round (claim, the whole pipeline with a no-op
  executor, finish), the fake clock moved past the coalescing hold and the cooldown;
* ``store``: the product's store calls alone — ``QueueStore.enqueue``, ``claim`` and
  ``finish_run`` — i.e. the same row operations as the baseline through the product's SQL;
* ``raw``: :class:`bench.raw_loop.RawLoop` on the driver.

The figure is wakes per second (duplicates and coalesced wakes included: every wake is
accepted and settled). The ratio product / raw is the goal (≥ 0.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa

from bench.common import Results, migrated, pg_schema, profile_text, progress, scratch_dir
from bench.raw_loop import RawLoop, sqlite_connect
from bench.workload import (
    ROUND_STEP,
    OfficeIds,
    Plan,
    Wake,
    build_office,
    classification,
    make_plan,
)
from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import OutcomeStatus, RunReason, RunStatus
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.intake.rules import decide_merge
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HOLD = timedelta(seconds=5)
LEASE = timedelta(minutes=1)


class NoopExecutor:
    """Succeeds at once without starting anything; counts launches."""

    def __init__(self) -> None:
        self.launches = 0

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        self.launches += 1
        return Outcome(status=OutcomeStatus.SUCCEEDED)


def request_of(office: OfficeIds, wake: Wake) -> WakeRequest:
    return WakeRequest(
        workspace_id=office.workspace,
        agent_id=office.agents[wake.agent],
        source=wake.source,
        payload={"n": wake.key},
        task_id=None if wake.task is None else office.tasks[wake.task],
        classification=classification(wake),
        idempotency_key=wake.key,
        hold=wake.hold,
    )


@dataclass
class Variant:
    """One contender: its database, clock and the seconds it spent so far."""

    name: str
    office: OfficeIds
    clock: FakeClock
    seconds: float = 0.0
    wakes: int = 0
    runs: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class ProductVariant(Variant):
    service: Service
    executor: NoopExecutor

    async def rounds(self, rounds: list[list[Wake]]) -> None:
        began = time.perf_counter()
        intake = self.service.intake
        for wakes in rounds:
            # A round's wakes arrive together (HTTP handlers, event subscribers), so
            # intake may commit them in groups; within an agent's burst they keep their order.
            await asyncio.gather(*(intake.enqueue(request_of(self.office, w)) for w in wakes))
            self.clock.advance(ROUND_STEP)
            await self.service.run_until_idle()
        self.seconds += time.perf_counter() - began
        self.wakes += sum(len(w) for w in rounds)
        self.runs = self.executor.launches


class StoreVariant(Variant):
    store: Store

    def rounds(self, rounds: list[list[Wake]]) -> None:
        queue = self.store.queue
        began = time.perf_counter()
        for wakes in rounds:
            for wake in wakes:
                queue.enqueue(
                    request_of(self.office, wake),
                    now=self.clock.now(),
                    hold=HOLD,
                    decide=decide_merge,
                )
            now = self.clock.advance(ROUND_STEP)
            while got := queue.claim(now=now, node_id="bench", lease=LEASE, limit=8):
                for run in got:
                    queue.finish_run(
                        run.id, status=RunStatus.FINISHED, reason=RunReason.COMPLETED, now=now
                    )
                self.runs += len(got)
        self.seconds += time.perf_counter() - began
        self.wakes += sum(len(w) for w in rounds)


class RawVariant(Variant):
    loop: RawLoop

    def rounds(self, rounds: list[list[Wake]]) -> None:
        began = time.perf_counter()
        for wakes in rounds:
            now = self.clock.now()
            for wake in wakes:
                self.loop.intake(wake, now, HOLD)
            self.runs += self.loop.drain(self.clock.advance(ROUND_STEP))
        self.seconds += time.perf_counter() - began
        self.wakes += sum(len(w) for w in rounds)


@contextlib.contextmanager
def _databases(kind: str, home: Path) -> Iterator[dict[str, tuple[str, str | None]]]:
    """Three fresh databases (product, store, raw): name → (url, schema)."""
    if kind == "sqlite":
        yield {name: (f"sqlite:///{home}/{name}.db", None) for name in ("product", "store", "raw")}
        return
    with pg_schema() as (url, s1), pg_schema() as (_, s2), pg_schema() as (_, s3):
        yield {"product": (url, s1), "store": (url, s2), "raw": (url, s3)}


def _raw_connection(url: str, schema: str | None) -> Any:
    if schema is None:
        return sqlite_connect(sa.engine.make_url(url).database or "")
    conninfo = sa.engine.make_url(url).set(drivername="postgresql")
    return psycopg.connect(
        conninfo.render_as_string(hide_password=False), options=f"-c search_path={schema}"
    )


async def _interleaved(
    variants: list[Variant], plan: Plan, slices: int, service_wakes: int
) -> dict[str, list[float]]:
    """Run every slice on each variant in turn; the product service stops after
    ``service_wakes`` wakes. Returns per variant ``[seconds, wakes]`` over the slices the
    service took part in (the paired figures its ratio is computed from)."""
    per = max(1, len(plan.rounds) // slices)
    chunks = [plan.rounds[i : i + per] for i in range(0, len(plan.rounds), per)]
    paired = {v.name: [0.0, 0.0] for v in variants}
    for n, chunk in enumerate(chunks, 1):
        with_service = any(
            isinstance(v, ProductVariant) and v.wakes < service_wakes for v in variants
        )
        for variant in variants:
            before = variant.seconds
            if isinstance(variant, ProductVariant):
                if not with_service:
                    continue
                await variant.rounds(chunk)
            elif isinstance(variant, StoreVariant | RawVariant):
                variant.rounds(chunk)
            if with_service:
                paired[variant.name][0] += variant.seconds - before
                paired[variant.name][1] += sum(len(w) for w in chunk)
        rates = ", ".join(f"{v.name} {v.wakes / v.seconds:,.0f}/s" for v in variants if v.seconds)
        progress(f"slice {n}/{len(chunks)}: {rates}")
    return paired


def run(
    results: Results,
    *,
    kind: str,
    wakes: int,
    agents: int,
    service_wakes: int | None = None,
    slices: int = 8,
) -> None:
    """Measure the three variants on ``kind`` (``sqlite`` or ``postgres``) and add rows.

    The raw loop and the store calls process all ``wakes``; the product service (about 20x
    slower than raw today) only the first ``service_wakes`` of them (default: all), and its
    ratio is taken against the raw loop's rate over those same slices.
    """
    service_wakes = wakes if service_wakes is None else service_wakes
    plan = make_plan(wakes, agents)
    progress(
        f"throughput/{kind}: {plan.wakes} wakes, {plan.duplicates} duplicate keys, "
        f"{len(plan.rounds)} rounds over {agents} agents"
    )
    with scratch_dir() as home, _databases(kind, home) as urls, contextlib.ExitStack() as stack:
        dbs: dict[str, Database] = {
            name: stack.enter_context(migrated(url, schema)) for name, (url, schema) in urls.items()
        }
        variants: list[Variant] = []
        for name, db in dbs.items():
            store = Store.from_database(db)
            office = build_office(store, agents, T0, home)
            clock = FakeClock(T0)
            if name == "product":
                product = ProductVariant(name, office, clock)
                product.executor = NoopExecutor()
                product.service = Service(
                    Settings(home=home / "office", database_url=db.url),
                    clock=clock,
                    executors={"command": product.executor},
                    store=store,
                )
                variants.append(product)
            elif name == "store":
                variant = StoreVariant(name, office, clock)
                variant.store = store
                variants.append(variant)
            else:
                raw = RawVariant(name, office, clock)
                conn = _raw_connection(*urls["raw"])
                stack.callback(conn.close)
                raw.loop = RawLoop(conn, office, postgres=kind == "postgres")
                variants.append(raw)
        paired = asyncio.run(_drive(variants, plan, slices, service_wakes))
    by = {v.name: v for v in variants}
    rate = {name: v.wakes / v.seconds for name, v in by.items()}
    raw_paired = paired["raw"][1] / paired["raw"][0]
    ratio = rate["product"] / raw_paired
    results.details[f"throughput_{kind}"] = {
        "wakes": plan.wakes,
        "duplicates": plan.duplicates,
        "agents": agents,
        "runs": {name: v.runs for name, v in by.items()},
        "seconds": {name: round(v.seconds, 3) for name, v in by.items()},
        "wakes_per_s": {name: round(r, 1) for name, r in rate.items()},
        "service_wakes": by["product"].wakes,
        "raw_wakes_per_s_same_slices": round(raw_paired, 1),
    }
    goal = "ratio >= 0.5"
    bench = f"1 throughput {kind}" if kind == "sqlite" else f"3 throughput {kind}"
    results.add(bench, "raw driver loop", rate["raw"], "wakes/s", note=f"{by['raw'].runs} runs")
    results.add(
        bench,
        "product store calls (enqueue/claim/finish)",
        rate["store"],
        "wakes/s",
        note=f"{rate['store'] / rate['raw']:.2f}x raw",
    )
    results.add(
        bench,
        "product service (intake+pipeline, drain)",
        rate["product"],
        "wakes/s",
        goal=goal,
        ok=ratio >= 0.5,
        note=(
            f"{ratio:.2f}x raw ({raw_paired:,.0f}/s on the same {by['product'].wakes} wakes),"
            f" {by['product'].runs} runs launched"
        ),
    )


async def _drive(
    variants: list[Variant], plan: Plan, slices: int, service_wakes: int
) -> dict[str, list[float]]:
    try:
        return await _interleaved(variants, plan, slices, service_wakes)
    finally:
        for variant in variants:
            if isinstance(variant, ProductVariant):
                await variant.service.stop()


def profile(results: Results, *, wakes: int, agents: int) -> None:
    """A pyinstrument profile of the product variant alone on SQLite (text, top frames)."""
    plan = make_plan(wakes, agents)
    with scratch_dir() as home, migrated(f"sqlite:///{home}/product.db") as db:
        store = Store.from_database(db)
        office = build_office(store, agents, T0, home)
        clock = FakeClock(T0)
        product = ProductVariant("product", office, clock)
        product.executor = NoopExecutor()
        product.service = Service(
            Settings(home=home / "office", database_url=db.url),
            clock=clock,
            executors={"command": product.executor},
            store=store,
        )
        text = profile_text(lambda: asyncio.run(_drive([product], plan, 1, wakes)))
    results.details["profile_throughput_sqlite"] = text
    results.add(
        "profile",
        "product service under pyinstrument",
        product.wakes / product.seconds,
        "wakes/s",
        note="see details.profile_throughput_sqlite",
    )
