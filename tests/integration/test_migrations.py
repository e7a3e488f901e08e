"""Migrations on both databases: round trip, schema equals the metadata, UTC storage."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from helpers import Office
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.store import migrate
from office_scheduler.store.engine import Database, advisory_key, open_database
from office_scheduler.store.office import OfficeStore
from office_scheduler.store.schema import agents, metadata, scheduler_leases


def _tables(database: Database) -> set[str]:
    with database.writer.connect() as conn:
        return set(sa.inspect(conn).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(database: Database) -> None:
    head = migrate.head_revision()
    assert migrate.current_revision(database) == head
    assert _tables(database) == set(metadata.tables)

    migrate.downgrade(database, "base")
    assert migrate.current_revision(database) is None
    assert _tables(database) == set()

    migrate.upgrade(database)
    assert migrate.current_revision(database) == head
    assert _tables(database) == set(metadata.tables)
    migrate.upgrade(database)  # idempotent
    assert migrate.current_revision(database) == head


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_0006_refuses_to_downgrade_over_a_long_key_and_says_why(office: Office) -> None:
    """Break-it: the downgrade failed with a raw StringDataRightTruncation."""
    await office.service.wake(office.worker.id, idempotency_key="k" * 500)
    database = office.store.db
    with pytest.raises(RuntimeError, match=r"cannot downgrade below 0006: 1 row\(s\) of"):
        migrate.downgrade(database, "0005")
    # The whole downgrade is one transaction on PostgreSQL: nothing was undone.
    assert migrate.current_revision(database) == migrate.head_revision()


#: Indexes on expressions: Alembic cannot compare them (SQLite does not even reflect them);
#: ``test_the_claim_walks_agents_through_the_claimable_at_index`` checks the one there is.
EXPRESSION_INDEXES = {"ix_agents_claimable_at"}


def _comparable(obj: object, name: str | None, type_: str, *_: object) -> bool:
    return not (type_ == "index" and name in EXPRESSION_INDEXES)


def _compare_type(
    context: MigrationContext,
    inspected: sa.Column[Any],
    _column: sa.Column[Any],
    inspected_type: sa.types.TypeEngine[Any],
    metadata_type: sa.types.TypeEngine[Any],
) -> bool | None:
    """Alembic's type comparison, but for the idempotency keys' length on SQLite: SQLite
    enforces no ``VARCHAR`` length, so migration 0006 widens them on PostgreSQL only
    (rebuilding two large tables for a declared length would buy nothing)."""
    if (
        context.dialect.name == "sqlite"
        and inspected.name == "idempotency_key"
        and isinstance(inspected_type, sa.String)
        and isinstance(metadata_type, sa.String)
    ):
        return False
    return None


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based")
def test_migrated_schema_matches_metadata(db_url: str, db_schema: str | None) -> None:
    database = open_database(db_url, schema=db_schema)
    try:
        migrate.upgrade(database)
        with database.writer.connect() as conn:
            opts = {"compare_type": _compare_type, "include_object": _comparable}
            context = MigrationContext.configure(conn, opts=opts)
            differences = compare_metadata(context, metadata)
    finally:
        database.dispose()
    assert differences == []
    assert {index.name for index in agents.indexes} >= EXPRESSION_INDEXES


async def test_the_claim_walks_agents_through_the_claimable_at_index(
    office: Office,
) -> None:
    """The migration's index expression is the one the claim renders: both databases plan
    the claim's agent walk on ``ix_agents_claimable_at`` (PostgreSQL with sequential scans
    off, as its tables are tiny here), so agents cooling down are an index range away."""
    await office.service.wake(office.worker.id)
    database = office.store.db
    statements: list[tuple[str, Any]] = []

    def seen(_conn: object, _cursor: object, statement: str, params: Any, *_: object) -> None:
        statements.append((statement, params))

    office.clock.advance(timedelta(minutes=1))
    sa.event.listen(database.writer, "before_cursor_execute", seen)
    try:
        claimed = office.store.queue.claim(
            now=office.clock.now(), node_id="n1", lease=timedelta(minutes=5), limit=1
        )
    finally:
        sa.event.remove(database.writer, "before_cursor_execute", seen)
    assert [run.agent_id for run in claimed] == [office.worker.id]
    walk, params = next((st, p) for st, p in statements if "FROM agents" in st)
    raw = database.writer.raw_connection()
    try:
        cursor = raw.cursor()
        if database.dialect == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + walk, params)
            plan = " ".join(str(row[3]) for row in cursor.fetchall())
        else:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + walk, params)
            plan = " ".join(str(row[0]) for row in cursor.fetchall())
        raw.rollback()
    finally:
        raw.close()
    assert "ix_agents_claimable_at" in plan, plan


_CATALOG = """
SELECT 'column', table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
       || ' ' || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = %(schema)s
UNION ALL
SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = %(schema)s
UNION ALL
SELECT 'constraint', conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = %(schema)s::regnamespace
UNION ALL
SELECT 'version', version_num FROM alembic_version
"""


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_test_schema_replay_equals_a_real_upgrade(
    database: Database, db_url: str, pg_admin_engine: sa.Engine
) -> None:
    """The ``database`` fixture replays a recorded migration; it must build the same schema."""
    real_schema = f"t_{uuid.uuid4().hex}"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{real_schema}"')
    real = open_database(db_url, schema=real_schema)
    try:
        migrate.upgrade(real)

        def catalog(db: Database) -> list[tuple[str, str]]:
            with db.writer.connect() as conn:
                rows = conn.exec_driver_sql(_CATALOG, {"schema": db.schema}).all()
            return sorted((kind, text.replace(f"{db.schema}.", "")) for kind, text in rows)

        replayed, upgraded = catalog(database), catalog(real)
    finally:
        real.dispose()
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{real_schema}" CASCADE')
    assert len(upgraded) > 100
    assert replayed == upgraded


@pytest.mark.parametrize(
    ("local", "instant"),
    [
        (datetime(2026, 11, 29, 7, 0), datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
        # 01:30 on the night New York falls back: fold=0 is the first one, 05:30Z.
        (datetime(2026, 11, 1, 1, 30), datetime(2026, 11, 1, 5, 30, tzinfo=UTC)),
    ],
    ids=["plain", "fall-back-fold"],
)
def test_datetimes_round_trip_as_utc(
    office_store: OfficeStore, local: datetime, instant: datetime
) -> None:
    new_york = local.replace(tzinfo=ZoneInfo("America/New_York"))
    workspace = office_store.create_workspace(
        name="acme", settings=WorkspaceSettings(), now=new_york
    )
    stored = office_store.get_workspace(workspace.id).created_at
    assert stored == instant
    # An ambiguous local time never compares equal across zones (PEP 495): compare in UTC.
    assert stored == new_york.astimezone(UTC)
    assert stored.tzinfo is UTC


def test_utc_column_orders_by_instant_and_rejects_naive(database: Database) -> None:
    new_york = ZoneInfo("America/New_York")
    tokyo = ZoneInfo("Asia/Tokyo")
    # Local clock readings in the opposite order of the instants.
    early = datetime(2026, 6, 1, 20, 0, tzinfo=tokyo)  # 11:00Z
    late = datetime(2026, 6, 1, 8, 0, tzinfo=new_york)  # 12:00Z
    with database.write() as conn:
        conn.execute(
            sa.insert(scheduler_leases),
            [
                {"name": "late", "holder": "x", "expires_at": late},
                {"name": "early", "holder": "x", "expires_at": early},
            ],
        )
    with database.read() as conn:
        rows = conn.execute(
            sa.select(scheduler_leases.c.name, scheduler_leases.c.expires_at).order_by(
                scheduler_leases.c.expires_at
            )
        ).all()
        due = conn.execute(
            sa.select(scheduler_leases.c.name).where(
                scheduler_leases.c.expires_at < datetime(2026, 6, 1, 11, 30, tzinfo=UTC)
            )
        ).scalars()
        assert list(due) == ["early"]
    assert [name for name, _ in rows] == ["early", "late"]
    assert [at for _, at in rows] == [early, late]
    assert all(at.tzinfo is UTC for _, at in rows)

    with pytest.raises(sa.exc.StatementError), database.write() as conn:
        conn.execute(
            sa.insert(scheduler_leases).values(
                name="naive", holder="x", expires_at=datetime(2026, 6, 1, 12, 0)
            )
        )


@pytest.mark.postgres
def test_migration_lock_is_per_schema(pg_admin_engine: sa.Engine) -> None:
    # Nodes of one office (one schema) migrate one at a time; another schema on the same
    # server does not wait for them (the lock used to be one key for the whole server).
    schemas = [f"t_{uuid.uuid4().hex}" for _ in range(2)]
    url = pg_admin_engine.url.render_as_string(hide_password=False)
    with pg_admin_engine.connect() as conn:
        for schema in schemas:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    busy = schemas[0]
    dbs = [open_database(url, schema=schema) for schema in schemas]
    try:
        with pg_admin_engine.connect() as holder:
            key = {"key": advisory_key("migrate", busy)}
            holder.exec_driver_sql("SELECT pg_advisory_lock(%(key)s)", key)
            with ThreadPoolExecutor(max_workers=1) as pool:
                waiting = pool.submit(migrate.upgrade, dbs[0])
                migrate.upgrade(dbs[1])  # not blocked by the other schema's migration
                assert migrate.current_revision(dbs[1]) == migrate.head_revision()
                assert not waiting.done(), "a node migrated while another held the lock"
                holder.exec_driver_sql("SELECT pg_advisory_unlock(%(key)s)", key)
                waiting.result(timeout=60)
        assert migrate.current_revision(dbs[0]) == migrate.head_revision()
    finally:
        for db in dbs:
            db.dispose()
        with pg_admin_engine.connect() as conn:
            for schema in schemas:
                conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
