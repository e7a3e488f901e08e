"""Activity-log entries for task and comment events (docs/inbox-activity.md).

One entry per event, written after the change has committed:

* :class:`TaskCreated` → ``task_created`` (data ``state``, ``assignee_agent_id``);
* :class:`TaskMoved` → ``task_moved`` (data ``from``, ``to``, ``by``);
* :class:`TaskAssigned` → ``task_assigned`` (data ``from``, ``to``: agent ids);
* :class:`TaskArchived` → ``task_archived``;
* :class:`CommentAdded` → ``comment_added`` (data ``comment_id``, ``author``).

Approvals log themselves (``approval_requested`` when opened, ``approval_<status>`` when
decided, in :mod:`office_scheduler.office.approvals` and the approval store), so they
are not logged here. Every entry's ``task_id`` is the task and its ``agent_id`` the
task's assignee after the change (``None`` when unassigned).

A write that fails raises out of the handler; the bus logs it and carries on, so the
change itself (already committed) and the other subscribers are unaffected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from office_scheduler.clock import Clock
from office_scheduler.domain.events import (
    CommentAdded,
    Event,
    TaskArchived,
    TaskAssigned,
    TaskCreated,
    TaskMoved,
)
from office_scheduler.domain.models import Task
from office_scheduler.domain.status import AuthorKind
from office_scheduler.events.bus import EventBus
from office_scheduler.store.activity import SYSTEM_ACTOR, USER_ACTOR, agent_actor
from office_scheduler.store.facade import Store


def actor_of_event(event: Event, by: str | None = None) -> str:
    """The activity actor of an event: ``agent:<id>``, ``system`` or ``user``.

    ``by`` is the event's own account of who acted (:attr:`TaskMoved.by`,
    :attr:`TaskCreated.by`); the acting agent wins over it. Any ``by`` that names neither
    an agent nor the system (``user``, ``user:<name>``, a reviewer's name) is a person.
    """
    if event.actor_agent_id is not None:
        return agent_actor(event.actor_agent_id)
    if by is not None and by.startswith(("agent:", SYSTEM_ACTOR)):
        return by
    return USER_ACTOR


class ActivitySubscribers:
    """Writes the activity entries of task and comment events."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def register(self, bus: EventBus) -> None:
        """Subscribe every handler to ``bus``."""
        bus.subscribe(self.on_task_created, TaskCreated)
        bus.subscribe(self.on_task_moved, TaskMoved)
        bus.subscribe(self.on_task_assigned, TaskAssigned)
        bus.subscribe(self.on_task_archived, TaskArchived)
        bus.subscribe(self.on_comment_added, CommentAdded)

    async def on_task_created(self, event: TaskCreated) -> None:
        """Log ``task_created``."""
        task = event.task
        await self._add(
            task,
            kind="task_created",
            message=f"task created: {task.title}",
            actor=actor_of_event(event, event.by),
            data={"state": task.state.value, "assignee_agent_id": task.assignee_agent_id},
        )

    async def on_task_moved(self, event: TaskMoved) -> None:
        """Log ``task_moved`` with the states it moved between."""
        before, after = event.before, event.after
        await self._add(
            after,
            kind="task_moved",
            message=f"task moved from {before.state.value} to {after.state.value}: {after.title}",
            actor=actor_of_event(event, event.by),
            data={"from": before.state.value, "to": after.state.value, "by": event.by},
        )

    async def on_task_assigned(self, event: TaskAssigned) -> None:
        """Log ``task_assigned`` with the previous and the new assignee."""
        task = event.task
        await self._add(
            task,
            kind="task_assigned",
            message=f"task assigned: {task.title}",
            actor=actor_of_event(event),
            data={"from": event.previous_agent_id, "to": task.assignee_agent_id},
        )

    async def on_task_archived(self, event: TaskArchived) -> None:
        """Log ``task_archived``."""
        await self._add(
            event.task,
            kind="task_archived",
            message=f"task archived: {event.task.title}",
            actor=actor_of_event(event),
        )

    async def on_comment_added(self, event: CommentAdded) -> None:
        """Log ``comment_added``; the actor is the comment's author.

        ``author`` in the data is the actor, or for a chat message the external author's
        name as the integration sent it.
        """
        comment, task = event.comment, event.task
        if comment.author_kind is AuthorKind.AGENT and comment.author_agent_id is not None:
            actor = agent_actor(comment.author_agent_id)
        else:
            actor = USER_ACTOR
        await self._add(
            task,
            kind="comment_added",
            message=f"comment on task: {task.title}",
            actor=actor,
            data={"comment_id": comment.id, "author": comment.external_author or actor},
        )

    async def _add(
        self,
        task: Task,
        *,
        kind: str,
        message: str,
        actor: str,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        await asyncio.to_thread(
            self._store.runlog.add_activity,
            workspace_id=task.workspace_id,
            kind=kind,
            message=message,
            now=self._clock.now(),
            agent_id=task.assignee_agent_id,
            task_id=task.id,
            data=data,
            actor=actor,
        )
