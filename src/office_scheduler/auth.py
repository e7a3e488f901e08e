"""Bearer tokens: minted once, stored as SHA-256 hashes, checked by hash lookup.

Admin tokens are for people and scripts; run tokens are minted per run for the launched
agent, reach only the run's workspace, may do only what :data:`RUN_TOKEN_SCOPES` lists,
and expire (are revoked) when the run ends.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from office_scheduler.domain.errors import AuthError
from office_scheduler.domain.models import ApiToken
from office_scheduler.domain.status import TokenKind
from office_scheduler.store.facade import Store

ADMIN_PREFIX = "osa_"
RUN_PREFIX = "osr_"
#: Longer bearer values are refused without hashing (ours are 47 characters).
MAX_SECRET_CHARS = 200

#: The API operations a run token (a launched agent) may call, by operation name (the
#: route's endpoint function), each with why an agent needs it. Everything else needs an
#: admin token: this table is deny-by-default, so a new route is admin-only until listed.
#: The routes add the finer rules: every entity must be in the token's workspace (else
#: 404, as if missing), ``wake_agent`` wakes only the token's own agent, and a task write
#: may name only agents, projects and tasks of that workspace. Not listed, so admin-only:
#: approving or rejecting (an agent never decides its own approval), budgets and spend,
#: agent settings and pause/resume/stop, workspaces, projects, routines and their triggers
#: and fires (a webhook's URL can be its credential), inbox decisions, channel messages
#: and tokens.
RUN_TOKEN_SCOPES: Mapping[str, str] = MappingProxyType(
    {
        "list_workspaces": "find its workspace (only its own is listed)",
        "get_workspace": "read its workspace",
        "ids_with_prefix": "expand the short ids the dashboard shows (its workspace only)",
        "list_activity": "read what happened in its workspace",
        "list_projects": "read the projects of its workspace",
        "get_project": "read a project",
        "list_agents": "find colleagues to assign work to",
        "get_agent": "read a colleague",
        "list_tasks": "find work",
        "get_task": "read a task",
        "list_subtasks": "follow the subtasks it created",
        "create_task": "split work into subtasks and assign them",
        "update_task": "move its task on, reassign within the workspace",
        "add_blocker": "order subtasks",
        "remove_blocker": "order subtasks",
        "archive_task": "drop a subtask it no longer needs",
        "list_comments": "read the discussion of a task",
        "add_comment": "report progress",
        "list_runs": "see the runs of its workspace",
        "get_run": "read a run and its event log",
        "list_wakeups": "see why agents were woken",
        "get_wakeup": "read one wake",
        "queue_run": "hand a task to a colleague now",
        "wake_agent": "ask to be woken again (its own agent only)",
        "list_routines": "read the routines of its workspace",
        "get_routine": "read a routine",
        "list_routine_runs": "read what a routine did",
        "request_approval": "ask a person to decide",
        "list_approvals": "see the decisions it waits for",
        "get_approval": "read one approval",
        "list_inbox": "read what the people were told",
        "get_inbox_item": "read one inbox item",
    }
)
_DECIDE = "agents cannot approve or reject: a person decides with an admin token"
#: Why a run token is refused, for operations where the general reason is not enough.
_DENIALS: Mapping[str, str] = MappingProxyType({"approve": _DECIDE, "reject": _DECIDE})


def denial(operation: str) -> str:
    """The 403 message a run token gets for ``operation`` (one outside its scope)."""
    return _DENIALS.get(operation, f"a run token may not call {operation}: it needs an admin token")


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

    def may(self, operation: str) -> bool:
        """Whether this caller may call the API operation named ``operation`` at all.

        Admins may call everything; a run token only what :data:`RUN_TOKEN_SCOPES` lists.
        """
        return self.is_admin or operation in RUN_TOKEN_SCOPES


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

    def revoke(self, token_id: str, *, now: datetime) -> ApiToken:
        """Revoke one token (admin or run; idempotent) and return its record.

        Raises:
            NotFoundError: no such token (field ``token_id``).
        """
        self._store.tokens.revoke(token_id, now=now)
        return self._store.tokens.get(token_id)

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
        if len(secret) > MAX_SECRET_CHARS:
            raise AuthError("invalid, revoked or expired token")
        token = self._store.tokens.find_active(hash_token(secret), now=now)
        if token is None:
            raise AuthError("invalid, revoked or expired token")
        return Principal(token=token)

    async def authenticate_async(self, secret: str, *, now: datetime) -> Principal:
        """:meth:`authenticate` off the event loop."""
        return await asyncio.to_thread(self.authenticate, secret, now=now)
