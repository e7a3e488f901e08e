"""The ``office`` command line (click): server, import/export, demo and client commands.

This package is the only place that reads the process environment, configures logging,
installs signal handlers and calls :func:`asyncio.run`.
"""

from __future__ import annotations

from office_scheduler.cli.main import main, office

__all__ = ["main", "office"]
