"""Shared pieces of the benchmark harness: result rows, timing, scratch databases, plans."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from office_scheduler.store import migrate
from office_scheduler.store.engine import Database, normalise_url, open_database

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
#: The SQLite text format of the product's UTC timestamps (naive, so text order is time order).
SQLITE_TS = "%Y-%m-%d %H:%M:%S.%f"


@dataclass
class Row:
    """One line of the results table.

    Attributes:
        bench: the benchmark's section name (``throughput``, ``claim``, ...).
        name: what was measured (``sqlite product wakes/s``).
        value: the figure, in ``unit``.
        unit: ``wakes/s``, ``ms``, ``MiB``, ...
        goal: the goal in words (``ratio >= 0.5``), empty when there is none.
        ok: whether the goal holds (``None`` when there is no goal).
        note: a short qualifier (ratio, baseline value, sizes).
    """

    bench: str
    name: str
    value: float
    unit: str
    goal: str = ""
    ok: bool | None = None
    note: str = ""


@dataclass
class Results:
    """Everything one harness run measured: table rows, plans, profiles and raw details."""

    rows: list[Row] = field(default_factory=list)
    plans: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, *args: Any, **kwargs: Any) -> Row:
        row = Row(*args, **kwargs)
        self.rows.append(row)
        return row


def progress(message: str) -> None:
    """Print a progress line to stderr (the table goes to stdout)."""
    print(f"  .. {message}", file=sys.stderr, flush=True)


def pct(samples: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``samples``, nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def median(samples: list[float]) -> float:
    return float(statistics.median(samples))


def timed_ms(fn: Callable[[], object], repeat: int, warmup: int = 5) -> list[float]:
    """Milliseconds per call of ``fn`` over ``repeat`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000.0)
    return samples


def pg_url() -> str:
    """``BENCH_DATABASE_URL``, else ``TEST_DATABASE_URL``, else the local default."""
    return normalise_url(
        os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("TEST_DATABASE_URL")
        or DEFAULT_PG_URL
    )


def pg_available() -> str | None:
    """``None`` when the PostgreSQL server answers, else the reason it does not."""
    engine = sa.create_engine(pg_url())
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    finally:
        engine.dispose()
    return None


@contextmanager
def pg_schema() -> Iterator[tuple[str, str]]:
    """A private schema in the PostgreSQL database, dropped afterwards: ``(url, schema)``."""
    url = pg_url()
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield url, schema
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@contextmanager
def pg_database() -> Iterator[str]:
    """A private database on the PostgreSQL server, dropped afterwards; yields its URL."""
    url = sa.engine.make_url(pg_url())
    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A temporary directory (SQLite files, office home), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="office-bench-") as path:
        yield Path(path)


@contextmanager
def migrated(url: str, schema: str | None = None, **kwargs: Any) -> Iterator[Database]:
    """The product's database at ``url`` migrated to head; disposed afterwards."""
    db = open_database(url, schema=schema, **kwargs)
    try:
        migrate.upgrade(db)
        yield db
    finally:
        db.dispose()


@contextmanager
def capture_sql(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """Record every statement (and its parameters) the product sends inside the block."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        seen.append((statement, params))

    engines = {id(e): e for e in (db.writer, db.reader)}.values()
    for engine in engines:
        sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for engine in engines:
            sa.event.remove(engine, "before_cursor_execute", record)


def explain(db: Database, statement: str, params: Any) -> list[str]:
    """The database's plan of one captured statement (not executed).

    SQLite: ``EXPLAIN QUERY PLAN`` rows as ``id parent detail``; PostgreSQL: ``EXPLAIN``.
    """
    raw = db.writer.raw_connection()
    try:
        cursor = raw.cursor()
        if db.dialect == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + statement, params)
            lines = [f"{row[0]:>3} {row[1]:>3} {row[3]}" for row in cursor.fetchall()]
        else:
            cursor.execute("EXPLAIN " + statement, params)
            lines = [row[0] for row in cursor.fetchall()]
        raw.rollback()
        return lines
    finally:
        raw.close()


def plans_of(db: Database, statements: list[tuple[str, Any]]) -> list[str]:
    """Plans of the captured data statements (SELECT/UPDATE/DELETE), each headed by its SQL."""
    out: list[str] = []
    for statement, params in statements:
        head = statement.lstrip().split(None, 1)[0].upper()
        if head not in ("SELECT", "UPDATE", "DELETE", "WITH"):
            continue
        out.append("-- " + " ".join(statement.split())[:400])
        out.extend(explain(db, statement, params))
    return out


async def _inline(func: Any, /, *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


def profile_text(run: Callable[[], object]) -> str:
    """A pyinstrument profile (text) of ``run()``.

    pyinstrument samples one thread, so the product's ``asyncio.to_thread`` calls run
    inline meanwhile: the profile then shows the database work too (same work, serial).
    """
    import asyncio

    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    threaded = asyncio.to_thread
    asyncio.to_thread = _inline  # type: ignore[assignment]
    try:
        profiler.start()
        run()
        profiler.stop()
    finally:
        asyncio.to_thread = threaded  # type: ignore[assignment]
    return str(profiler.output_text(unicode=False, color=False, show_all=False))
