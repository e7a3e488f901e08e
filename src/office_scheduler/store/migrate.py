"""Schema migrations with Alembic, run only by ``office db upgrade`` and ``office serve``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.store.engine import Database, advisory_key

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _config(connection: object | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision shipped with this version."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(db: Database) -> str | None:
    """The revision the database is at, or ``None`` for an empty database."""
    with db.writer.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(db: Database, revision: str = "head") -> None:
    """Bring the schema of ``db`` up to ``revision`` (idempotent).

    On SQLite foreign keys are switched off while batch migrations rebuild tables; on
    PostgreSQL an advisory lock keyed by the schema lets only one node migrate it at a
    time (offices in other schemas of the same server migrate in parallel).

    Raises:
        InvalidInputError: PostgreSQL only: no schema of the connection's ``search_path``
            exists (field ``database_url``); nothing is written.
    """
    key = advisory_key("migrate", db.schema)
    with db.writer.connect() as conn:
        if (
            db.dialect == "postgresql"
            and conn.exec_driver_sql("SELECT current_schema()").scalar() is None
        ):
            raise InvalidInputError(
                f"no schema of the search_path exists ({db.schema or 'the URL options'}): "
                f"create it first, e.g. CREATE SCHEMA {db.schema or 'name'}",
                field="database_url",
            )
        if db.dialect == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        else:
            conn.exec_driver_sql("SELECT pg_advisory_lock(%(key)s)", {"key": key})
        try:
            command.upgrade(_config(conn), revision)
            conn.commit()
        finally:
            if db.dialect == "sqlite":
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
            else:
                conn.exec_driver_sql("SELECT pg_advisory_unlock(%(key)s)", {"key": key})
                conn.commit()


def downgrade(db: Database, revision: str) -> None:
    """Take the schema of ``db`` back to ``revision`` (``base`` empties it)."""
    with db.writer.connect() as conn:
        command.downgrade(_config(conn), revision)
        conn.commit()
