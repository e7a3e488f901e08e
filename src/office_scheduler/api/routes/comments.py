"""Comments on tasks: people comment with admin tokens, agents with their run tokens."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from office_scheduler.api.deps import PrincipalDep, ServiceDep, load_task
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas import CommentIn
from office_scheduler.api.views import CommentOut, ListOut
from office_scheduler.domain.status import AuthorKind

router = APIRouter(tags=["comments"], responses=ERRORS)


@router.post("/tasks/{task_id}/comments", status_code=201)
async def add_comment(
    task_id: str, body: CommentIn, service: ServiceDep, principal: PrincipalDep
) -> CommentOut:
    """Post a comment; on an assigned Office task it wakes the assignee (unless it wrote it).

    A person's comment also wakes each agent it @mentions (by name); an agent's does not.
    """
    await load_task(service, principal, task_id)
    if principal.is_admin:
        kind, author = AuthorKind.USER, None
    else:
        kind, author = AuthorKind.AGENT, principal.agent_id
    comment = await service.office.add_comment(
        task_id,
        body.body,
        author_kind=kind,
        author_agent_id=author,
        user_id=principal.token.name if principal.is_admin else None,
    )
    return CommentOut.model_validate(comment)


@router.get("/tasks/{task_id}/comments")
async def list_comments(
    task_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[CommentOut]:
    """The task's comments, oldest first."""
    await load_task(service, principal, task_id)
    found = await asyncio.to_thread(service.store.office.list_comments, task_id)
    return ListOut(items=[CommentOut.model_validate(comment) for comment in found])
