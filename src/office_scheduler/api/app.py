"""The FastAPI application over a :class:`~office_scheduler.service.Service`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from office_scheduler import __version__
from office_scheduler.api.deps import reject_nul
from office_scheduler.api.errors import install_error_handlers
from office_scheduler.api.limits import Authenticate, install_limits
from office_scheduler.api.routes import api_router
from office_scheduler.domain.errors import AuthError
from office_scheduler.service import Service
from office_scheduler.web import install_dashboard


def create_app(service: Service, *, lifespan_manages_service: bool = False) -> FastAPI:
    """Build the HTTP API (OpenAPI at ``/docs``) for ``service``.

    Args:
        service: the scheduler service the handlers call.
        lifespan_manages_service: when true, the app's lifespan starts the service's loops
            (``await service.start()``) and closes it on shutdown (``await service.close()``);
            otherwise the caller owns the service's lifecycle.

    Returns:
        The application; ``app.state.service`` is ``service``.
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if lifespan_manages_service:
            await service.start()
        try:
            yield
        finally:
            if lifespan_manages_service:
                await service.close()

    app = FastAPI(
        title="Office Scheduler",
        version=__version__,
        description="Wakes an office of AI coding agents; every wake runs exactly once.",
        lifespan=lifespan,
        dependencies=[Depends(reject_nul)],
    )
    app.state.service = service
    install_error_handlers(app)
    install_limits(app, authenticate=_token_check(service))
    app.include_router(api_router)
    # The web dashboard at / (its routes stay out of the OpenAPI schema).
    install_dashboard(app)
    return app


def _token_check(service: Service) -> Authenticate:
    """Whether a bearer secret is a valid token of ``service`` (checked off the loop)."""

    async def check(secret: str) -> bool:
        try:
            await service.tokens.authenticate_async(secret, now=service.clock.now())
        except AuthError:
            return False
        return True

    return check
