"""The HTTP API (FastAPI) under ``/api/v1``: a thin layer over the service."""

from __future__ import annotations

from office_scheduler.api.app import create_app

__all__ = ["create_app"]
