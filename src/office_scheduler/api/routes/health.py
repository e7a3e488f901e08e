"""``GET /healthz``: liveness of the database and the scheduler loops (no auth)."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from office_scheduler.api.deps import ServiceDep
from office_scheduler.api.views import HealthOut
from office_scheduler.service import Service

router = APIRouter(tags=["health"])
log = structlog.get_logger(__name__)


def _loops(service: Service) -> dict[str, Any]:
    failed = service.failed
    if failed is None:
        state = "not_started"
    elif failed.done():
        state = "crashed"
    else:
        state = "running"
    return {"scheduler": state, "inflight_runs": service.runs.inflight}


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
async def healthz(service: ServiceDep) -> JSONResponse:
    """``status`` is ``ok`` (200) when the database answers and no loop has crashed."""
    try:
        database_ok = await asyncio.to_thread(service.store.listing.ping)
    except Exception as exc:
        log.warning("healthz_database_error", error=repr(exc))
        database_ok = False
    loops = _loops(service)
    healthy = database_ok and loops["scheduler"] != "crashed"
    body = HealthOut(
        status="ok" if healthy else "error",
        database="ok" if database_ok else "error",
        loops=loops,
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if healthy else 503)
