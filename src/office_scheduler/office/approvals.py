"""Approvals: agents ask, people decide (specification "Wakeup sources": ``approval_resolved``).

Two kinds share one lifecycle (``pending`` → ``approved`` | ``rejected``, decided once):

* ``generic`` — an agent asks a person for a decision (``office approval request``); the
  decision wakes the requesting agent with ``approval_resolved``.
* ``task_review`` — opened when the assignee of a ``requires_approval`` task marks it done
  (specification "Subtask sequencing via blockers"): the task waits in ``IN_REVIEW``.
  Approving moves it to ``DONE`` (which resolves its dependants' blockers); rejecting moves
  it back to ``IN_PROGRESS`` with a comment holding the note, and the assignee gets a
  ``comment`` wake carrying the rejection. The task move is the wake path for this kind.

Every pending approval has an inbox item (``approval.requested`` or ``task.review``) that
the decision resolves. A decision commits in one transaction with its inbox resolution,
activity entry and (``task_review``) task move and rejection comment; its events are
published afterwards. The ``approval_resolved`` wake (key ``approval_resolved:<id>``) is
re-driven by :func:`redrive_wakes` should the process die between the two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import ConflictError
from office_scheduler.domain.events import (
    ApprovalRequested,
    ApprovalResolved,
    CommentAdded,
    Event,
    TaskMoved,
)
from office_scheduler.domain.models import Approval, Task
from office_scheduler.domain.status import (
    ApprovalKind,
    ApprovalStatus,
    InboxKind,
    TaskState,
)
from office_scheduler.events.bus import EventBus
from office_scheduler.store.approvals import REDRIVE_WINDOW
from office_scheduler.store.facade import Store

if TYPE_CHECKING:
    from office_scheduler.office.service import OfficeService

log = structlog.get_logger(__name__)

Publish = Callable[[Event], Awaitable[None]]

_INBOX_KIND = {
    ApprovalKind.GENERIC: InboxKind.APPROVAL_REQUESTED,
    ApprovalKind.TASK_REVIEW: InboxKind.TASK_REVIEW,
}


def _requester(approval: Approval) -> str:
    agent = approval.requested_by_agent_id
    return "user" if agent is None else f"agent:{agent}"


class ApprovalService:
    """Request, approve and reject approvals; the task gate of ``requires_approval`` tasks.

    Args:
        store: the database.
        clock: time source (UTC instants).
        bus: where :class:`ApprovalRequested` / :class:`ApprovalResolved` are published.
        office: the task writes (a decision on a ``task_review`` approval moves its task).
    """

    def __init__(self, store: Store, clock: Clock, bus: EventBus, office: OfficeService) -> None:
        self._store = store
        self._clock = clock
        self._bus = bus
        self._office = office

    async def request(
        self,
        *,
        workspace_id: str,
        title: str,
        body: str = "",
        task_id: str | None = None,
        requested_by_agent_id: str | None = None,
        actor: str | None = None,
    ) -> Approval:
        """Open a ``generic`` approval with its ``approval.requested`` inbox item.

        ``actor`` is who asked (``user`` for a person asking on an agent's behalf,
        ``agent:<id>``); by default the requesting agent, else ``user``.

        Raises:
            InvalidInputError: a blank title (field ``title``).
            NotFoundError: the workspace, task or agent is missing (``field`` names it).
        """
        approval = await asyncio.to_thread(
            self._store.approvals.create,
            workspace_id=workspace_id,
            title=title,
            body=body,
            task_id=task_id,
            requested_by_agent_id=requested_by_agent_id,
            now=self._clock.now(),
        )
        await self._opened(approval, actor=actor)
        return approval

    async def submit_task_review(self, task_id: str, *, agent_id: str) -> Task:
        """Put the task its assignee just finished in review (the ``requires_approval`` gate).

        The task moves to ``IN_REVIEW`` (reviewers are woken by the move rules) with one
        pending ``task_review`` approval; finishing it again while that approval is pending
        opens no second one.

        Returns:
            The task, now ``IN_REVIEW``.

        Raises:
            NotFoundError: no such task (field ``task_id``).
        """
        before, after, approval, created = await asyncio.to_thread(
            self._store.approvals.open_task_review,
            task_id,
            agent_id=agent_id,
            now=self._clock.now(),
        )
        await self._office.announce(before, after, actor_agent_id=agent_id)
        if created:
            await self._opened(approval)
        return after

    async def approve(
        self, approval_id: str, *, decided_by: str, decision_note: str | None = None
    ) -> Approval:
        """Approve a pending approval (a ``task_review`` task moves to ``DONE``).

        Raises:
            NotFoundError: no such approval (field ``approval_id``).
            ConflictError: it was already decided (409).
        """
        return await self._decide(approval_id, ApprovalStatus.APPROVED, decided_by, decision_note)

    async def reject(
        self, approval_id: str, *, decided_by: str, decision_note: str | None = None
    ) -> Approval:
        """Reject a pending approval (a ``task_review`` task goes back to ``IN_PROGRESS``).

        Raises:
            NotFoundError: no such approval (field ``approval_id``).
            ConflictError: it was already decided (409).
        """
        return await self._decide(approval_id, ApprovalStatus.REJECTED, decided_by, decision_note)

    def register(self, bus: EventBus) -> None:
        """Subscribe the review bookkeeping to ``bus``."""
        bus.subscribe(self.on_task_moved, TaskMoved)

    async def on_task_moved(self, event: TaskMoved) -> None:
        """Close the pending review of a task a person moved out of ``IN_REVIEW`` by hand.

        A move to ``DONE`` settles it as approved, any other move as rejected, decided by
        whoever moved the task; the task itself is not moved again. Decisions made through
        :meth:`approve`/:meth:`reject` resolve the approval before they move the task, so
        they find nothing pending here.
        """
        before, after = event.before, event.after
        if event.actor_agent_id is not None:
            return  # agents never settle a review (their moves out of review are refused)
        if before.state is not TaskState.IN_REVIEW or after.state is TaskState.IN_REVIEW:
            return
        pending = await asyncio.to_thread(self._store.approvals.pending_task_reviews, after.id)
        status = (
            ApprovalStatus.APPROVED if after.state is TaskState.DONE else ApprovalStatus.REJECTED
        )
        note = f"task moved from IN_REVIEW to {after.state.value} outside the review"
        for approval in pending:
            try:
                await self._decide(approval.id, status, event.by, note, land=False)
            except ConflictError:
                continue  # decided concurrently by a person: that decision stands

    async def _opened(self, approval: Approval, *, actor: str | None = None) -> None:
        now = self._clock.now()
        await asyncio.to_thread(
            self._store.runlog.add_inbox_item,
            workspace_id=approval.workspace_id,
            kind=_INBOX_KIND[approval.kind],
            title=approval.title,
            body=approval.body,
            data={"approval_id": approval.id, "kind": approval.kind.value},
            now=now,
            agent_id=approval.requested_by_agent_id,
            task_id=approval.task_id,
            approval_id=approval.id,
            dedupe_key=f"approval:{approval.id}",
        )
        await asyncio.to_thread(
            self._store.runlog.add_activity,
            workspace_id=approval.workspace_id,
            kind="approval_requested",
            message=f"approval requested: {approval.title}",
            now=now,
            agent_id=approval.requested_by_agent_id,
            task_id=approval.task_id,
            data={"approval_id": approval.id, "kind": approval.kind.value},
            actor=actor or _requester(approval),
        )
        log.info("approval_requested", approval_id=approval.id, kind=approval.kind.value)
        await self._bus.publish(
            ApprovalRequested(approval=approval, actor_agent_id=approval.requested_by_agent_id)
        )

    async def redrive(self, now: datetime) -> int:
        """Re-deliver the ``approval_resolved`` wakes a crash lost (see :func:`redrive_wakes`)."""
        return await redrive_wakes(self._store, self._bus.publish, now)

    async def _decide(
        self,
        approval_id: str,
        status: ApprovalStatus,
        decided_by: str,
        note: str | None,
        *,
        land: bool = True,
    ) -> Approval:
        decision = await asyncio.to_thread(
            self._store.approvals.resolve,
            approval_id,
            status=status,
            decided_by=decided_by,
            decision_note=note,
            now=self._clock.now(),
            land=land,
        )
        approval = decision.approval
        log.info("approval_resolved", approval_id=approval.id, status=status.value)
        if decision.before is not None and decision.after is not None:
            # The move's ``comment`` wake (key ``comment:<id>``) carries a rejection; the
            # comment event below then finds its key taken and wakes nobody a second time.
            comment_id = None if decision.comment is None else decision.comment.id
            await self._office.announce(
                decision.before,
                decision.after,
                by=decided_by,
                note=note or "",
                comment_id=comment_id,
            )
            if decision.comment is not None:
                await self._bus.publish(CommentAdded(comment=decision.comment, task=decision.after))
        await self._bus.publish(ApprovalResolved(approval=approval))
        return approval


async def redrive_wakes(store: Store, publish: Publish, now: datetime) -> int:
    """Publish :class:`ApprovalResolved` again for decisions whose wake never got queued.

    A crash between a decision's commit and its ``approval_resolved`` wake would leave the
    requesting agent waiting forever (deciding again answers 409). This finds the decided
    ``generic`` approvals of the last :data:`REDRIVE_WINDOW` whose requester has no wakeup
    request keyed ``approval_resolved:<approval_id>`` and publishes the event again; the
    subscriber's key makes a late original and the re-drive one wake. Called by
    ``Service.start`` and every maintenance pass.

    Args:
        store: the database.
        publish: the event bus's ``publish``.
        now: the current instant (UTC).

    Returns:
        How many decisions were re-driven.
    """
    lost = await asyncio.to_thread(
        store.approvals.undelivered_decisions, since=now - REDRIVE_WINDOW
    )
    for approval in lost:
        log.warning("approval_wake_redriven", approval_id=approval.id)
        await publish(ApprovalResolved(approval=approval))
    return len(lost)
