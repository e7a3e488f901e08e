"""Mounting the dashboard on the API application."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from office_scheduler.web import sse
from office_scheduler.web.pages import agents, auth, board, inbox, overview, routines, runs

STATIC = Path(__file__).parent / "static"


def install_dashboard(app: FastAPI) -> None:
    """Add the dashboard's pages, its event stream and ``/static`` to ``app``.

    The routes are left out of the OpenAPI schema, which stays the API's. Every page needs
    a session (see :mod:`office_scheduler.web.session`) except ``/login``.
    """
    for module in (auth, overview, board, runs, routines, inbox, agents, sse):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
