"""Projects of a workspace (created and changed by admins)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    load_project,
    load_workspace,
    require_admin,
)
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas import ProjectCreate, ProjectPatch
from office_scheduler.api.views import ListOut, ProjectOut

router = APIRouter(tags=["projects"], responses=ERRORS)


@router.post("/workspaces/{workspace_id}/projects", status_code=201)
async def create_project(
    workspace_id: str, body: ProjectCreate, service: ServiceDep, principal: PrincipalDep
) -> ProjectOut:
    """Create a project (admin only)."""
    require_admin(principal)
    project = await asyncio.to_thread(
        service.store.office.create_project,
        workspace_id=workspace_id,
        name=body.name,
        now=service.clock.now(),
        description=body.description,
        directory=body.directory,
        executor=body.executor,
        repos=tuple(body.repos),
    )
    return ProjectOut.model_validate(project)


@router.get("/workspaces/{workspace_id}/projects")
async def list_projects(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[ProjectOut]:
    """The workspace's projects, by name."""
    await load_workspace(service, principal, workspace_id)
    found = await asyncio.to_thread(service.store.office.list_projects, workspace_id)
    return ListOut(items=[ProjectOut.model_validate(project) for project in found])


@router.get("/projects/{project_id}")
async def get_project(project_id: str, service: ServiceDep, principal: PrincipalDep) -> ProjectOut:
    """One project."""
    return ProjectOut.model_validate(await load_project(service, principal, project_id))


@router.patch("/projects/{project_id}")
async def update_project(
    project_id: str, body: ProjectPatch, service: ServiceDep, principal: PrincipalDep
) -> ProjectOut:
    """Change a project's description, directory, executor or repositories (admin only)."""
    require_admin(principal)
    changes = body.changes(nullable=ProjectPatch.NULLABLE)
    if "repos" in changes:
        changes["repos"] = tuple(changes["repos"])
    await load_project(service, principal, project_id)
    project = await asyncio.to_thread(
        service.store.office.update_project, project_id, now=service.clock.now(), **changes
    )
    return ProjectOut.model_validate(project)
