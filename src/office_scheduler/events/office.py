"""Office subscribers: turn task events into wakes (specification "Wakeup sources").

Only Office tasks (project-linked, or on the workspace's office workflow) get autonomous
wakes; an ordinary kanban task with an assignee is ignored here.
"""

from __future__ import annotations

import asyncio

import structlog

from office_scheduler.domain.events import CommentAdded, TaskCreated, TaskUpdated
from office_scheduler.domain.models import Task, WakeRequest
from office_scheduler.domain.status import AuthorKind, WakeSource
from office_scheduler.events.bus import EventBus
from office_scheduler.intake.service import Intake
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)


def _wakeable(task: Task) -> bool:
    return (
        task.is_office
        and task.assignee_agent_id is not None
        and not task.state.is_terminal
        and task.archived_at is None
    )


class OfficeSubscribers:
    """Wake sources driven by task events: assignment, comments, blockers, children."""

    def __init__(self, store: Store, intake: Intake) -> None:
        self._store = store
        self._intake = intake

    def register(self, bus: EventBus) -> None:
        """Subscribe every handler to ``bus``."""
        bus.subscribe(self.on_task_created, TaskCreated)
        bus.subscribe(self.on_task_updated, TaskUpdated)
        bus.subscribe(self.on_comment_added, CommentAdded)

    async def on_task_created(self, event: TaskCreated) -> None:
        """A new Office task (or subtask) created with an assignee → ``task_assigned``."""
        task = event.task
        if not _wakeable(task):
            return
        await self._wake_assignee(
            task, WakeSource.TASK_ASSIGNED, key=f"task_assigned:{task.id}:{task.assignee_agent_id}"
        )

    async def on_task_updated(self, event: TaskUpdated) -> None:
        """React to a task change.

        Assignee set or changed → ``task_assigned``; reaching a terminal state resolves
        blockers of other tasks and may complete the parent's children.
        """
        before, after = event.before, event.after
        if after.assignee_agent_id != before.assignee_agent_id and _wakeable(after):
            stamp = int(after.updated_at.timestamp() * 1000)
            await self._wake_assignee(
                after,
                WakeSource.TASK_ASSIGNED,
                key=f"task_assigned:{after.id}:{after.assignee_agent_id}:{stamp}",
            )
        if after.state.is_terminal and not before.state.is_terminal:
            await self._resolve_dependants(after)
        removed = set(before.blocked_by) - set(after.blocked_by)
        if removed and _wakeable(after):
            await self._wake_if_unblocked(after, cause=sorted(removed)[0])

    async def on_comment_added(self, event: CommentAdded) -> None:
        """A comment by anyone but the assignee on an Office task → ``comment`` wake."""
        task, comment = event.task, event.comment
        if not _wakeable(task):
            return
        if comment.author_kind is AuthorKind.AGENT and comment.author_agent_id == (
            task.assignee_agent_id
        ):
            return
        await self._wake_assignee(
            task, WakeSource.COMMENT, key=f"comment:{comment.id}", comment_id=comment.id
        )

    async def _wake_assignee(
        self, task: Task, source: WakeSource, *, key: str, **payload: object
    ) -> None:
        """Wake the task's assignee about the task; the payload always names the task."""
        assert task.assignee_agent_id is not None
        await self._intake.enqueue(
            WakeRequest(
                workspace_id=task.workspace_id,
                agent_id=task.assignee_agent_id,
                source=source,
                task_id=task.id,
                payload={"task_id": task.id, **payload},
                idempotency_key=key,
            )
        )

    async def _wake_if_unblocked(self, task: Task, *, cause: str) -> None:
        """Send ``task_blockers_resolved`` when ``task`` has no open blocker left."""
        if await asyncio.to_thread(self._store.office.open_blocker_ids, task.id):
            return
        await self._wake_assignee(
            task,
            WakeSource.TASK_BLOCKERS_RESOLVED,
            key=f"task_blockers_resolved:{task.id}:{cause}",
            resolved_blocker_ids=list(task.blocked_by),
        )

    async def _resolve_dependants(self, finished: Task) -> None:
        office = self._store.office
        dependants = await asyncio.to_thread(office.list_blocked_by, finished.id)
        for task in dependants:
            if _wakeable(task):
                await self._wake_if_unblocked(task, cause=finished.id)
        if finished.parent_id is None:
            return
        parent = await asyncio.to_thread(office.get_task, finished.parent_id)
        if not _wakeable(parent):
            return
        children = await asyncio.to_thread(office.list_children, parent.id)
        if all(child.state.is_terminal for child in children):
            await self._wake_assignee(
                parent,
                WakeSource.TASK_CHILDREN_COMPLETED,
                key=f"task_children_completed:{parent.id}:{finished.id}",
            )
