"""Channel messages: an inbound message from a chat integration becomes a task comment.

The comment is a person's (``author_kind`` ``user``) with ``channel`` and
``external_author`` set, posted through the normal comment path, so on an assigned Office
task it wakes the assignee (source ``comment``, key ``comment:<comment_id>``); on any
other task it wakes nobody. Integrations use an admin token; a run token gets 403 (before the
task is looked up, so it learns nothing about other workspaces' tasks).
"""

from __future__ import annotations

from fastapi import APIRouter

from office_scheduler.api.deps import PrincipalDep, ServiceDep, load_task, require_admin
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas import ChannelMessageIn
from office_scheduler.api.views import CommentOut
from office_scheduler.domain.status import AuthorKind

router = APIRouter(tags=["channels"], responses=ERRORS)


@router.post("/channels/{task_id}/messages", status_code=201)
async def post_channel_message(
    task_id: str, body: ChannelMessageIn, service: ServiceDep, principal: PrincipalDep
) -> CommentOut:
    """Post a chat message on the task's channel as a comment (admin only)."""
    task = await load_task(service, principal, task_id)
    require_admin(principal)
    comment = await service.office.add_comment(
        task.id,
        body.text,
        author_kind=AuthorKind.USER,
        channel=body.channel.strip(),
        external_author=body.author.strip(),
    )
    return CommentOut.model_validate(comment)
