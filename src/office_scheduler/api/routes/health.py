"""``GET /healthz``: liveness of the database and the scheduler loops (no auth).

Besides ``status`` and ``database`` it tells which node answered and what that node does:
``node_id``, ``role`` (``api+scheduler``, or ``api`` for ``office serve --no-scheduler``),
``maintenance_leader`` (whether this node acts as maintenance leader now), ``leader`` (the
leader as this node last read the lease: ``node_id``, ``epoch``, ``expires_at`` ISO 8601
UTC, ``this_node``; see :meth:`Service.leadership_status`, which metrics read too), and in
``loops`` the state and lag (seconds since the last good pass) of each loop — ``runs``,
``cron``, ``maintenance`` and, on PostgreSQL, ``leader`` and ``wake_listener`` — next to
the overall ``scheduler`` state and ``inflight_runs``.
"""

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


def _loops(service: Service, node: dict[str, Any]) -> dict[str, Any]:
    failed = service.failed
    if failed is None:
        state = "not_started"
    elif failed.done():
        state = "crashed"
    elif not service.scheduler_running:
        state = "stopped"
    else:
        state = "running"
    loops: dict[str, Any] = {"scheduler": state, "inflight_runs": node["inflight_runs"]}
    if service.scheduler_running:
        loops.update(node["loops"])
    return loops


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
async def healthz(service: ServiceDep) -> JSONResponse:
    """``status`` is ``ok`` (200) when the database answers and no loop has crashed."""
    try:
        database_ok = await asyncio.to_thread(service.store.listing.ping)
    except Exception as exc:
        log.warning("healthz_database_error", error=repr(exc))
        database_ok = False
    node = service.node_status()
    loops = _loops(service, node)
    healthy = database_ok and loops["scheduler"] != "crashed"
    body = HealthOut(
        status="ok" if healthy else "error",
        database="ok" if database_ok else "error",
        loops=loops,
        node_id=node["node_id"],
        role="api+scheduler" if node["scheduler"] else "api",
        maintenance_leader=node["maintenance_leader"],
        leader=node["leader"],
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if healthy else 503)
