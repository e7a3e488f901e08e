"""Route modules of the HTTP API, gathered into one router."""

from __future__ import annotations

from fastapi import APIRouter

from office_scheduler.api.routes import (
    agents,
    approvals,
    budgets,
    channels,
    comments,
    health,
    ids,
    inbox,
    notifications,
    projects,
    queue,
    routines,
    runaway,
    tasks,
    tokens,
    webhooks,
    workspaces,
)

__all__ = ["api_router"]

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(budgets.router, prefix="/api/v1")
for _module in (
    workspaces,
    projects,
    agents,
    tasks,
    comments,
    queue,
    routines,
    approvals,
    inbox,
    channels,
    notifications,
    tokens,
    ids,
    runaway,
):
    api_router.include_router(_module.router, prefix="/api/v1")
#: Public, outside ``/api/v1``: the webhook trigger's signing mode authenticates the caller.
api_router.include_router(webhooks.router)
