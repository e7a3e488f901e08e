"""Tasks: create, list, read, change, blockers, archive, subtasks.

Writes go through :class:`~office_scheduler.office.service.OfficeService`, so the Office
subscribers see them (an assignment wakes the assignee); a run token's writes name its
agent as the actor.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from office_scheduler.api import gate
from office_scheduler.api.deps import (
    PrincipalDep,
    ServiceDep,
    check_workspace,
    load_task,
    load_workspace,
)
from office_scheduler.api.routes.common import ERRORS, Cursor, Limit, checked_cursor
from office_scheduler.api.schemas import BlockerIn, TaskCreate, TaskPatch
from office_scheduler.api.views import ListOut, TaskDetailOut, TaskOut
from office_scheduler.domain.models import Task
from office_scheduler.domain.status import TaskState, WorkflowKind
from office_scheduler.service import Service

router = APIRouter(tags=["tasks"], responses=ERRORS)

IdFilter = Annotated[str | None, Query(min_length=1, max_length=100)]


async def _detail(service: Service, task: Task) -> TaskDetailOut:
    office = service.store.office
    children = await asyncio.to_thread(office.list_children, task.id)
    comments = await asyncio.to_thread(office.list_comments, task.id)
    base = dict(TaskOut.model_validate(task))
    return TaskDetailOut(
        **base, children=[child.id for child in children], comments_count=len(comments)
    )


@router.post("/workspaces/{workspace_id}/tasks", status_code=201)
async def create_task(
    workspace_id: str, body: TaskCreate, service: ServiceDep, principal: PrincipalDep
) -> TaskDetailOut:
    """Create a task; an Office task created with an assignee wakes it (``task_assigned``)."""
    check_workspace(principal, workspace_id)
    task = await service.office.create_task(
        workspace_id=workspace_id,
        title=body.title,
        description=body.description,
        project_id=body.project_id,
        parent_id=body.parent_id,
        workflow=WorkflowKind(body.workflow),
        assignee_agent_id=body.assignee_agent_id,
        state=body.state,
        requires_approval=body.requires_approval,
        reviewers=body.reviewers,
        approvers=body.approvers,
        executor=body.executor,
        blocked_by=body.blocked_by,
        actor_agent_id=principal.agent_id,
    )
    return await _detail(service, task)


@router.get("/workspaces/{workspace_id}/tasks")
async def list_tasks(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    state: Annotated[TaskState | None, Query()] = None,
    assignee_agent_id: IdFilter = None,
    parent_id: IdFilter = None,
    project_id: IdFilter = None,
    include_archived: bool = False,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> ListOut[TaskOut]:
    """The workspace's tasks, oldest first, filtered."""
    await load_workspace(service, principal, workspace_id)
    page = await asyncio.to_thread(
        service.store.office.list_tasks,
        workspace_id,
        state=state,
        assignee_agent_id=assignee_agent_id,
        parent_id=parent_id,
        project_id=project_id,
        include_archived=include_archived,
        limit=limit,
        cursor=checked_cursor(cursor, (datetime, str)),
    )
    return ListOut(
        items=[TaskOut.model_validate(task) for task in page.items], next_cursor=page.next_cursor
    )


@router.get("/tasks/{task_id}")
async def get_task(task_id: str, service: ServiceDep, principal: PrincipalDep) -> TaskDetailOut:
    """One task with its blockers, subtask ids and comment count."""
    return await _detail(service, await load_task(service, principal, task_id))


@router.patch("/tasks/{task_id}")
async def update_task(
    task_id: str, body: TaskPatch, service: ServiceDep, principal: PrincipalDep
) -> TaskDetailOut:
    """Change a task (``assignee_agent_id: null`` unassigns; a new assignee is woken)."""
    changes = body.changes(nullable=TaskPatch.NULLABLE)
    current = await load_task(service, principal, task_id)
    await gate.check_finish(service, principal, current, changes.get("state"))
    task = await service.office.update_task(task_id, changes, actor_agent_id=principal.agent_id)
    return await _detail(service, task)


@router.post("/tasks/{task_id}/blockers")
async def add_blocker(
    task_id: str, body: BlockerIn, service: ServiceDep, principal: PrincipalDep
) -> TaskDetailOut:
    """Make the task wait for another task of its workspace."""
    await load_task(service, principal, task_id)
    task = await service.office.add_blocker(
        task_id, body.blocker_task_id, actor_agent_id=principal.agent_id
    )
    return await _detail(service, task)


@router.delete("/tasks/{task_id}/blockers/{blocker_id}")
async def remove_blocker(
    task_id: str, blocker_id: str, service: ServiceDep, principal: PrincipalDep
) -> TaskDetailOut:
    """Remove a blocker link (idempotent); a run token may not remove one awaiting approval."""
    await load_task(service, principal, task_id)
    await gate.check_unblock(service, principal, blocker_id)
    task = await service.office.remove_blocker(
        task_id, blocker_id, actor_agent_id=principal.agent_id
    )
    return await _detail(service, task)


@router.post("/tasks/{task_id}/archive")
async def archive_task(task_id: str, service: ServiceDep, principal: PrincipalDep) -> TaskDetailOut:
    """Archive the task (idempotent); it no longer counts as actionable.

    A run token may not archive a task awaiting approval (409, see
    :mod:`office_scheduler.api.gate`).
    """
    await gate.check_archive(service, principal, await load_task(service, principal, task_id))
    task = await service.office.archive_task(task_id, actor_agent_id=principal.agent_id)
    return await _detail(service, task)


@router.get("/tasks/{task_id}/subtasks")
async def list_subtasks(
    task_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[TaskOut]:
    """The task's subtasks (archived ones included), oldest first."""
    await load_task(service, principal, task_id)
    children = await asyncio.to_thread(service.store.office.list_children, task_id)
    return ListOut(items=[TaskOut.model_validate(child) for child in children])
