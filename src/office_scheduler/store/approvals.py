"""Approvals: decisions people make for agents, and the review gate of finished tasks.

Every public method is one transaction. An approval starts ``pending`` and is resolved
once (``approved`` or ``rejected``); resolving it also resolves its open inbox items.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Approval, Task
from office_scheduler.domain.status import ApprovalKind, ApprovalStatus, InboxStatus, TaskState
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.office_common import get_task_in, require_in_workspace, workspace_row
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import approval_from_row
from office_scheduler.store.schema import agents, approvals, inbox_items, tasks
from office_scheduler.store.sql import all_rows, first_row
from office_scheduler.store.validation import clean_text, enum_value

#: Longest approval title (the column's width).
MAX_TITLE = 500

DECISIONS = (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED)


def _approval_key(approval: Approval) -> tuple[datetime, str]:
    return (approval.created_at, approval.id)


def _find(conn: Connection, approval_id: str) -> Approval | None:
    row = first_row(conn, sa.select(approvals).where(approvals.c.id == approval_id))
    return None if row is None else approval_from_row(row)


def _get(conn: Connection, approval_id: str) -> Approval:
    found = _find(conn, approval_id)
    if found is None:
        raise NotFoundError(f"approval {approval_id} not found", field="approval_id")
    return found


def _insert(conn: Connection, values: dict[str, object]) -> Approval:
    approval_id = new_id()
    conn.execute(
        sa.insert(approvals).values(id=approval_id, status=ApprovalStatus.PENDING.value, **values)
    )
    return _get(conn, approval_id)


def _title(text: object) -> str:
    title = clean_text(text, field="title")
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"


class ApprovalStore:
    """Repository of approvals over one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(
        self,
        *,
        workspace_id: str,
        title: str,
        now: datetime,
        body: str = "",
        task_id: str | None = None,
        requested_by_agent_id: str | None = None,
        kind: ApprovalKind = ApprovalKind.GENERIC,
    ) -> Approval:
        """Open a ``pending`` approval.

        Returns:
            The new approval.

        Raises:
            InvalidInputError: a blank ``title``, a non-text ``body`` or an unknown ``kind``
                (``field`` names it).
            NotFoundError: the workspace, or a task or agent that is not in it (``field``
                names the argument).
        """
        values: dict[str, object] = {
            "workspace_id": workspace_id,
            "kind": enum_value(ApprovalKind, kind, field="kind").value,
            "title": _title(title),
            "body": clean_text(body, field="body", required=False),
            "task_id": task_id,
            "requested_by_agent_id": requested_by_agent_id,
            "created_at": now,
        }
        with self._db.write() as conn:
            workspace_row(conn, workspace_id)
            if task_id is not None:
                require_in_workspace(
                    conn, tasks, [task_id], workspace_id=workspace_id, field="task_id"
                )
            if requested_by_agent_id is not None:
                require_in_workspace(
                    conn,
                    agents,
                    [requested_by_agent_id],
                    workspace_id=workspace_id,
                    field="requested_by_agent_id",
                )
            return _insert(conn, values)

    def open_task_review(
        self, task_id: str, *, agent_id: str, now: datetime
    ) -> tuple[Task, Task, Approval, bool]:
        """Put a finished ``requires_approval`` task in review, with its ``task_review`` approval.

        One transaction: the task moves to ``IN_REVIEW`` (unless it is there already) and a
        pending ``task_review`` approval requested by ``agent_id`` is opened, unless the
        task already has one pending (finishing twice opens no second approval).

        Returns:
            ``(before, after, approval, created)``: the task before and after the move, the
            pending approval, and whether it was created now.

        Raises:
            NotFoundError: no such task (``task_id``).
        """
        with self._db.write() as conn:
            before = get_task_in(conn, task_id)
            if before.state is not TaskState.IN_REVIEW:
                conn.execute(
                    sa.update(tasks)
                    .where(tasks.c.id == task_id)
                    .values(state=TaskState.IN_REVIEW.value, updated_at=now)
                )
            row = first_row(
                conn,
                sa.select(approvals)
                .where(
                    approvals.c.task_id == task_id,
                    approvals.c.kind == ApprovalKind.TASK_REVIEW.value,
                    approvals.c.status == ApprovalStatus.PENDING.value,
                )
                .order_by(approvals.c.created_at.desc())
                .limit(1),
            )
            created = row is None
            if row is None:
                approval = _insert(
                    conn,
                    {
                        "workspace_id": before.workspace_id,
                        "kind": ApprovalKind.TASK_REVIEW.value,
                        "title": _title(f"Review: {before.title}"),
                        "body": f"{agent_id} finished task {task_id}; it needs approval.",
                        "task_id": task_id,
                        "requested_by_agent_id": agent_id,
                        "created_at": now,
                    },
                )
            else:
                approval = approval_from_row(row)
            return before, get_task_in(conn, task_id), approval, created

    def pending_task_reviews(self, task_id: str) -> list[Approval]:
        """The pending ``task_review`` approvals of ``task_id``, oldest first (usually 0 or 1)."""
        query = (
            sa.select(approvals)
            .where(
                approvals.c.task_id == task_id,
                approvals.c.kind == ApprovalKind.TASK_REVIEW.value,
                approvals.c.status == ApprovalStatus.PENDING.value,
            )
            .order_by(approvals.c.created_at, approvals.c.id)
        )
        with self._db.read() as conn:
            return [approval_from_row(row) for row in all_rows(conn, query)]

    def get(self, approval_id: str) -> Approval:
        """Return the approval ``approval_id``.

        Raises:
            NotFoundError: no such approval (field ``approval_id``).
        """
        with self._db.read() as conn:
            return _get(conn, approval_id)

    def list(
        self,
        workspace_id: str,
        *,
        status: ApprovalStatus | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Approval]:
        """Return one page of a workspace's approvals, newest first (``created_at``, then id).

        Returns:
            Up to ``limit`` approvals (capped at 500) and the cursor of the next page.

        Raises:
            InvalidInputError: a bad ``status``, ``limit`` or ``cursor``.
        """
        limit = check_limit(limit)
        query = sa.select(approvals).where(approvals.c.workspace_id == workspace_id)
        if status is not None:
            wanted = enum_value(ApprovalStatus, status, field="status")
            query = query.where(approvals.c.status == wanted.value)
        if cursor is not None:
            before_at, before_id = decode_cursor(cursor, (datetime, str))
            query = query.where(
                sa.or_(
                    approvals.c.created_at < before_at,
                    sa.and_(approvals.c.created_at == before_at, approvals.c.id < before_id),
                )
            )
        query = query.order_by(approvals.c.created_at.desc(), approvals.c.id.desc())
        with self._db.read() as conn:
            found = [approval_from_row(row) for row in all_rows(conn, query.limit(limit + 1))]
        return make_page(found, limit=limit, key=_approval_key)

    def resolve(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        decided_by: str,
        now: datetime,
        decision_note: str | None = None,
    ) -> Approval:
        """Approve or reject a pending approval and resolve its open inbox items.

        A compare-and-set on ``status = 'pending'``: of two concurrent decisions exactly one
        wins.

        Returns:
            The resolved approval.

        Raises:
            InvalidInputError: ``status`` is not ``approved``/``rejected`` (field ``status``).
            NotFoundError: no such approval (field ``approval_id``).
            ConflictError: it was already resolved (field ``approval_id``).
        """
        decision = enum_value(ApprovalStatus, status, field="status")
        if decision not in DECISIONS:
            raise InvalidInputError("status must be approved or rejected", field="status")
        with self._db.write() as conn:
            changed = conn.execute(
                sa.update(approvals)
                .where(
                    approvals.c.id == approval_id,
                    approvals.c.status == ApprovalStatus.PENDING.value,
                )
                .values(
                    status=decision.value,
                    decision_note=decision_note,
                    decided_by=decided_by,
                    resolved_at=now,
                )
            ).rowcount
            current = _get(conn, approval_id)
            if changed == 0:
                raise ConflictError(
                    f"approval {approval_id} is already {current.status.value}",
                    field="approval_id",
                )
            conn.execute(
                sa.update(inbox_items)
                .where(
                    inbox_items.c.approval_id == approval_id,
                    inbox_items.c.status == InboxStatus.OPEN.value,
                )
                .values(status=InboxStatus.RESOLVED.value, resolved_at=now)
            )
            return current
