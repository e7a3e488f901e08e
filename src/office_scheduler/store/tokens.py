"""API tokens: only the hash of each secret is stored.

Every public method is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.models import ApiToken
from office_scheduler.domain.status import RunStatus, TokenKind
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import token_from_row
from office_scheduler.store.schema import api_tokens, dashboard_sessions, runs
from office_scheduler.store.sql import all_rows, first_row, unique_conflict
from office_scheduler.store.validation import clean_text, enum_value


def _active(now: datetime | sa.BindParameter[datetime]) -> sa.ColumnElement[bool]:
    """Tokens neither revoked nor expired at ``now``."""
    return sa.and_(
        api_tokens.c.revoked_at.is_(None),
        sa.or_(api_tokens.c.expires_at.is_(None), api_tokens.c.expires_at > now),
    )


_FIND_ACTIVE = sa.select(api_tokens).where(
    api_tokens.c.token_hash == sa.bindparam("token_hash"),
    _active(sa.bindparam("now", type_=api_tokens.c.expires_at.type)),
)


_INSERT_TOKEN = sa.insert(api_tokens).returning(*api_tokens.c)
_REVOKE_RUN_TOKENS = sa.update(api_tokens).where(
    api_tokens.c.run_id.in_(sa.bindparam("token_run_ids", expanding=True)),
    api_tokens.c.revoked_at.is_(None),
)
#: A token by its hash, revoked and expired ones too, with the state of its run (if any).
_FIND_WITH_RUN = sa.select(
    api_tokens, runs.c.status.label("run_status"), runs.c.attempt.label("run_attempt")
).select_from(api_tokens.outerjoin(runs, runs.c.id == api_tokens.c.run_id))


def revoke_run_tokens(conn: Connection, run_ids: int | Sequence[int], now: datetime) -> int:
    """Revoke every unrevoked token of the run(s) in the caller's transaction.

    Called wherever a run attempt ends (requeue, lease expiry, retry, cancel, end).

    Returns:
        How many tokens were revoked.
    """
    wanted = [run_ids] if isinstance(run_ids, int) else list(run_ids)
    params = {"token_run_ids": wanted, "revoked_at": now}
    return conn.execute(_REVOKE_RUN_TOKENS, params).rowcount


@dataclass(frozen=True, kw_only=True, slots=True)
class FoundToken:
    """A token found by its hash, whatever its state, and the state of its run.

    Attributes:
        token: the stored record (it may be revoked or expired).
        run_status: the status of the token's run; ``None`` for admin tokens and for a
            run that no longer exists.
        run_attempt: the run's current attempt (launches so far), ``None`` likewise.
    """

    token: ApiToken
    run_status: RunStatus | None
    run_attempt: int | None


class TokenStore:
    """Bearer tokens of people (``admin``) and of launched agents (``run``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(
        self,
        *,
        kind: TokenKind,
        name: str,
        token_hash: str,
        now: datetime,
        workspace_id: str | None = None,
        agent_id: str | None = None,
        run_id: int | None = None,
        expires_at: datetime | None = None,
        attempt: int | None = None,
    ) -> ApiToken:
        """Store a new token by the hash of its secret.

        Args:
            kind: ``admin`` or ``run``; a run token names its run.
            name: a label for people.
            token_hash: the hash of the secret (the secret itself is never stored).
            now: creation instant.
            workspace_id: the workspace a scoped token may act in.
            agent_id: the agent a run token acts for.
            run_id: the run a run token belongs to (it is revoked when the run ends).
            expires_at: after this instant the token no longer authenticates.
            attempt: the run attempt a run token belongs to (its fencing number).

        Returns:
            The stored token record.

        Raises:
            InvalidInputError: unknown ``kind``, blank ``name`` or ``token_hash``, or a run
                token without ``run_id`` (named in ``field``).
            ConflictError: a token with that hash exists (field ``token_hash``).
        """
        token_kind = enum_value(TokenKind, kind, field="kind")
        if token_kind is TokenKind.RUN and run_id is None:
            raise InvalidInputError("a run token needs its run_id", field="run_id")
        clean_text(token_hash, field="token_hash")
        token_id = new_id()
        values = {
            "id": token_id,
            "kind": token_kind.value,
            "name": clean_text(name, field="name"),
            "token_hash": token_hash,
            "workspace_id": workspace_id,
            "agent_id": agent_id,
            "run_id": run_id,
            "created_at": now,
            "expires_at": expires_at,
            "attempt": attempt,
        }
        message = "a token with this hash already exists"
        # The unique index on token_hash decides a collision (reported as ConflictError).
        with unique_conflict(field="token_hash", message=message), self._db.write() as conn:
            return token_from_row(conn.execute(_INSERT_TOKEN, values).mappings().one())

    def find_active(self, token_hash: str, *, now: datetime) -> ApiToken | None:
        """Return the token with this hash when it is neither revoked nor expired at ``now``."""
        with self._db.read() as conn:
            found = conn.execute(_FIND_ACTIVE, {"token_hash": token_hash, "now": now})
            row = found.mappings().first()
            return None if row is None else token_from_row(row)

    def find(self, token_hash: str) -> FoundToken | None:
        """Return the token with this hash (revoked and expired ones too) and its run's state.

        One indexed read, so authenticating a run token costs one query.
        """
        query = _FIND_WITH_RUN.where(api_tokens.c.token_hash == token_hash)
        with self._db.read() as conn:
            row = first_row(conn, query)
        if row is None:
            return None
        status = row["run_status"]
        return FoundToken(
            token=token_from_row(row),
            run_status=RunStatus(status) if status is not None else None,
            run_attempt=row["run_attempt"],
        )

    def revoke(self, token_id: str, *, now: datetime) -> None:
        """Revoke a token and its dashboard sessions (idempotent).

        A revoked token keeps its first ``revoked_at``.

        Raises:
            NotFoundError: no such token (field ``token_id``).
        """
        with self._db.write() as conn:
            exists = sa.select(api_tokens.c.id).where(api_tokens.c.id == token_id)
            if conn.execute(exists).first() is None:
                raise NotFoundError(f"token {token_id} not found", field="token_id")
            conn.execute(
                sa.update(api_tokens)
                .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
            conn.execute(
                sa.update(dashboard_sessions)
                .where(
                    dashboard_sessions.c.token_id == token_id,
                    dashboard_sessions.c.revoked_at.is_(None),
                )
                .values(revoked_at=now)
            )

    def create_session(
        self, *, session_hash: str, token_id: str, now: datetime, expires_at: datetime
    ) -> None:
        """Store a dashboard session by the hash of its id, for the admin token ``token_id``."""
        with self._db.write() as conn:
            conn.execute(
                sa.insert(dashboard_sessions).values(
                    session_hash=session_hash,
                    token_id=token_id,
                    created_at=now,
                    expires_at=expires_at,
                )
            )

    def find_session(self, session_hash: str, *, now: datetime) -> ApiToken | None:
        """The token of a live dashboard session, else ``None``.

        Live: neither the session nor its token is revoked or expired at ``now``.
        """
        query = (
            sa.select(api_tokens)
            .join(dashboard_sessions, dashboard_sessions.c.token_id == api_tokens.c.id)
            .where(
                dashboard_sessions.c.session_hash == session_hash,
                dashboard_sessions.c.revoked_at.is_(None),
                dashboard_sessions.c.expires_at > now,
                _active(now),
            )
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
        return None if row is None else token_from_row(row)

    def revoke_session(self, session_hash: str, *, now: datetime) -> None:
        """End a dashboard session (idempotent; an unknown hash is ignored)."""
        with self._db.write() as conn:
            conn.execute(
                sa.update(dashboard_sessions)
                .where(
                    dashboard_sessions.c.session_hash == session_hash,
                    dashboard_sessions.c.revoked_at.is_(None),
                )
                .values(revoked_at=now)
            )

    def revoke_for_run(self, run_id: int, *, now: datetime) -> int:
        """Revoke every unrevoked token of a run.

        Returns:
            How many tokens this call revoked.
        """
        with self._db.write() as conn:
            return revoke_run_tokens(conn, run_id, now)

    def list_tokens(self, *, kind: TokenKind | None = None) -> list[ApiToken]:
        """Return every token (revoked and expired ones too), oldest first.

        Raises:
            InvalidInputError: an unknown ``kind``.
        """
        query = sa.select(api_tokens)
        if kind is not None:
            wanted = enum_value(TokenKind, kind, field="kind")
            query = query.where(api_tokens.c.kind == wanted.value)
        query = query.order_by(api_tokens.c.created_at, api_tokens.c.id)
        with self._db.read() as conn:
            return [token_from_row(row) for row in all_rows(conn, query)]

    def page(
        self,
        *,
        now: datetime,
        kind: TokenKind | None = None,
        active: bool | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[ApiToken]:
        """Return one page of tokens, newest first (``created_at``, then id).

        Args:
            now: the instant ``active`` is judged at (neither revoked nor expired).
            kind: only tokens of this kind.
            active: only active (``True``) or only revoked/expired (``False``) tokens.
            limit: page size (capped at 500).
            cursor: ``next_cursor`` of the previous page.

        Raises:
            InvalidInputError: a bad ``kind``, ``limit`` or ``cursor`` (named in ``field``).
        """
        limit = check_limit(limit)
        query = sa.select(api_tokens)
        if kind is not None:
            wanted = enum_value(TokenKind, kind, field="kind")
            query = query.where(api_tokens.c.kind == wanted.value)
        if active is not None:
            query = query.where(_active(now) if active else sa.not_(_active(now)))
        if cursor is not None:
            before_at, before_id = decode_cursor(cursor, (datetime, str))
            query = query.where(
                sa.or_(
                    api_tokens.c.created_at < before_at,
                    sa.and_(api_tokens.c.created_at == before_at, api_tokens.c.id < before_id),
                )
            )
        query = query.order_by(api_tokens.c.created_at.desc(), api_tokens.c.id.desc())
        with self._db.read() as conn:
            found = [token_from_row(row) for row in all_rows(conn, query.limit(limit + 1))]
        return make_page(found, limit=limit, key=lambda token: (token.created_at, token.id))

    def get(self, token_id: str) -> ApiToken:
        """Return one token's record.

        Raises:
            NotFoundError: no such token (field ``token_id``).
        """
        with self._db.read() as conn:
            row = first_row(conn, sa.select(api_tokens).where(api_tokens.c.id == token_id))
        if row is None:
            raise NotFoundError(f"token {token_id} not found", field="token_id")
        return token_from_row(row)

    def count_active_admin(self, now: datetime) -> int:
        """Return how many admin tokens are neither revoked nor expired at ``now``."""
        query = (
            sa.select(sa.func.count())
            .select_from(api_tokens)
            .where(api_tokens.c.kind == TokenKind.ADMIN.value, _active(now))
        )
        with self._db.read() as conn:
            return int(conn.execute(query).scalar_one())
