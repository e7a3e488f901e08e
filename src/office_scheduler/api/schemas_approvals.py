"""Request bodies of the approval routes (limits as in :mod:`office_scheduler.api.schemas`)."""

from __future__ import annotations

from office_scheduler.api.schemas import Body, EntityId, InputModel, Text, Title


class ApprovalCreate(InputModel):
    """``POST /api/v1/workspaces/{id}/approvals``.

    A run token's agent is the requester; an admin may name one with
    ``requested_by_agent_id`` (that agent is woken when the approval is decided).
    """

    title: Title
    body: Text = ""
    task_id: EntityId | None = None
    requested_by_agent_id: EntityId | None = None


class DecisionIn(InputModel):
    """``POST /api/v1/approvals/{id}/approve`` and ``/reject``; the note is optional."""

    decision_note: Body | None = None
