"""Request dependencies: the service, bearer authentication and workspace scoping.

Admin tokens reach everything. A run token may call only the operations of
:data:`office_scheduler.auth.RUN_TOKEN_SCOPES` (any other answers 403, checked here for
every authenticated route, before the route runs) and reaches only its own workspace: an
entity of any other workspace is reported exactly as a missing one (404), so ids of
other tenants never leak.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from office_scheduler.auth import Principal, denial
from office_scheduler.domain.errors import (
    AuthError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
)
from office_scheduler.domain.models import Agent, Project, Run, Task, WakeupRequest, Workspace
from office_scheduler.intake import causation
from office_scheduler.service import Service
from office_scheduler.store.activity import USER_ACTOR, agent_actor

_bearer = HTTPBearer(
    auto_error=False,
    description="An admin token, or the run-scoped token of a launched agent (OFFICE_TOKEN).",
)


async def reject_nul(request: Request) -> None:
    """Refuse NUL characters in path and query parameters (PostgreSQL cannot store them).

    ``async`` although it never awaits: FastAPI runs a plain ``def`` dependency in its
    thread pool, a thread hop on every request for a few microseconds of work.

    Raises:
        InvalidInputError: naming the parameter.
    """
    params = [*request.path_params.items(), *request.query_params.multi_items()]
    for name, value in params:
        if isinstance(value, str) and "\x00" in value:
            raise InvalidInputError(f"{name} must not contain NUL characters", field=name)


async def get_service(request: Request) -> Service:
    """The service the app was created for (``async``: no thread hop, see :func:`reject_nul`)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


def operation_of(request: Request) -> str:
    """The name of the API operation a request reached (its route's endpoint name)."""
    route = request.scope.get("route")
    return str(getattr(route, "name", "") or "")


async def authenticate(
    request: Request,
    service: ServiceDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller of this request, from ``Authorization: Bearer <token>``.

    A run token also stops working as soon as its run has ended, even if its revocation
    was missed, and may call only the operations its scope table lists.

    Raises:
        AuthError: no bearer token, or an unknown, revoked or expired one (401).
        ForbiddenError: a run token calling an operation outside its scope (403).
    """
    if credentials is None or not credentials.credentials:
        raise AuthError("missing bearer token")
    now = service.clock.now()
    principal = await service.tokens.authenticate_async(credentials.credentials, now=now)
    run_id = principal.token.run_id
    if not principal.is_admin and run_id is not None:
        try:
            run = await asyncio.to_thread(service.store.queue.get_run, run_id)
        except NotFoundError:
            raise AuthError("invalid, revoked or expired token") from None
        if run.status.is_terminal:
            raise AuthError("invalid, revoked or expired token")
    operation = operation_of(request)
    if not principal.may(operation):
        raise ForbiddenError(denial(operation))
    # Wakes this request causes are its run's (depth + 1) or a person's (depth 0).
    if principal.is_admin or run_id is None:
        causation.act_as_person()
    else:
        causation.act_as_run(run_id)
    return principal


PrincipalDep = Annotated[Principal, Depends(authenticate)]


def require_admin(principal: Principal) -> None:
    """Allow only admin tokens.

    Raises:
        ForbiddenError: a run token (403).
    """
    if not principal.is_admin:
        raise ForbiddenError("this operation needs an admin token")


def actor_of(principal: Principal) -> str:
    """The activity-log actor of the caller.

    Returns:
        ``user`` for an admin token, ``agent:<id>`` for a run token (the strings of
        :mod:`office_scheduler.store.activity`).
    """
    if principal.is_admin or principal.agent_id is None:
        return USER_ACTOR
    return agent_actor(principal.agent_id)


def check_workspace(
    principal: Principal,
    workspace_id: str,
    *,
    kind: str = "workspace",
    entity_id: str | int | None = None,
) -> None:
    """Let a run token reach only entities of its own workspace.

    Args:
        principal: the caller.
        workspace_id: the workspace of the entity being reached.
        kind: what the entity is (``task``, ``agent``...), for the not-found message.
        entity_id: the entity's id; default ``workspace_id``.

    Raises:
        NotFoundError: a run token of another workspace; worded like a missing entity
            (``"<kind> <id> not found"``, field ``<kind>_id``).
    """
    if principal.is_admin or principal.workspace_id == workspace_id:
        return
    shown = workspace_id if entity_id is None else entity_id
    raise NotFoundError(f"{kind} {shown} not found", field=f"{kind}_id")


def scope_filter(principal: Principal, workspace_id: str | None) -> str | None:
    """The workspace a listing is limited to: the asked one, or the run token's own.

    Raises:
        NotFoundError: a run token asking for another workspace.
    """
    if principal.is_admin:
        return workspace_id
    if workspace_id is not None:
        check_workspace(principal, workspace_id)
    return principal.workspace_id


async def load_workspace(service: Service, principal: Principal, workspace_id: str) -> Workspace:
    """The workspace, if the caller may reach it (else 404)."""
    check_workspace(principal, workspace_id)
    return await asyncio.to_thread(service.store.office.get_workspace, workspace_id)


async def load_project(service: Service, principal: Principal, project_id: str) -> Project:
    """The project, if the caller may reach it (else 404)."""
    project = await asyncio.to_thread(service.store.office.get_project, project_id)
    check_workspace(principal, project.workspace_id, kind="project", entity_id=project_id)
    return project


async def load_agent(service: Service, principal: Principal, agent_id: str) -> Agent:
    """The agent, if the caller may reach it (else 404)."""
    agent = await asyncio.to_thread(service.store.office.get_agent, agent_id)
    check_workspace(principal, agent.workspace_id, kind="agent", entity_id=agent_id)
    return agent


async def load_task(service: Service, principal: Principal, task_id: str) -> Task:
    """The task, if the caller may reach it (else 404)."""
    task = await asyncio.to_thread(service.store.office.get_task, task_id)
    check_workspace(principal, task.workspace_id, kind="task", entity_id=task_id)
    return task


async def load_run(service: Service, principal: Principal, run_id: int) -> Run:
    """The run, if the caller may reach it (else 404)."""
    run = await asyncio.to_thread(service.store.queue.get_run, run_id)
    check_workspace(principal, run.workspace_id, kind="run", entity_id=run_id)
    return run


async def load_wakeup(service: Service, principal: Principal, wakeup_id: int) -> WakeupRequest:
    """The wakeup request, if the caller may reach it (else 404)."""
    request = await asyncio.to_thread(service.store.queue.get_wakeup, wakeup_id)
    check_workspace(principal, request.workspace_id, kind="wakeup", entity_id=wakeup_id)
    return request
