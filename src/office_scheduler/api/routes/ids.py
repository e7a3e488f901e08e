"""``GET /api/v1/ids/{kind}/{prefix}``: the ids a short prefix names (what the CLI expands).

The dashboard shows the first 8 characters of an id; the CLI accepts any unique prefix of at
least 6 and asks this endpoint which ids start with it. A run token sees only its own
workspace's records.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from pydantic import BaseModel

from office_scheduler.api.deps import PrincipalDep, ServiceDep, scope_filter
from office_scheduler.api.routes.common import ERRORS

router = APIRouter(tags=["ids"], responses=ERRORS)


class IdMatchesOut(BaseModel):
    """The ids found, sorted; at most 10 (more than one means the prefix is ambiguous)."""

    kind: str
    prefix: str
    ids: list[str]


@router.get("/ids/{kind}/{prefix}")
async def ids_with_prefix(
    kind: str, prefix: str, service: ServiceDep, principal: PrincipalDep
) -> IdMatchesOut:
    """Ids of ``kind`` (``tasks``, ``agents``, ...) starting with ``prefix`` (6+ hex digits)."""
    found = await asyncio.to_thread(
        service.store.listing.ids_with_prefix,
        kind,
        prefix,
        workspace_id=scope_filter(principal, None),
    )
    return IdMatchesOut(kind=kind, prefix=prefix, ids=found)
