"""Lost database connections: reads in autocommit, pings after idle, one retry, API 503."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from office_scheduler.api.errors import install_error_handlers
from office_scheduler.store import engine as engine_module
from office_scheduler.store.engine import Database, open_database
from office_scheduler.store.reconnect import retry_if_connection_lost


def _lost() -> sa.exc.OperationalError:
    cause = psycopg.OperationalError("server closed the connection unexpectedly")
    return sa.exc.OperationalError("SELECT 1", {}, cause)


async def test_a_lost_connection_is_retried_once() -> None:
    calls: list[int] = []

    @retry_if_connection_lost
    async def flaky(value: int) -> int:
        calls.append(value)
        if len(calls) == 1:
            raise _lost()
        return value * 2

    assert await flaky(21) == 42
    assert calls == [21, 21]


async def test_a_second_loss_and_other_errors_propagate() -> None:
    calls: list[str] = []

    @retry_if_connection_lost
    async def always_lost() -> None:
        calls.append("lost")
        raise _lost()

    @retry_if_connection_lost
    async def bad_statement() -> None:
        calls.append("bad")
        raise sa.exc.ProgrammingError("SELECT nope", {}, Exception("syntax error"))

    with pytest.raises(sa.exc.OperationalError):
        await always_lost()
    with pytest.raises(sa.exc.ProgrammingError):
        await bad_statement()
    assert calls == ["lost", "lost", "bad"]


def test_the_api_answers_503_with_retry_after_when_the_database_is_gone() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise _lost()

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "database_unavailable"


@pytest.fixture
def pg_database(pg_admin_engine: sa.Engine) -> Iterator[Database]:
    """An empty PostgreSQL schema of this test's own (no tables needed)."""
    schema = f"t_{uuid.uuid4().hex}"
    with pg_admin_engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    db = open_database(pg_admin_engine.url.render_as_string(hide_password=False), schema=schema)
    try:
        yield db
    finally:
        db.dispose()
        with pg_admin_engine.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


def _backend_pid(conn: sa.Connection) -> int:
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


@pytest.mark.postgres
def test_reads_autocommit_and_writes_are_transactions(pg_database: Database) -> None:
    with pg_database.read() as conn:
        assert conn.connection.dbapi_connection.autocommit is True  # type: ignore[union-attr]
        status = conn.exec_driver_sql("SELECT now() = statement_timestamp()").scalar_one()
        assert status is True  # no transaction open: each statement is its own
    with pg_database.write() as conn:
        assert conn.connection.dbapi_connection.autocommit is False  # type: ignore[union-attr]


@pytest.mark.postgres
def test_an_idle_connection_the_server_dropped_is_replaced_on_checkout(
    pg_database: Database, pg_admin_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pg_database.read() as conn:
        first = _backend_pid(conn)
    with pg_admin_engine.connect() as admin:
        admin.exec_driver_sql("SELECT pg_terminate_backend(%(pid)s)", {"pid": first})
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_S", -1.0)  # every checkout is idle
    with pg_database.read() as conn:
        second = _backend_pid(conn)
    assert second != first


@pytest.mark.postgres
def test_a_busy_connection_the_server_dropped_fails_once_then_the_pool_recovers(
    pg_database: Database, pg_admin_engine: sa.Engine
) -> None:
    with pg_database.read() as conn:
        first = _backend_pid(conn)
    with pg_admin_engine.connect() as admin:
        admin.exec_driver_sql("SELECT pg_terminate_backend(%(pid)s)", {"pid": first})
    with pytest.raises(sa.exc.OperationalError), pg_database.read() as conn:  # within the window
        _backend_pid(conn)
    with pg_database.read() as conn:
        assert _backend_pid(conn) != first
