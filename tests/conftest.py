"""Shared fixtures: one database per test, on SQLite and on PostgreSQL.

The PostgreSQL half needs ``TEST_DATABASE_URL`` (e.g.
``postgresql+psycopg://postgres@127.0.0.1:5432/test``). Without it those tests are skipped,
except when ``CI`` is set: there they fail, because CI must run both databases. Each
PostgreSQL test gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import structlog

from office_scheduler.store import migrate
from office_scheduler.store.engine import Database, normalise_url, open_database
from office_scheduler.store.office import OfficeStore
from office_scheduler.store.runlog import RunLogStore
from office_scheduler.store.tokens import TokenStore

# structlog's defaults with plain tracebacks: the default rich traceback renders every
# frame's locals, which costs seconds per logged exception.
structlog.configure(
    processors=[
        *structlog.get_config()["processors"][:-1],
        structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        ),
    ]
)

PG_URL_ENV = "TEST_DATABASE_URL"
_SCHEMA_KEY = pytest.StashKey[str | None]()


def _checked_out(pool: sa.pool.Pool) -> int:
    return pool.checkedout() if isinstance(pool, sa.pool.QueuePool) else 0


@pytest.fixture(scope="session")
def pg_admin_engine() -> Iterator[sa.Engine]:
    """An engine on ``TEST_DATABASE_URL`` that creates and drops the per-test schemas."""
    url = os.environ.get(PG_URL_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{PG_URL_ENV} must be set in CI: the PostgreSQL tests are required")
        pytest.skip(f"{PG_URL_ENV} is not set")
    engine = sa.create_engine(normalise_url(url), isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database for this test (see :func:`db_schema` for PostgreSQL)."""
    if request.param == "sqlite":
        request.node.stash[_SCHEMA_KEY] = None
        yield f"sqlite:///{tmp_path}/office.db"
        return
    admin: sa.Engine = request.getfixturevalue("pg_admin_engine")
    schema = f"t_{uuid.uuid4().hex}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    request.node.stash[_SCHEMA_KEY] = schema
    try:
        yield admin.url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def db_schema(request: pytest.FixtureRequest, db_url: str) -> str | None:
    """The PostgreSQL schema of this test's database (``None`` on SQLite)."""
    stash: pytest.Stash = request.node.stash
    return stash[_SCHEMA_KEY]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head through Alembic once per test process."""
    path = tmp_path_factory.mktemp("template") / "office.db"
    db = open_database(f"sqlite:///{path}")
    migrate.upgrade(db)
    db.dispose()
    return path


#: One recorded DBAPI call: (statement, parameters, executemany).
_Recorded = tuple[str, Any, bool]


@pytest.fixture(scope="session")
def pg_migration_script(pg_admin_engine: sa.Engine) -> list[_Recorded]:
    """The DBAPI calls Alembic makes to migrate an empty schema to head, recorded once.

    Recorded from a real ``migrate.upgrade`` into a scratch schema. The migrations name no
    schema (tables go where ``search_path`` points), so replaying the calls in another empty
    schema builds the same tables, indexes and version row; the recorder refuses a script
    that mentions its scratch schema, which would break that premise.
    """
    schema = f"t_{uuid.uuid4().hex}"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    recorded: list[_Recorded] = []

    def record(
        _conn: object, _cursor: object, statement: str, parameters: Any, _ctx: object, many: bool
    ) -> None:
        if "pg_advisory" not in statement:  # the migration lock is the caller's business
            recorded.append((statement, parameters, many))

    db = open_database(pg_admin_engine.url.render_as_string(hide_password=False), schema=schema)
    try:
        sa.event.listen(db.writer, "before_cursor_execute", record)
        migrate.upgrade(db)
    finally:
        db.dispose()
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    assert schema not in repr(recorded), "the migration script names its schema"
    return recorded


def _replay(db: Database, script: Sequence[_Recorded]) -> None:
    """Run a recorded migration script in ``db``'s schema, in one transaction."""
    raw = db.writer.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, parameters, many in script:
            if many:
                cursor.executemany(statement, parameters)
            else:
                cursor.execute(statement, parameters)
        cursor.close()
        raw.commit()
    finally:
        raw.close()


@pytest.fixture
def database(
    db_url: str, db_schema: str | None, request: pytest.FixtureRequest
) -> Iterator[Database]:
    """The test's database, migrated to head through Alembic; disposed at teardown.

    The migration runs once per test process: on SQLite the test gets a copy of a migrated
    file, on PostgreSQL a replay of the statements the migration ran (either is what an
    Alembic upgrade would write, at a fraction of the cost). ``tests/integration/
    test_migrations.py`` runs the real upgrade and downgrade paths.

    Teardown also checks that no pooled connection is still checked out: no connection may
    leave a store method.
    """
    if db_schema is None:
        template: Path = request.getfixturevalue("sqlite_template")
        with (
            closing(sqlite3.connect(template)) as source,
            closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as target,
        ):
            source.backup(target)
        db = open_database(db_url)
    else:
        db = open_database(db_url, schema=db_schema)
        _replay(db, request.getfixturevalue("pg_migration_script"))
    yield db
    pools = {id(engine.pool): engine.pool for engine in (db.writer, db.reader)}.values()
    checked_out = sum(_checked_out(pool) for pool in pools)
    db.dispose()
    assert checked_out == 0, f"{checked_out} connection(s) left checked out"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """The CLI configures logging for its process; give the next test the old setup back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.configure(**config)


@pytest.fixture
def now() -> datetime:
    """A fixed aware UTC instant: 2026-11-29 12:00Z."""
    return datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def office_store(database: Database) -> OfficeStore:
    """An :class:`OfficeStore` over the test's database."""
    return OfficeStore(database)


@pytest.fixture
def runlog_store(database: Database) -> RunLogStore:
    """A :class:`RunLogStore` over the test's database."""
    return RunLogStore(database)


@pytest.fixture
def token_store(database: Database) -> TokenStore:
    """A :class:`TokenStore` over the test's database."""
    return TokenStore(database)
