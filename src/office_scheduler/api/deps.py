"""Request dependencies: the service, bearer authentication and workspace scoping.

Admin tokens reach everything. A run token may call only the operations of
:data:`office_scheduler.auth.RUN_TOKEN_SCOPES` (any other answers 403, checked here for
every authenticated route, before the route runs) and reaches only its own workspace: an
entity of any other workspace is reported exactly as a missing one (404), so ids of
other tenants never leak.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from office_scheduler.auth import (
    RUN_TOKEN_KEPT_FIELDS,
    AttemptOverError,
    Principal,
    changed_kept_fields,
    denial,
    field_denial,
    refused_fields,
)
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


#: Methods that only read: a stale attempt's read is refused but not logged.
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def authenticate(
    request: Request,
    service: ServiceDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller of this request, from ``Authorization: Bearer <token>``.

    A run token works only while its run attempt is live (see
    :func:`office_scheduler.auth.attempt_over`), even if its revocation was missed, and
    may call only the operations its scope table lists, with only the body fields its
    field table lists. A write with the token of an attempt that is over is recorded in
    the run's log (``stale_token_refused``), so a zombie session of an earlier attempt
    shows up there.

    Raises:
        AuthError: no bearer token, an unknown, revoked or expired one, or a run token
            whose attempt is over ("this run attempt is over") (401).
        ForbiddenError: a run token calling an operation outside its scope, or sending a
            body field :data:`office_scheduler.auth.RUN_TOKEN_FIELDS` does not list for
            it (403, ``field`` names it).
    """
    if credentials is None or not credentials.credentials:
        raise AuthError("missing bearer token")
    now = service.clock.now()
    try:
        principal = await service.tokens.authenticate_async(credentials.credentials, now=now)
    except AttemptOverError as stale:
        if request.method not in _READ_METHODS:
            await _record_stale_write(service, request, stale)
        raise
    operation = operation_of(request)
    if not principal.may(operation):
        raise ForbiddenError(denial(operation))
    if not principal.is_admin:
        sent = await _json_body(request)
        refused = refused_fields(operation, sent)
        if not refused and isinstance(sent, dict) and operation in RUN_TOKEN_KEPT_FIELDS:
            reference = await _kept_values(service, principal, request, sent)
            refused = changed_kept_fields(operation, sent, reference)
        if refused:
            raise ForbiddenError(field_denial(operation, refused[0]), field=refused[0])
    # Wakes this request causes are its run's (depth + 1) or a person's (depth 0).
    run_id = principal.token.run_id
    if principal.is_admin or run_id is None:
        causation.act_as_person()
    else:
        causation.act_as_run(run_id)
    return principal


async def _kept_values(
    service: Service, principal: Principal, request: Request, sent: dict[str, object]
) -> dict[str, object]:
    """The values a run token's task write may repeat: the task's, or its parent's.

    A task outside the token's workspace (or none) counts as one with no values, so the
    answer never depends on another tenant's data.
    """
    task_id = request.path_params.get("task_id") or sent.get("parent_id")
    if not isinstance(task_id, str):
        return {}
    try:
        task = await asyncio.to_thread(service.store.office.get_task, task_id)
    except NotFoundError:
        return {}
    if task.workspace_id != principal.workspace_id:
        return {}
    return {"executor": task.executor, "project_id": task.project_id}


async def _json_body(request: Request) -> object:
    """The request's JSON body as FastAPI parsed it (cached on the request), else ``None``."""
    if not await request.body():
        return None
    try:
        return await request.json()
    except ValueError:
        return None


async def _record_stale_write(service: Service, request: Request, stale: AttemptOverError) -> None:
    """Log a refused write of an over attempt's token in its run's event log."""
    operation = operation_of(request)
    data = {
        "attempt": stale.attempt,
        "current_attempt": stale.current_attempt,
        "run_status": stale.status.value,
        "method": request.method,
        "path": request.url.path,
        "operation": operation,
    }
    message = (
        f"refused {request.method} {request.url.path}: attempt {stale.attempt} is over "
        f"(the run is {stale.status.value} at attempt {stale.current_attempt})"
    )
    with contextlib.suppress(NotFoundError):  # the run was deleted meanwhile
        await asyncio.to_thread(
            service.store.runlog.add_run_event,
            stale.run_id,
            kind="stale_token_refused",
            message=message,
            data=data,
            now=service.clock.now(),
        )


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
