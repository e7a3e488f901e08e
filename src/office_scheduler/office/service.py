"""Writes that other parts of the office react to (tasks, comments, blockers).

Each method commits its change, then publishes the matching event, so subscribers only
ever see committed state and can never roll the change back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.events import CommentAdded, RunEnded, TaskCreated, TaskUpdated
from office_scheduler.domain.models import Comment, Task
from office_scheduler.domain.status import AuthorKind, RunReason, TaskState, WorkflowKind
from office_scheduler.events.bus import EventBus
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)


class OfficeService:
    """Task and comment writes with their events."""

    def __init__(self, store: Store, clock: Clock, bus: EventBus) -> None:
        self._store = store
        self._clock = clock
        self._bus = bus

    async def create_task(
        self,
        *,
        workspace_id: str,
        title: str,
        description: str = "",
        project_id: str | None = None,
        parent_id: str | None = None,
        workflow: WorkflowKind = WorkflowKind.OFFICE,
        assignee_agent_id: str | None = None,
        state: TaskState = TaskState.TODO,
        requires_approval: bool = False,
        reviewers: Sequence[str] = (),
        approvers: Sequence[str] = (),
        executor: str | None = None,
        blocked_by: Sequence[str] = (),
        actor_agent_id: str | None = None,
    ) -> Task:
        """Create a task and publish :class:`TaskCreated`.

        Raises:
            NotFoundError: a referenced workspace, project, parent, agent or blocker is
                missing or belongs to another workspace (``field`` names it).
            InvalidInputError: e.g. an empty title.
        """
        task = await asyncio.to_thread(
            self._store.office.create_task,
            workspace_id=workspace_id,
            title=title,
            description=description,
            project_id=project_id,
            parent_id=parent_id,
            workflow=workflow,
            assignee_agent_id=assignee_agent_id,
            state=state,
            requires_approval=requires_approval,
            reviewers=tuple(reviewers),
            approvers=tuple(approvers),
            executor=executor,
            blocked_by=tuple(blocked_by),
            now=self._clock.now(),
        )
        await self._bus.publish(TaskCreated(task=task, actor_agent_id=actor_agent_id))
        return task

    async def update_task(
        self, task_id: str, changes: Mapping[str, Any], *, actor_agent_id: str | None = None
    ) -> Task:
        """Apply ``changes`` to a task and publish :class:`TaskUpdated` when anything changed.

        A new assignee cancels the previous assignee's scheduled retries of the task at once
        (reason ``retry_stale_assignee``) and clears its leftover checkout of the task.

        Raises:
            NotFoundError: no such task, or a referenced agent/project is missing.
            InvalidInputError: an unknown or invalid field (``field`` names it).
        """
        before, after = await asyncio.to_thread(
            self._store.office.update_task, task_id, now=self._clock.now(), changes=changes
        )
        if before.assignee_agent_id is not None and (
            after.assignee_agent_id != before.assignee_agent_id
        ):
            await self._cancel_retries_of(task_id, before.assignee_agent_id)
        if before != after:
            await self._bus.publish(
                TaskUpdated(before=before, after=after, actor_agent_id=actor_agent_id)
            )
        return after

    async def _cancel_retries_of(self, task_id: str, agent_id: str) -> None:
        now = self._clock.now()
        cancelled = await asyncio.to_thread(
            self._store.queue.cancel_pending_retries,
            task_id,
            agent_id=agent_id,
            reason=RunReason.RETRY_STALE_ASSIGNEE,
            now=now,
        )
        for run in cancelled:
            await asyncio.to_thread(
                self._store.runlog.add_run_event,
                run.id,
                kind="run_cancelled",
                message=RunReason.RETRY_STALE_ASSIGNEE.value,
                data={"reason": RunReason.RETRY_STALE_ASSIGNEE.value},
                now=now,
            )
            log.info("retry_cancelled", run_id=run.id, agent_id=agent_id, task_id=task_id)
            await self._bus.publish(RunEnded(run=run))

    async def archive_task(self, task_id: str, *, actor_agent_id: str | None = None) -> Task:
        """Archive a task (it stops counting as actionable) and publish :class:`TaskUpdated`."""
        before = await asyncio.to_thread(self._store.office.get_task, task_id)
        after = await asyncio.to_thread(
            self._store.office.archive_task, task_id, now=self._clock.now()
        )
        if before != after:
            await self._bus.publish(
                TaskUpdated(before=before, after=after, actor_agent_id=actor_agent_id)
            )
        return after

    async def add_blocker(
        self, task_id: str, blocker_task_id: str, *, actor_agent_id: str | None = None
    ) -> Task:
        """Make ``task_id`` wait for ``blocker_task_id``; publishes :class:`TaskUpdated`."""
        before = await asyncio.to_thread(self._store.office.get_task, task_id)
        after = await asyncio.to_thread(
            self._store.office.add_blocker, task_id, blocker_task_id, now=self._clock.now()
        )
        if before != after:
            await self._bus.publish(
                TaskUpdated(before=before, after=after, actor_agent_id=actor_agent_id)
            )
        return after

    async def remove_blocker(
        self, task_id: str, blocker_task_id: str, *, actor_agent_id: str | None = None
    ) -> Task:
        """Stop ``task_id`` waiting for ``blocker_task_id``; publishes :class:`TaskUpdated`.

        Removing the last open blocker of an assigned Office task wakes its assignee with
        ``task_blockers_resolved``, as if the blocker had ended.
        """
        before = await asyncio.to_thread(self._store.office.get_task, task_id)
        after = await asyncio.to_thread(self._store.office.remove_blocker, task_id, blocker_task_id)
        if before != after:
            await self._bus.publish(
                TaskUpdated(before=before, after=after, actor_agent_id=actor_agent_id)
            )
        return after

    async def add_comment(
        self,
        task_id: str,
        body: str,
        *,
        author_kind: AuthorKind = AuthorKind.USER,
        author_agent_id: str | None = None,
    ) -> Comment:
        """Post a comment and publish :class:`CommentAdded`.

        Raises:
            NotFoundError: no such task or author agent.
            InvalidInputError: an empty body.
        """
        comment = await asyncio.to_thread(
            self._store.office.add_comment,
            task_id=task_id,
            body=body,
            author_kind=author_kind,
            author_agent_id=author_agent_id,
            now=self._clock.now(),
        )
        task = await asyncio.to_thread(self._store.office.get_task, task_id)
        await self._bus.publish(
            CommentAdded(comment=comment, task=task, actor_agent_id=author_agent_id)
        )
        return comment
