"""Response model of approvals."""

from __future__ import annotations

from office_scheduler.api.views import Timestamp, View
from office_scheduler.domain.status import ApprovalKind, ApprovalStatus


class ApprovalOut(View):
    """An approval: ``pending`` until a person approves or rejects it."""

    id: str
    workspace_id: str
    kind: ApprovalKind
    status: ApprovalStatus
    title: str
    body: str
    task_id: str | None
    requested_by_agent_id: str | None
    decision_note: str | None
    decided_by: str | None
    created_at: Timestamp
    resolved_at: Timestamp | None
