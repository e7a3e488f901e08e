"""The wake listener's dedicated connection is closed whatever stops it (PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from office_scheduler.store.engine import Database
from office_scheduler.store.notify import WakeListener


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_connect_cancelled_during_listen_closes_its_connection(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI: a service stopped while its listener sent ``LISTEN`` leaked the connection
    (a ResourceWarning at teardown)."""
    opened: list[psycopg.AsyncConnection[Any]] = []
    real_connect = psycopg.AsyncConnection.connect
    listening = asyncio.Event()

    async def connect(*args: Any, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        conn = await real_connect(*args, **kwargs)
        opened.append(conn)

        async def execute_slowly(*_: Any, **__: Any) -> None:
            listening.set()
            await asyncio.sleep(60)

        monkeypatch.setattr(conn, "execute", execute_slowly)
        return conn

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", connect)
    listener = WakeListener(database)
    connecting = asyncio.ensure_future(listener.connect())
    await asyncio.wait_for(listening.wait(), 10)
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    assert [conn.closed for conn in opened] == [True]
    assert not listener.connected
