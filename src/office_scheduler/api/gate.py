"""The approval gate around a task awaiting a person's review, for run tokens.

A task with a pending ``task_review`` approval is *gated*: only a person settles it (the
task service refuses an agent's state change of the task itself). The gate also holds the
tasks that wait for it, so an agent cannot walk around it: with a run token it may not
archive the gated task, remove it as another task's blocker, or finish (``DONE``,
``CANCELLED``) a task it blocks or a subtask of it. Each answers 409 naming the gated task
and its approval. People (admin tokens) may do all of it.
"""

from __future__ import annotations

import asyncio

from office_scheduler.auth import Principal
from office_scheduler.domain.errors import ConflictError
from office_scheduler.domain.models import Task
from office_scheduler.domain.status import TaskState
from office_scheduler.service import Service


async def _pending_review(service: Service, task_id: str) -> str | None:
    """The id of ``task_id``'s pending review approval, if it awaits one."""
    pending = await asyncio.to_thread(service.store.approvals.pending_task_reviews, task_id)
    return pending[0].id if pending else None


def _refusal(gated_id: str, approval_id: str, what: str, *, field: str) -> ConflictError:
    return ConflictError(
        f"task {gated_id} awaits approval {approval_id}: {what} would pass its approval gate;"
        " only a person can do that before the approval is decided",
        field=field,
    )


async def check_archive(service: Service, principal: Principal, task: Task) -> None:
    """Refuse a run token archiving a task that awaits approval.

    Raises:
        ConflictError: the task is gated (409, field ``task_id``).
    """
    if principal.is_admin:
        return
    approval = await _pending_review(service, task.id)
    if approval is not None:
        raise _refusal(task.id, approval, "archiving it", field="task_id")


async def check_unblock(service: Service, principal: Principal, blocker_id: str) -> None:
    """Refuse a run token removing a blocker that awaits approval.

    Raises:
        ConflictError: the blocker is gated (409, field ``blocker_id``).
    """
    if principal.is_admin:
        return
    approval = await _pending_review(service, blocker_id)
    if approval is not None:
        raise _refusal(blocker_id, approval, "removing it as a blocker", field="blocker_id")


async def check_finish(
    service: Service, principal: Principal, task: Task, state: object | None
) -> None:
    """Refuse a run token finishing a task that a gated task blocks or parents.

    Args:
        service: the service (its approvals store).
        principal: the caller.
        task: the task as it is now.
        state: the state the change asks for (``None``: no state change).

    Raises:
        ConflictError: a blocker or the parent awaits approval (409, field ``state``).
    """
    if principal.is_admin or state is None or not TaskState(str(state)).is_terminal:
        return
    gates = [*task.blocked_by, *([task.parent_id] if task.parent_id else [])]
    for gated_id in gates:
        approval = await _pending_review(service, gated_id)
        if approval is not None:
            raise _refusal(gated_id, approval, f"finishing task {task.id}", field="state")
