"""Approvals: decisions people make for agents, and the review gate of finished tasks.

Every public method is one transaction. An approval starts ``pending`` and is resolved
once (``approved`` or ``rejected``); resolving it also resolves its open inbox items.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Approval, Comment, Task
from office_scheduler.domain.status import (
    ApprovalKind,
    ApprovalStatus,
    AuthorKind,
    InboxStatus,
    TaskState,
)
from office_scheduler.store.activity import USER_ACTOR, activity_values, insert_activity
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.notifications import notify_task_done
from office_scheduler.store.office_common import (
    find_task_in,
    get_task_in,
    require_in_workspace,
    workspace_row,
)
from office_scheduler.store.office_links import insert_comment
from office_scheduler.store.pagination import Page, check_limit, decode_cursor, make_page
from office_scheduler.store.rows import approval_from_row
from office_scheduler.store.schema import agents, approvals, inbox_items, tasks, wakeup_requests
from office_scheduler.store.sql import all_rows, first_row
from office_scheduler.store.validation import clean_text, enum_value

#: Idempotency-key prefix of the ``approval_resolved`` wake (``approval_resolved:<id>``).
RESOLVED_KEY_PREFIX = "approval_resolved:"

#: How far back the wake re-drive looks for decisions (by ``resolved_at``).
REDRIVE_WINDOW = timedelta(hours=24)

#: Longest approval title (the column's width).
MAX_TITLE = 500

DECISIONS = (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED)


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """What one decision committed.

    Attributes:
        approval: the decided approval.
        before: its ``task_review`` task before the decision landed (``None`` otherwise).
        after: that task after it (equal to ``before`` when the task had left review).
        comment: the rejection comment posted on the task, if any.
    """

    approval: Approval
    before: Task | None = None
    after: Task | None = None
    comment: Comment | None = None


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
        land: bool = True,
    ) -> Decision:
        """Decide a pending approval, with everything the decision changes, in one transaction.

        A compare-and-set on ``status = 'pending'``: of two concurrent decisions exactly one
        wins. The same transaction resolves the approval's open inbox items, logs the
        ``approval_<status>`` activity entry and, for a ``task_review`` approval with
        ``land``, applies the decision to its task: approval moves it to ``DONE``, rejection
        adds a user comment ``Changes requested by <who>: <note>`` and moves it back to
        ``IN_PROGRESS``. The move is conditional on the task still being ``IN_REVIEW``, so
        a person's concurrent move of the task is never overwritten.

        Returns:
            The :class:`Decision` (the approval, its task before/after, the comment).

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
            insert_activity(conn, _decision_activity(current, now))
            if land and current.kind is ApprovalKind.TASK_REVIEW and current.task_id is not None:
                return _land_review(conn, current, now)
            return Decision(approval=current)

    def undelivered_decisions(
        self, *, since: datetime, limit: int = 100
    ) -> builtins.list[Approval]:
        """Decided ``generic`` approvals whose requester never got its ``approval_resolved`` wake.

        Those resolved at or after ``since`` (UTC) with a requesting agent and no wakeup
        request keyed ``approval_resolved:<approval_id>`` (the unique key's index answers
        each check), oldest first, at most ``limit``. Used by the re-drive after a crash
        between a decision's commit and its wake.
        """
        key = sa.literal(RESOLVED_KEY_PREFIX) + approvals.c.id
        query = (
            sa.select(approvals)
            .where(
                approvals.c.kind == ApprovalKind.GENERIC.value,
                approvals.c.status.in_([d.value for d in DECISIONS]),
                approvals.c.resolved_at >= since,
                approvals.c.requested_by_agent_id.is_not(None),
                ~sa.exists().where(wakeup_requests.c.idempotency_key == key),
            )
            .order_by(approvals.c.resolved_at, approvals.c.id)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [approval_from_row(row) for row in all_rows(conn, query)]


def _decision_activity(approval: Approval, now: datetime) -> dict[str, object]:
    decided_by = approval.decided_by or "user"
    return activity_values(
        workspace_id=approval.workspace_id,
        kind=f"approval_{approval.status.value}",
        message=f"approval {approval.status.value}: {approval.title}",
        now=now,
        agent_id=approval.requested_by_agent_id,
        task_id=approval.task_id,
        data={
            "approval_id": approval.id,
            "decided_by": decided_by,
            "note": approval.decision_note or "",
        },
        actor=decided_by if decided_by.startswith(("agent:", "system")) else USER_ACTOR,
    )


def _land_review(conn: Connection, approval: Approval, now: datetime) -> Decision:
    """Apply a ``task_review`` decision to its task (see :meth:`ApprovalStore.resolve`)."""
    assert approval.task_id is not None
    before = find_task_in(conn, approval.task_id)
    if before is None:
        return Decision(approval=approval)
    by = approval.decided_by or "user"
    note = approval.decision_note or ""
    comment = None
    target = TaskState.DONE
    if approval.status is ApprovalStatus.REJECTED:
        target = TaskState.IN_PROGRESS
        body = f"Changes requested by {by}: {note}" if note else f"Changes requested by {by}."
        comment = insert_comment(
            conn, before, body=body, author_kind=AuthorKind.USER, author_agent_id=None, now=now
        )
    conn.execute(
        sa.update(tasks)
        .where(tasks.c.id == before.id, tasks.c.state == TaskState.IN_REVIEW.value)
        .values(state=target.value, updated_at=now)
    )
    after = get_task_in(conn, before.id)
    notify_task_done(conn, before, after, now)
    return Decision(approval=approval, before=before, after=after, comment=comment)
