"""API tokens: create, list and revoke admin tokens (admin only; run tokens get 403).

A new admin token's secret is in the creating response only; the database keeps its
SHA-256 hash, and no listing ever shows a secret or a hash. Run tokens are minted by the
scheduler for each run and listed here too; revoking one cuts a launched agent off at
once (a run token also stops working when its run ends).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field

from office_scheduler.api.deps import PrincipalDep, ServiceDep, require_admin
from office_scheduler.api.routes.common import ERRORS, Cursor, Limit, checked_cursor
from office_scheduler.api.schemas import InputModel, Name
from office_scheduler.api.views import ListOut, Timestamp, View
from office_scheduler.domain.models import ApiToken
from office_scheduler.domain.status import TokenKind

router = APIRouter(tags=["tokens"], responses=ERRORS)


class TokenCreate(InputModel):
    """``POST /api/v1/tokens``: a new admin token."""

    name: Name


class TokenOut(View):
    """A token's record; never its secret nor its hash."""

    id: str
    kind: TokenKind
    name: str
    workspace_id: str | None
    agent_id: str | None
    run_id: int | None
    #: The run attempt a run token belongs to (``None`` for admin tokens).
    attempt: int | None = None
    created_at: Timestamp
    expires_at: Timestamp | None
    revoked_at: Timestamp | None
    active: bool

    @classmethod
    def of(cls, token: ApiToken, now: datetime) -> TokenOut:
        """The view of ``token``; ``active`` is judged at ``now``."""
        expired = token.expires_at is not None and token.expires_at <= now
        return cls(
            id=token.id,
            kind=token.kind,
            name=token.name,
            workspace_id=token.workspace_id,
            agent_id=token.agent_id,
            run_id=token.run_id,
            attempt=token.attempt,
            created_at=token.created_at,
            expires_at=token.expires_at,
            revoked_at=token.revoked_at,
            active=token.revoked_at is None and not expired,
        )


class TokenCreatedOut(TokenOut):
    """A new admin token with its secret: shown in this response only, never again."""

    secret: str = Field(description="the bearer secret; store it now, it is never shown again")


@router.post("/tokens", status_code=201)
async def create_token(
    body: TokenCreate, service: ServiceDep, principal: PrincipalDep
) -> TokenCreatedOut:
    """Create an admin token; its ``secret`` is returned this once."""
    require_admin(principal)
    now = service.clock.now()
    secret, record = await asyncio.to_thread(service.tokens.mint_admin, name=body.name, now=now)
    return TokenCreatedOut(**TokenOut.of(record, now).model_dump(), secret=secret)


@router.get("/tokens")
async def list_tokens(
    service: ServiceDep,
    principal: PrincipalDep,
    kind: Annotated[TokenKind | None, Query()] = None,
    active: Annotated[bool | None, Query(description="only active, or only inactive")] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ListOut[TokenOut]:
    """Tokens, newest first (no secrets, no hashes)."""
    require_admin(principal)
    now = service.clock.now()
    page = await asyncio.to_thread(
        service.store.tokens.page,
        now=now,
        kind=kind,
        active=active,
        limit=limit,
        cursor=checked_cursor(cursor, (datetime, str)),
    )
    return ListOut(items=[TokenOut.of(t, now) for t in page.items], next_cursor=page.next_cursor)


@router.post("/tokens/{token_id}/revoke")
async def revoke_token(token_id: str, service: ServiceDep, principal: PrincipalDep) -> TokenOut:
    """Revoke a token at once (idempotent; the first ``revoked_at`` stays)."""
    require_admin(principal)
    now = service.clock.now()
    record = await asyncio.to_thread(service.tokens.revoke, token_id, now=now)
    return TokenOut.of(record, now)
