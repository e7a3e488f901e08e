"""Board: Office tasks in columns by state; moving a card is the API's task update.

A drag (or the move form of the task page) calls
:meth:`OfficeService.update_task` exactly as ``PATCH /api/v1/tasks/{id}`` does for an
admin token, so the same events fire and the same agents are woken.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Form, Request
from starlette.responses import Response

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.status import AuthorKind, TaskState
from office_scheduler.web.pages.common import PAGE_SIZE, back, page_router, show
from office_scheduler.web.params import choice, scope_of, text
from office_scheduler.web.session import SameOriginDep, SessionDep, service_of
from office_scheduler.web.sources import dashboard_store

router = page_router()

#: Cards shown per column (the column header shows the full count).
CARDS_PER_COLUMN = PAGE_SIZE


@router.get("/board")
async def board(request: Request, _: SessionDep) -> Response:
    """The board of the workspace's Office tasks."""
    service = service_of(request)
    scope = await scope_of(request, service)
    columns = await asyncio.to_thread(
        dashboard_store(service).board, scope.workspace.id, per_column=CARDS_PER_COLUMN
    )
    return show(request, "board.html", scope, section="board", columns=columns)


@router.post("/tasks/{task_id}/move", dependencies=[SameOriginDep])
async def move_task(
    request: Request,
    task_id: str,
    _: SessionDep,
    state: Annotated[str, Form(max_length=40)] = "",
    back_to: Annotated[str, Form(max_length=200)] = "/board",
) -> Response:
    """Move a task to another state (the API's admin ``PATCH``; wakes as it would)."""
    service = service_of(request)
    target = choice(TaskState, state, field="state")
    if target is None:
        return back("/board", error="state is required")
    task = await asyncio.to_thread(service.store.office.get_task, task_id)
    await service.office.update_task(task.id, {"state": target.value})
    where = back_to if back_to in ("/board", f"/tasks/{task.id}") else "/board"
    return back(where, notice=f"Moved “{task.title}” to {target.value}")


@router.get("/tasks/{task_id}")
async def task_detail(request: Request, task_id: str, _: SessionDep) -> Response:
    """A task with its comments, blockers, subtasks, approvals and runs."""
    service = service_of(request)
    scope = await scope_of(request, service)
    office = service.store.office
    task = await asyncio.to_thread(office.get_task, task_id)
    if task.workspace_id != scope.workspace.id:
        raise NotFoundError(f"task {task_id} not found in this workspace", field="task_id")
    comments, children, blockers, runs, approvals = await asyncio.gather(
        asyncio.to_thread(office.list_comments, task.id),
        asyncio.to_thread(office.list_children, task.id),
        asyncio.gather(*(asyncio.to_thread(office.find_task, b) for b in task.blocked_by)),
        asyncio.to_thread(service.store.listing.list_runs, task_id=task.id, limit=PAGE_SIZE),
        asyncio.to_thread(dashboard_store(service).task_approvals, task.id, limit=PAGE_SIZE),
    )
    return show(
        request,
        "task.html",
        scope,
        section="board",
        task=task,
        comments=comments,
        children=children,
        blockers=[blocker for blocker in blockers if blocker is not None],
        runs=runs.items,
        approvals=approvals,
        states=list(TaskState),
    )


@router.post("/tasks/{task_id}/comments", dependencies=[SameOriginDep])
async def add_comment(
    request: Request,
    task_id: str,
    principal: SessionDep,
    body: Annotated[str, Form(max_length=20_000)] = "",
) -> Response:
    """Comment as a person, as the API does.

    It wakes the assignee of an Office task and the agents it @mentions.
    """
    service = service_of(request)
    message = text(body, field="body", required=True)
    await service.office.add_comment(
        task_id, message, author_kind=AuthorKind.USER, user_id=principal.token.name
    )
    return back(f"/tasks/{task_id}", notice="Comment added")
