"""Office subscribers: turn task and approval events into wakes.

Sources (specification "Wakeup sources" and "Manual status changes"), one subscriber path
each so that no change wakes an agent twice:

* :class:`TaskCreated` / :class:`TaskAssigned` → ``task_assigned`` for the assignee;
* :class:`TaskMoved` → the kanban move rules (:meth:`OfficeSubscribers.on_task_moved`);
* :class:`TaskUpdated` → ``task_blockers_resolved`` when a blocker link was removed;
* :class:`TaskArchived` → like a move to ``DONE``: archiving is terminal in the
  specification, so archiving the last open blocker or child wakes the waiting agent;
* :class:`CommentAdded` → ``comment`` for the assignee (never for its own comment), and a
  ``user`` wake for each agent a person's comment @mentions (an agent's mentions wake
  nobody: agents mentioning each other must not wake each other in a loop);
* :class:`ApprovalResolved` → ``approval_resolved`` for the requesting agent.

Only Office tasks (project-linked, or on the workspace's office workflow) get autonomous
wakes; an ordinary kanban task with an assignee is ignored here.
"""

from __future__ import annotations

import asyncio

import structlog

from office_scheduler.domain.events import (
    ApprovalResolved,
    CommentAdded,
    TaskArchived,
    TaskAssigned,
    TaskCreated,
    TaskMoved,
    TaskUpdated,
)
from office_scheduler.domain.models import Approval, Task, WakeRequest
from office_scheduler.domain.status import ApprovalKind, AuthorKind, TaskState, WakeSource
from office_scheduler.events.bus import EventBus
from office_scheduler.events.mentions import mentioned
from office_scheduler.intake.service import Intake
from office_scheduler.store.approvals import RESOLVED_KEY_PREFIX
from office_scheduler.store.facade import Store

log = structlog.get_logger(__name__)


def _open(task: Task) -> bool:
    return task.is_office and not task.state.is_terminal and task.archived_at is None


def _wakeable(task: Task) -> bool:
    return _open(task) and task.assignee_agent_id is not None


def _stamp(task: Task) -> int:
    """Milliseconds of the task's last change: makes a key unique per change."""
    return int(task.updated_at.timestamp() * 1000)


class OfficeSubscribers:
    """Wake sources driven by task events: assignment, moves, comments, blockers, children."""

    def __init__(self, store: Store, intake: Intake) -> None:
        self._store = store
        self._intake = intake

    def register(self, bus: EventBus) -> None:
        """Subscribe every handler to ``bus``."""
        bus.subscribe(self.on_task_created, TaskCreated)
        bus.subscribe(self.on_task_assigned, TaskAssigned)
        bus.subscribe(self.on_task_moved, TaskMoved)
        bus.subscribe(self.on_task_updated, TaskUpdated)
        bus.subscribe(self.on_task_archived, TaskArchived)
        bus.subscribe(self.on_comment_added, CommentAdded)
        bus.subscribe(self.on_approval_resolved, ApprovalResolved)

    async def on_task_created(self, event: TaskCreated) -> None:
        """A new Office task (or subtask) created with an assignee → ``task_assigned``."""
        task = event.task
        if not _wakeable(task):
            return
        await self._wake_assignee(
            task, WakeSource.TASK_ASSIGNED, key=f"task_assigned:{task.id}:{task.assignee_agent_id}"
        )

    async def on_task_assigned(self, event: TaskAssigned) -> None:
        """The assignee of an open Office task was set or changed → ``task_assigned``."""
        if _wakeable(event.task):
            await self._wake_assignee(
                event.task, WakeSource.TASK_ASSIGNED, key=self._assigned_key(event.task)
            )

    async def on_task_moved(self, event: TaskMoved) -> None:
        """Apply the kanban move rules (specification "Manual status changes").

        * to ``IN_PROGRESS`` → ``task_assigned`` for the assignee; from ``IN_REVIEW`` it is
          a rejection instead: a ``comment`` wake whose payload carries
          ``rejection: {note, by}`` (and the ``comment_id`` of the note, when posted);
        * to ``IN_REVIEW`` → each reviewer of the task gets a ``task_assigned`` wake with
          payload ``{task_id, role: "reviewer"}``;
        * to ``DONE``/``CANCELLED`` → dependants whose last blocker this was get
          ``task_blockers_resolved``, and an assigned parent ``task_children_completed``.

        The agent that made the move is never woken by it. Moves of non-Office tasks wake
        nobody of their own (their Office dependants are still judged on their own).
        """
        before, after = event.before, event.after
        if after.state.is_terminal and not before.state.is_terminal:
            await self._resolve_dependants(after)
            return
        if not _open(after):
            return
        actor = event.actor_agent_id
        if after.state is TaskState.IN_REVIEW:
            for reviewer in after.reviewers:
                if reviewer != actor:
                    await self._wake_reviewer(after, reviewer)
            return
        if after.state is not TaskState.IN_PROGRESS or not _wakeable(after):
            return
        if actor is not None and actor == after.assignee_agent_id:
            return
        if before.state is TaskState.IN_REVIEW:
            await self._wake_rejected(after, event)
        else:
            await self._wake_assignee(
                after, WakeSource.TASK_ASSIGNED, key=self._assigned_key(after)
            )

    async def on_task_updated(self, event: TaskUpdated) -> None:
        """A removed blocker link may leave an assigned Office task with no open blocker."""
        before, after = event.before, event.after
        removed = set(before.blocked_by) - set(after.blocked_by)
        if removed and _wakeable(after):
            await self._wake_if_unblocked(after, cause=sorted(removed)[0])

    async def on_task_archived(self, event: TaskArchived) -> None:
        """Archiving an open task ends it for its dependants and its parent.

        A task archived after it reached ``DONE``/``CANCELLED`` already resolved them when it
        moved, so only an archive of an open task sends ``task_blockers_resolved`` /
        ``task_children_completed``.
        """
        if not event.task.state.is_terminal:
            await self._resolve_dependants(event.task)

    async def on_comment_added(self, event: CommentAdded) -> None:
        """A comment by anyone but the assignee on an Office task → ``comment`` wake.

        A person's comment also wakes every agent it @mentions (:meth:`_wake_mentioned`).
        """
        task, comment = event.task, event.comment
        by_assignee = comment.author_kind is AuthorKind.AGENT and (
            comment.author_agent_id == task.assignee_agent_id
        )
        if _wakeable(task) and not by_assignee:
            await self._wake_assignee(
                task, WakeSource.COMMENT, key=f"comment:{comment.id}", comment_id=comment.id
            )
        if comment.author_kind is not AuthorKind.AGENT:
            await self._wake_mentioned(event)

    async def _wake_mentioned(self, event: CommentAdded) -> None:
        """Wake each agent a person's comment @mentions (source ``user``).

        Payload ``{user_id, context: {task_id, comment_id}}``, key
        ``comment:<comment id>:<agent id>``, no coalescing hold (like any user wake).

        The wake is about the task (and joins the assignee's ``comment`` wake) when the
        mentioned agent is the task's assignee; otherwise it is taskless, since a wake about
        a task someone else holds would only be cancelled.
        """
        task, comment = event.task, event.comment
        if "@" not in comment.body:
            return
        agents = await asyncio.to_thread(self._store.office.list_agents, task.workspace_id)
        for agent in mentioned(comment.body, agents):
            await self._intake.enqueue(
                WakeRequest(
                    workspace_id=task.workspace_id,
                    agent_id=agent.id,
                    source=WakeSource.USER,
                    task_id=task.id if agent.id == task.assignee_agent_id else None,
                    payload={
                        "user_id": event.user_id,
                        "context": {"task_id": task.id, "comment_id": comment.id},
                    },
                    idempotency_key=f"comment:{comment.id}:{agent.id}",
                    hold=False,
                )
            )

    async def on_approval_resolved(self, event: ApprovalResolved) -> None:
        """A decided ``generic`` approval wakes the agent that asked (``approval_resolved``).

        Payload exactly ``{approval_id, status, decision_note}``; key
        ``approval_resolved:<approval_id>``. The wake is bound to the approval's task when
        that task is an open Office task assigned to the requester, taskless otherwise.
        A ``task_review`` approval wakes through its task's move instead.
        """
        approval = event.approval
        agent_id = approval.requested_by_agent_id
        if approval.kind is not ApprovalKind.GENERIC or agent_id is None:
            return
        task_id = await self._task_scope(approval, agent_id)
        await self._intake.enqueue(
            WakeRequest(
                workspace_id=approval.workspace_id,
                agent_id=agent_id,
                source=WakeSource.APPROVAL_RESOLVED,
                task_id=task_id,
                payload={
                    "approval_id": approval.id,
                    "status": approval.status.value,
                    "decision_note": approval.decision_note,
                },
                idempotency_key=f"{RESOLVED_KEY_PREFIX}{approval.id}",
            )
        )

    async def _task_scope(self, approval: Approval, agent_id: str) -> str | None:
        if approval.task_id is None:
            return None
        task = await asyncio.to_thread(self._store.office.find_task, approval.task_id)
        if task is None or not _wakeable(task) or task.assignee_agent_id != agent_id:
            return None
        return task.id

    @staticmethod
    def _assigned_key(task: Task) -> str:
        # Shared by the assignment and the move to IN_PROGRESS of one change, so a PATCH
        # that does both queues one wake.
        return f"task_assigned:{task.id}:{task.assignee_agent_id}:{_stamp(task)}"

    async def _wake_reviewer(self, task: Task, reviewer_id: str) -> None:
        await self._intake.enqueue(
            WakeRequest(
                workspace_id=task.workspace_id,
                agent_id=reviewer_id,
                source=WakeSource.TASK_ASSIGNED,
                task_id=task.id,
                payload={"task_id": task.id, "role": "reviewer"},
                idempotency_key=f"task_review:{task.id}:{reviewer_id}:{_stamp(task)}",
            )
        )

    async def _wake_rejected(self, task: Task, event: TaskMoved) -> None:
        rejection = {"note": event.note, "by": event.by}
        if event.comment_id is not None:
            await self._wake_assignee(
                task,
                WakeSource.COMMENT,
                key=f"comment:{event.comment_id}",
                comment_id=event.comment_id,
                rejection=rejection,
            )
            return
        await self._wake_assignee(
            task,
            WakeSource.COMMENT,
            key=f"task_rejected:{task.id}:{_stamp(task)}",
            rejection=rejection,
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

    async def _wake_if_unblocked(self, task: Task, *, cause: Task | str) -> None:
        """Send ``task_blockers_resolved`` when ``task`` has no open blocker left.

        ``cause`` is the blocker that ended (its change stamps the key) or the id of the
        blocker whose link was removed.
        """
        if await asyncio.to_thread(self._store.office.open_blocker_ids, task.id):
            return
        cause_key = (
            f"{cause}:{_stamp(task)}" if isinstance(cause, str) else f"{cause.id}:{_stamp(cause)}"
        )
        await self._wake_assignee(
            task,
            WakeSource.TASK_BLOCKERS_RESOLVED,
            key=f"task_blockers_resolved:{task.id}:{cause_key}",
            resolved_blocker_ids=list(task.blocked_by),
        )

    async def _resolve_dependants(self, finished: Task) -> None:
        """Wake the dependants ``finished`` unblocked and its parent's assignee.

        The parent gets a ``task_children_completed`` wake for every child that ends (key
        per child and change): wakes of children ending close together coalesce into one
        run, and the pipeline finishes such a run without a session (reason
        ``children_pending``) while any child is still open, so the parent's agent is
        launched only once all children have ended.
        """
        office = self._store.office
        dependants = await asyncio.to_thread(office.list_blocked_by, finished.id)
        for task in dependants:
            if _wakeable(task):
                await self._wake_if_unblocked(task, cause=finished)
        if finished.parent_id is None:
            return
        parent = await asyncio.to_thread(office.get_task, finished.parent_id)
        if not _wakeable(parent):
            return
        await self._wake_assignee(
            parent,
            WakeSource.TASK_CHILDREN_COMPLETED,
            key=f"task_children_completed:{parent.id}:{finished.id}:{_stamp(finished)}",
        )
