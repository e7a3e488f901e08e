"""The dashboard's read-only store over a service's database."""

from __future__ import annotations

from office_scheduler.service import Service
from office_scheduler.store.dashboard import DashboardStore


def dashboard_store(service: Service) -> DashboardStore:
    """A :class:`DashboardStore` over the service's database (cheap: it holds no state)."""
    return DashboardStore(service.store.db)
