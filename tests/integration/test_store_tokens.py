"""Contract tests of TokenStore (both databases)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.status import TokenKind
from office_scheduler.store.tokens import TokenStore, revoke_run_tokens


def test_create_and_find_active(token_store: TokenStore, now: datetime) -> None:
    token = token_store.create(
        kind=TokenKind.ADMIN,
        name="ops",
        token_hash="h-admin",
        now=now,
        expires_at=now + timedelta(days=1),
    )
    assert token.kind is TokenKind.ADMIN
    assert token.name == "ops"
    assert token.created_at == now
    assert token.expires_at == now + timedelta(days=1)
    assert token.revoked_at is None
    assert token_store.find_active("h-admin", now=now) == token
    assert token_store.find_active("h-admin", now=now + timedelta(days=1)) is None  # expired
    assert token_store.find_active("unknown", now=now) is None

    forever = token_store.create(kind=TokenKind.ADMIN, name="root", token_hash="h-root", now=now)
    assert token_store.find_active("h-root", now=now + timedelta(days=3650)) == forever


def test_create_errors(token_store: TokenStore, now: datetime) -> None:
    token_store.create(kind=TokenKind.ADMIN, name="ops", token_hash="same", now=now)
    with pytest.raises(ConflictError) as duplicate:
        token_store.create(kind=TokenKind.ADMIN, name="ops2", token_hash="same", now=now)
    assert duplicate.value.field == "token_hash"
    with pytest.raises(InvalidInputError) as no_run:
        token_store.create(kind=TokenKind.RUN, name="run", token_hash="r", now=now)
    assert no_run.value.field == "run_id"
    with pytest.raises(InvalidInputError) as blank:
        token_store.create(kind=TokenKind.ADMIN, name="", token_hash="x", now=now)
    assert blank.value.field == "name"


def test_revoke(token_store: TokenStore, now: datetime) -> None:
    token = token_store.create(kind=TokenKind.ADMIN, name="ops", token_hash="h", now=now)
    token_store.revoke(token.id, now=now + timedelta(minutes=1))
    assert token_store.find_active("h", now=now + timedelta(minutes=2)) is None
    token_store.revoke(token.id, now=now + timedelta(minutes=5))  # idempotent
    (stored,) = token_store.list_tokens()
    assert stored.revoked_at == now + timedelta(minutes=1)
    with pytest.raises(NotFoundError) as missing:
        token_store.revoke("missing", now=now)
    assert missing.value.field == "token_id"


def test_revoke_for_run_and_listing(token_store: TokenStore, now: datetime) -> None:
    admin = token_store.create(kind=TokenKind.ADMIN, name="ops", token_hash="a", now=now)
    run_tokens = [
        token_store.create(
            kind=TokenKind.RUN,
            name=f"run 7 #{i}",
            token_hash=f"r{i}",
            now=now + timedelta(seconds=i + 1),
            workspace_id="ws",
            agent_id="agent",
            run_id=7,
        )
        for i in range(2)
    ]
    other_run = token_store.create(
        kind=TokenKind.RUN, name="run 8", token_hash="r8", now=now, run_id=8
    )
    assert run_tokens[0].run_id == 7
    assert run_tokens[0].agent_id == "agent"
    assert run_tokens[0].workspace_id == "ws"
    assert token_store.revoke_for_run(7, now=now) == 2
    assert token_store.revoke_for_run(7, now=now) == 0
    assert token_store.find_active("r0", now=now) is None
    assert token_store.find_active("r8", now=now) == other_run

    assert [t.id for t in token_store.list_tokens(kind=TokenKind.ADMIN)] == [admin.id]
    listed = token_store.list_tokens(kind=TokenKind.RUN)  # oldest first
    assert [t.id for t in listed] == [other_run.id, run_tokens[0].id, run_tokens[1].id]
    assert len(token_store.list_tokens()) == 4


def test_count_active_admin(token_store: TokenStore, now: datetime) -> None:
    assert token_store.count_active_admin(now) == 0
    keep = token_store.create(kind=TokenKind.ADMIN, name="a", token_hash="a", now=now)
    revoked = token_store.create(kind=TokenKind.ADMIN, name="b", token_hash="b", now=now)
    token_store.create(
        kind=TokenKind.ADMIN,
        name="c",
        token_hash="c",
        now=now,
        expires_at=now + timedelta(hours=1),
    )
    token_store.create(kind=TokenKind.RUN, name="r", token_hash="r", now=now, run_id=1)
    token_store.revoke(revoked.id, now=now)
    assert token_store.count_active_admin(now) == 2
    assert token_store.count_active_admin(now + timedelta(hours=1)) == 1
    assert token_store.find_active("a", now=now) == keep


def test_find_returns_revoked_tokens_with_their_attempt(
    token_store: TokenStore, now: datetime
) -> None:
    """Authentication must tell a token of an over attempt from an unknown one."""
    admin = token_store.create(kind=TokenKind.ADMIN, name="ops", token_hash="a", now=now)
    run_token = token_store.create(
        kind=TokenKind.RUN, name="run 7", token_hash="r7", now=now, run_id=7, attempt=2
    )
    token_store.create(kind=TokenKind.RUN, name="run 8", token_hash="r8", now=now, run_id=8)
    token_store.create(kind=TokenKind.RUN, name="run 9", token_hash="r9", now=now, run_id=9)
    assert run_token.attempt == 2
    found = token_store.find("a")
    assert found is not None
    assert (found.token, found.run_status, found.run_attempt) == (admin, None, None)
    assert token_store.find("nope") is None

    with token_store._db.write() as conn:
        assert revoke_run_tokens(conn, [7, 8], now) == 2
    revoked = token_store.find("r7")
    assert revoked is not None
    assert revoked.token.revoked_at == now
    assert revoked.token.attempt == 2
    assert revoked.run_status is None  # no such run in this store
    assert token_store.find_active("r7", now=now) is None
    assert token_store.find_active("r9", now=now) is not None  # another run's token
