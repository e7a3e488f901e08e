"""Bearer tokens: minted once, stored as SHA-256 hashes, checked by hash lookup.

Admin tokens are for people and scripts; run tokens are minted per run **attempt** (each
launch of a run) for the launched agent, reach only the run's workspace, may do only what
:data:`RUN_TOKEN_SCOPES` lists, and stop working when their attempt is over: the run was
requeued (shutdown, lost connection), its lease expired, it was cancelled or retried, it
ended, or it was launched again (DESIGN §4). A zombie session of an earlier attempt, such
as the agent of a node killed mid-session, can therefore change nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from office_scheduler.domain.errors import AuthError
from office_scheduler.domain.models import ApiToken
from office_scheduler.domain.status import RunStatus, TokenKind
from office_scheduler.store.facade import Store
from office_scheduler.store.tokens import FoundToken

ADMIN_PREFIX = "osa_"
RUN_PREFIX = "osr_"
#: Longer bearer values are refused without hashing (ours are 47 characters).
MAX_SECRET_CHARS = 200
#: Prefix of dashboard session ids (the cookie's value; never a bearer token).
SESSION_PREFIX = "oss_"
#: How long a dashboard session lasts after sign-in.
SESSION_TTL = timedelta(hours=12)
#: The 401 message of an unknown, revoked or expired token.
INVALID_TOKEN = "invalid, revoked or expired token"  # noqa: S105 (a message, not a secret)
#: The 401 message of a run token whose attempt is over.
ATTEMPT_OVER = "this run attempt is over"

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
#: The body fields a run token may send, per operation of :data:`RUN_TOKEN_SCOPES` that
#: takes a body. Any other field answers 403 naming it, checked with the scope table before
#: the route runs: deny-by-default again, so a new body field is a person's until listed.
#: Left out on purpose, because they choose what runs or with which credentials: a task's
#: ``executor`` override (its ``env`` secrets), its ``project_id`` (the project's
#: directory, worktree strategy and executor); see :data:`RUN_TOKEN_KEPT_FIELDS`.
RUN_TOKEN_FIELDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "create_task": frozenset(
            {
                "title",
                "description",
                "parent_id",
                "assignee_agent_id",
                "state",
                "requires_approval",
                "reviewers",
                "approvers",
                "blocked_by",
                "workflow",
            }
        ),
        # requires_approval, reviewers and approvers reach the task service, which
        # refuses them to agents with the review rules' own message.
        "update_task": frozenset(
            {
                "title",
                "description",
                "state",
                "assignee_agent_id",
                "requires_approval",
                "reviewers",
                "approvers",
            }
        ),
        "add_blocker": frozenset({"blocker_task_id"}),
        "add_comment": frozenset({"body"}),
        "queue_run": frozenset({"task_id", "agent_id", "idempotency_key"}),
        "wake_agent": frozenset({"reason", "payload", "task_id", "idempotency_key"}),
        "request_approval": frozenset({"title", "body", "task_id", "requested_by_agent_id"}),
    }
)
#: Fields a run token may send only with the value they have anyway, so that sending them
#: changes nothing: on ``update_task`` the task's current value, on ``create_task`` the
#: parent's (a subtask inherits its parent's project), or ``null`` without a parent.
RUN_TOKEN_KEPT_FIELDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "create_task": frozenset({"executor", "project_id"}),
        "update_task": frozenset({"executor", "project_id"}),
    }
)
_DECIDE = "agents cannot approve or reject: a person decides with an admin token"
#: Why a run token is refused, for operations where the general reason is not enough.
_DENIALS: Mapping[str, str] = MappingProxyType({"approve": _DECIDE, "reject": _DECIDE})


def denial(operation: str) -> str:
    """The 403 message a run token gets for ``operation`` (one outside its scope)."""
    return _DENIALS.get(operation, f"a run token may not call {operation}: it needs an admin token")


def field_denial(operation: str, field: str) -> str:
    """The 403 message a run token gets for sending ``field`` to ``operation``."""
    return (
        f"a run token may not set {field} on {operation}: it chooses what runs or with which"
        " credentials, a person decides it with an admin token"
    )


def refused_fields(operation: str, sent: object) -> list[str]:
    """The top-level body fields of ``sent`` a run token may not send to ``operation``.

    Args:
        operation: the API operation (route endpoint name).
        sent: the parsed JSON body; anything but an object has no fields to refuse (the
            route's own validation answers it).

    Returns:
        The refused field names, sorted (empty when all are allowed).
    """
    if not isinstance(sent, dict):
        return []
    allowed = RUN_TOKEN_FIELDS.get(operation, frozenset())
    kept = RUN_TOKEN_KEPT_FIELDS.get(operation, frozenset())
    return sorted(str(name) for name in sent if name not in allowed and name not in kept)


def changed_kept_fields(
    operation: str, sent: Mapping[str, object], reference: Mapping[str, object]
) -> list[str]:
    """The :data:`RUN_TOKEN_KEPT_FIELDS` of ``operation`` that ``sent`` would change.

    Args:
        operation: the API operation.
        sent: the parsed JSON body.
        reference: the values those fields have anyway (missing: ``None``).

    Returns:
        The changed field names, sorted.
    """
    kept = RUN_TOKEN_KEPT_FIELDS.get(operation, frozenset())
    return sorted(name for name in kept if name in sent and sent[name] != reference.get(name))


class AttemptOverError(AuthError):
    """A run token of an attempt that is over (401, :data:`ATTEMPT_OVER`).

    Attributes:
        run_id: the token's run.
        attempt: the attempt the token was minted for.
        current_attempt: the run's attempt now (launches so far).
        status: the run's status now.
    """

    def __init__(self, *, run_id: int, attempt: int, current_attempt: int, status: RunStatus):
        super().__init__(ATTEMPT_OVER)
        self.run_id = run_id
        self.attempt = attempt
        self.current_attempt = current_attempt
        self.status = status


def attempt_over(token_attempt: int, run_attempt: int, run_status: RunStatus) -> bool:
    """Whether a run token of ``token_attempt`` may no longer act for its run.

    Attempt N (N ≥ 1) is the run's N-th launch: it is live from the launch (the run
    becomes ``running`` with ``attempt = N``) until the run leaves ``running`` (requeue,
    lease expiry, retry, cancel, end) or is launched again (``attempt`` N+1). Attempt 0
    is a token minted before the run's first launch (tools and tests): live until the run
    is launched or ends.

    Args:
        token_attempt: the attempt the token was minted for.
        run_attempt: the run's current attempt.
        run_status: the run's current status.
    """
    if run_status.is_terminal or token_attempt != run_attempt:
        return True
    return token_attempt >= 1 and run_status is not RunStatus.RUNNING


#: Bits of an IPv6 address that name one client for rate limits (a /64: one site's network).
IPV6_CLIENT_BITS = 64


def source_key(host: str) -> str:
    """The key a request's source address is rate-limited under.

    An IPv4 address is itself (an IPv4-mapped IPv6 address counts as its IPv4 address); an
    IPv6 address counts as its /64 network, because a single host is routinely given a
    whole /64 and could otherwise make each request from a new address (and, by filling
    the limiters' tables, push the others' counts out). Anything else (a Unix socket, a
    test client's name) is returned as it is.
    """
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        network = ipaddress.IPv6Network((address, IPV6_CLIENT_BITS), strict=False)
        return str(network)
    return str(address)


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

    @property
    def attempt(self) -> int | None:
        """The run attempt a run token belongs to (its fencing number); ``None`` for admins."""
        return self.token.attempt

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
        attempt: int,
        now: datetime,
        ttl: timedelta,
    ) -> str:
        """Create the token a run attempt's agent calls back with.

        It is valid until its attempt is over (:func:`attempt_over`), it is revoked, or
        ``now + ttl``, whichever comes first.

        Args:
            workspace_id: the only workspace the token reaches.
            agent_id: the agent it acts for.
            run_id: its run.
            attempt: the launch it belongs to (``Run.attempt`` after the launch; 0 for a
                token minted before the first launch).
            now: creation instant (UTC).
            ttl: lifetime.
        """
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
            attempt=attempt,
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
        is ever compared character by character; the token's run is read in the same
        query. A run token whose attempt is over is refused as such, whether or not its
        revocation was written; any other revoked or expired token is merely invalid.

        Raises:
            AttemptOverError: a run token of an attempt that is over (401).
            AuthError: unknown, revoked or expired token, or one whose run is gone (401).
        """
        if len(secret) > MAX_SECRET_CHARS:
            raise AuthError(INVALID_TOKEN)
        found = self._store.tokens.find(hash_token(secret))
        if found is None:
            raise AuthError(INVALID_TOKEN)
        _check_attempt(found)
        token = found.token
        expired = token.expires_at is not None and token.expires_at <= now
        if token.revoked_at is not None or expired:
            raise AuthError(INVALID_TOKEN)
        return Principal(token=token)

    async def authenticate_async(self, secret: str, *, now: datetime) -> Principal:
        """:meth:`authenticate` off the event loop."""
        return await asyncio.to_thread(self.authenticate, secret, now=now)

    def start_session(self, principal: Principal, *, now: datetime) -> str:
        """Open a dashboard session for an admin; returns its id (the cookie's value).

        The id is random (256 bits) and stored only as its SHA-256; the session lasts
        :data:`SESSION_TTL` and ends earlier on sign-out or when its token is revoked.

        Raises:
            AuthError: ``principal`` is not an admin.
        """
        if not principal.is_admin:
            raise AuthError("the dashboard needs an admin token (run tokens are for agents)")
        session_id = SESSION_PREFIX + secrets.token_urlsafe(32)
        self._store.tokens.create_session(
            session_hash=hash_token(session_id),
            token_id=principal.token.id,
            now=now,
            expires_at=now + SESSION_TTL,
        )
        return session_id

    def session(self, session_id: str, *, now: datetime) -> Principal:
        """The admin of a live dashboard session.

        Raises:
            AuthError: an unknown, ended or expired session, or one whose token is no
                longer active.
        """
        if len(session_id) > MAX_SECRET_CHARS:
            raise AuthError("no such session")
        token = self._store.tokens.find_session(hash_token(session_id), now=now)
        if token is None or token.kind is not TokenKind.ADMIN:
            raise AuthError("no such session")
        return Principal(token=token)

    def end_session(self, session_id: str, *, now: datetime) -> None:
        """End a dashboard session (sign-out; idempotent)."""
        if len(session_id) <= MAX_SECRET_CHARS:
            self._store.tokens.revoke_session(hash_token(session_id), now=now)


def _check_attempt(found: FoundToken) -> None:
    """Refuse a run token whose run is gone or whose attempt is over."""
    token = found.token
    if token.kind is not TokenKind.RUN or token.run_id is None:
        return
    if found.run_status is None or found.run_attempt is None:
        raise AuthError(INVALID_TOKEN)
    attempt = token.attempt if token.attempt is not None else 0
    if attempt_over(attempt, found.run_attempt, found.run_status):
        raise AttemptOverError(
            run_id=token.run_id,
            attempt=attempt,
            current_attempt=found.run_attempt,
            status=found.run_status,
        )
