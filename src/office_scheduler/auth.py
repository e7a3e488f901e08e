"""Bearer tokens: minted once, stored as SHA-256 hashes, checked by hash lookup.

Admin tokens are for people and scripts; run tokens are minted per run for the launched
agent, reach only the run's workspace, and expire (are revoked) when the run ends.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from office_scheduler.domain.errors import AuthError
from office_scheduler.domain.models import ApiToken
from office_scheduler.domain.status import TokenKind
from office_scheduler.store.facade import Store

ADMIN_PREFIX = "osa_"
RUN_PREFIX = "osr_"


def hash_token(secret: str) -> str:
    """SHA-256 hex digest of a token secret (the only form the database keeps)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """Who is calling: an admin, or the agent of one run (limited to its workspace)."""

    token: ApiToken

    @property
    def is_admin(self) -> bool:
        """True for admin tokens."""
        return self.token.kind is TokenKind.ADMIN

    @property
    def workspace_id(self) -> str | None:
        """The only workspace a run token may reach; ``None`` for admins."""
        return self.token.workspace_id

    @property
    def agent_id(self) -> str | None:
        """The agent a run token belongs to."""
        return self.token.agent_id


class TokenService:
    """Mints and verifies tokens."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def mint_admin(self, *, name: str, now: datetime) -> tuple[str, ApiToken]:
        """Create an admin token; returns ``(secret, record)``. The secret is shown once."""
        secret = ADMIN_PREFIX + secrets.token_urlsafe(32)
        record = self._store.tokens.create(
            kind=TokenKind.ADMIN, name=name, token_hash=hash_token(secret), now=now
        )
        return secret, record

    def mint_run(
        self,
        *,
        workspace_id: str,
        agent_id: str,
        run_id: int,
        now: datetime,
        ttl: timedelta,
    ) -> str:
        """Create the token a run's agent calls back with; valid until revoked or ``now+ttl``."""
        secret = RUN_PREFIX + secrets.token_urlsafe(32)
        self._store.tokens.create(
            kind=TokenKind.RUN,
            name=f"run {run_id}",
            token_hash=hash_token(secret),
            now=now,
            workspace_id=workspace_id,
            agent_id=agent_id,
            run_id=run_id,
            expires_at=now + ttl,
        )
        return secret

    def revoke_run(self, run_id: int, *, now: datetime) -> None:
        """Revoke every token of ``run_id`` (the run ended)."""
        self._store.tokens.revoke_for_run(run_id, now=now)

    def authenticate(self, secret: str, *, now: datetime) -> Principal:
        """Return the principal of ``secret``.

        The lookup is by SHA-256 of the secret through a unique index, so no stored secret
        is ever compared character by character.

        Raises:
            AuthError: unknown, revoked or expired token.
        """
        token = self._store.tokens.find_active(hash_token(secret), now=now)
        if token is None:
            raise AuthError("invalid, revoked or expired token")
        return Principal(token=token)

    async def authenticate_async(self, secret: str, *, now: datetime) -> Principal:
        """:meth:`authenticate` off the event loop."""
        return await asyncio.to_thread(self.authenticate, secret, now=now)
