"""The web dashboard: server-rendered pages over the same service calls as the API.

:func:`install_dashboard` mounts it on the API's FastAPI application at ``/``.
"""

from __future__ import annotations

from office_scheduler.web.app import install_dashboard

__all__ = ["install_dashboard"]
