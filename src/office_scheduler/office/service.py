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
from office_scheduler.domain.errors import ForbiddenError
from office_scheduler.domain.events import (
    CommentAdded,
    RunEnded,
    TaskArchived,
    TaskAssigned,
    TaskCreated,
    TaskMoved,
    TaskUpdated,
)
from office_scheduler.domain.models import Comment, Task
from office_scheduler.domain.status import AuthorKind, RunReason, TaskState, WorkflowKind
from office_scheduler.events.bus import EventBus
from office_scheduler.office.approvals import ApprovalService
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)


def actor_name(actor_agent_id: str | None) -> str:
    """How a change's author is named in events and the activity log (``agent:<id>``/``user``)."""
    return "user" if actor_agent_id is None else f"agent:{actor_agent_id}"


#: Task fields that set up the review gate; agents may not change them.
REVIEW_SETTINGS = ("requires_approval", "reviewers", "approvers")


def _marks_done(changes: Mapping[str, Any]) -> bool:
    return "state" in changes and changes["state"] == TaskState.DONE.value


class OfficeService:
    """Task and comment writes with their events.

    Attributes:
        approvals: the approval operations (request, approve, reject); they move
            ``task_review`` tasks through this service.
    """

    def __init__(self, store: Store, clock: Clock, bus: EventBus) -> None:
        self._store = store
        self._clock = clock
        self._bus = bus
        self.approvals = ApprovalService(store, clock, bus, self)

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
            ForbiddenError: an agent created a ``requires_approval`` task already ``DONE``
                (only a person's review finishes such a task; field ``state``).
        """
        if actor_agent_id is not None and requires_approval and state is TaskState.DONE:
            raise ForbiddenError(
                "agents cannot create a requires_approval task already DONE: create it open"
                " and mark it done, which sends it to review",
                field="state",
            )
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
        """Apply ``changes`` to a task and publish its events when anything changed.

        Events: :class:`TaskUpdated` always, :class:`TaskAssigned` when a new assignee was
        set, :class:`TaskMoved` when the state changed. A new assignee cancels the previous
        assignee's scheduled retries of the task at once (reason ``retry_stale_assignee``)
        and clears its leftover checkout of the task.

        The approval gate (specification "Subtask sequencing via blockers"): agents
        never settle a review, only people do. When any agent (``actor_agent_id``, its
        assignee or not) marks a ``requires_approval`` task ``DONE``, the task goes to
        ``IN_REVIEW`` instead, with a pending ``task_review`` approval and a ``task.review``
        inbox item; a person's approval later moves it to ``DONE``. An agent may not change
        ``requires_approval``, ``reviewers`` or ``approvers``, nor change the state of a task
        whose review is pending (no leaving ``IN_REVIEW``, no cancelling).

        Raises:
            NotFoundError: no such task, or a referenced agent/project is missing.
            InvalidInputError: an unknown or invalid field (``field`` names it).
            ForbiddenError: an agent broke one of the review rules above (403; ``field``
                names the key).
        """
        if actor_agent_id is not None:
            current = await self._check_agent_change(task_id, changes)
            if (
                _marks_done(changes)
                and current.requires_approval
                and current.state is not TaskState.DONE
            ):
                rest = {key: value for key, value in changes.items() if key != "state"}
                if rest:
                    await self.update_task(task_id, rest, actor_agent_id=actor_agent_id)
                return await self.approvals.submit_task_review(task_id, agent_id=actor_agent_id)
        before, after = await asyncio.to_thread(
            self._store.office.update_task, task_id, now=self._clock.now(), changes=changes
        )
        if before.assignee_agent_id is not None and (
            after.assignee_agent_id != before.assignee_agent_id
        ):
            await self._cancel_retries_of(task_id, before.assignee_agent_id)
        await self.announce(before, after, actor_agent_id=actor_agent_id)
        return after

    async def _check_agent_change(self, task_id: str, changes: Mapping[str, Any]) -> Task:
        """Refuse the changes an agent may not make to a task (see :meth:`update_task`).

        Returns:
            The task as it is now.

        Raises:
            NotFoundError: no such task.
            ForbiddenError: a review setting, or a state change under a pending review.
        """
        for key in REVIEW_SETTINGS:
            if key in changes:
                raise ForbiddenError(
                    f"agents may not change {key}; only people set up reviews", field=key
                )
        current = await asyncio.to_thread(self._store.office.get_task, task_id)
        gated = _marks_done(changes) and current.requires_approval
        if "state" in changes and changes["state"] != current.state.value and not gated:
            pending = await asyncio.to_thread(self._store.approvals.pending_task_reviews, task_id)
            if pending:
                raise ForbiddenError(
                    f"task {task_id} has a pending review ({pending[0].id}); only a person "
                    "can approve, reject or move it",
                    field="state",
                )
        return current

    async def move_task(
        self,
        task_id: str,
        state: TaskState,
        *,
        by: str,
        note: str = "",
        comment_id: str | None = None,
    ) -> Task:
        """Move a task to ``state`` on behalf of ``by`` (an approval decision) and announce it.

        No approval gate applies: this is how a person's decision lands.

        Raises:
            NotFoundError: no such task (field ``task_id``).
        """
        before, after = await asyncio.to_thread(
            self._store.office.update_task,
            task_id,
            now=self._clock.now(),
            changes={"state": state.value},
        )
        await self.announce(before, after, by=by, note=note, comment_id=comment_id)
        return after

    async def announce(
        self,
        before: Task,
        after: Task,
        *,
        actor_agent_id: str | None = None,
        by: str | None = None,
        note: str = "",
        comment_id: str | None = None,
    ) -> None:
        """Publish the events of a committed task change (nothing when nothing changed).

        Args:
            before: the task before the change.
            after: the task after it.
            actor_agent_id: the agent that made the change, if an agent did.
            by: who made it, for :class:`TaskMoved`; default :func:`actor_name`.
            note: why it moved (a rejection note).
            comment_id: the comment carrying ``note``.
        """
        if before == after:
            return
        await self._bus.publish(
            TaskUpdated(before=before, after=after, actor_agent_id=actor_agent_id)
        )
        if after.assignee_agent_id is not None and after.assignee_agent_id != (
            before.assignee_agent_id
        ):
            await self._bus.publish(
                TaskAssigned(
                    task=after,
                    previous_agent_id=before.assignee_agent_id,
                    actor_agent_id=actor_agent_id,
                )
            )
        if after.state is not before.state:
            await self._bus.publish(
                TaskMoved(
                    before=before,
                    after=after,
                    by=by or actor_name(actor_agent_id),
                    note=note,
                    comment_id=comment_id,
                    actor_agent_id=actor_agent_id,
                )
            )
        if after.archived_at is not None and before.archived_at is None:
            await self._bus.publish(TaskArchived(task=after, actor_agent_id=actor_agent_id))

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
            await asyncio.to_thread(self._store.runlog.log_run_skip, run, now=now)
            log.info("retry_cancelled", run_id=run.id, agent_id=agent_id, task_id=task_id)
            await self._bus.publish(RunEnded(run=run))

    async def archive_task(self, task_id: str, *, actor_agent_id: str | None = None) -> Task:
        """Archive a task (it stops counting as actionable); publishes :class:`TaskArchived`."""
        before = await asyncio.to_thread(self._store.office.get_task, task_id)
        after = await asyncio.to_thread(
            self._store.office.archive_task, task_id, now=self._clock.now()
        )
        await self.announce(before, after, actor_agent_id=actor_agent_id)
        return after

    async def add_blocker(
        self, task_id: str, blocker_task_id: str, *, actor_agent_id: str | None = None
    ) -> Task:
        """Make ``task_id`` wait for ``blocker_task_id``; publishes :class:`TaskUpdated`."""
        before = await asyncio.to_thread(self._store.office.get_task, task_id)
        after = await asyncio.to_thread(
            self._store.office.add_blocker, task_id, blocker_task_id, now=self._clock.now()
        )
        await self.announce(before, after, actor_agent_id=actor_agent_id)
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
        await self.announce(before, after, actor_agent_id=actor_agent_id)
        return after

    async def add_comment(
        self,
        task_id: str,
        body: str,
        *,
        author_kind: AuthorKind = AuthorKind.USER,
        author_agent_id: str | None = None,
        channel: str | None = None,
        external_author: str | None = None,
        user_id: str | None = None,
    ) -> Comment:
        """Post a comment and publish :class:`CommentAdded`.

        ``channel``/``external_author`` mark a message from a chat integration.
        ``user_id`` names the person who wrote a ``user`` comment (the admin token's name);
        a chat message's author when not given. Agents it @mentions are woken with it.

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
            channel=channel,
            external_author=external_author,
        )
        task = await asyncio.to_thread(self._store.office.get_task, task_id)
        if author_kind is AuthorKind.USER and user_id is None:
            user_id = external_author
        await self._bus.publish(
            CommentAdded(
                comment=comment, task=task, actor_agent_id=author_agent_id, user_id=user_id
            )
        )
        return comment
