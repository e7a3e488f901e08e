"""Alembic environment: runs migrations on the connection handed over by ``store.migrate``."""

from __future__ import annotations

from alembic import context

from office_scheduler.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through office_scheduler.store.migrate.upgrade")
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
