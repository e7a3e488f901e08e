"""Shared fixtures of the acceptance suite."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa


@pytest.fixture(autouse=True)
def _restore_logging(restore_logging: None) -> None:
    """Many acceptance tests run the CLI in process, which configures logging."""


@pytest.fixture
def pg_url(pg_admin_engine: sa.Engine) -> Iterator[str]:
    """A PostgreSQL URL whose ``search_path`` is a fresh schema, dropped afterwards (for the
    tests that start ``office serve`` processes on one database)."""
    schema = f"t_{uuid.uuid4().hex}"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    base = pg_admin_engine.url.render_as_string(hide_password=False)
    try:
        yield f"{base}?options=-csearch_path%3D{schema}"
    finally:
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
