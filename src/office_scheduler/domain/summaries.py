"""Records of continuation summaries and the inputs their builder reads.

The builder itself is :mod:`office_scheduler.summary`; the store is
:mod:`office_scheduler.store.summaries`. Instants are aware UTC datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

#: Scope of the summary of an agent's taskless runs that no routine fired.
AGENT_SCOPE = "agent"
#: Prefix of the per-routine scopes: ``routine:<routine_id>``.
ROUTINE_SCOPE_PREFIX = "routine:"


@dataclass(frozen=True, kw_only=True, slots=True)
class ContinuationSummary:
    """The one current summary of an (agent, scope) (specification "Continuation summary").

    Attributes:
        scope: ``routine:<routine_id>`` or ``agent``.
        content: markdown with the four sections, at most 8 KB of UTF-8.
        content_tokens: estimated tokens of ``content`` (UTF-8 bytes / 4, rounded up).
        updated_by_run_id: the run whose success wrote it.
    """

    agent_id: str
    scope: str
    content: str
    content_tokens: int
    updated_at: datetime
    updated_by_run_id: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ActivityStats:
    """Workspace activity in a window ``(since, until]``, counted by the store.

    Attributes:
        completed_tasks: tasks that reached ``DONE`` (by ``updated_at``) in the window.
        failed_runs: runs that ended ``failed`` in the window.
        agent_error_escalations: ``agent.error`` inbox items opened in the window.
        budget_signals: ``budget.alert`` and ``budget.exceeded`` inbox items opened in the
            window.
        open_tasks: actionable tasks (``TODO``, ``IN_PROGRESS``, not archived) right now.
    """

    since: datetime
    until: datetime
    completed_tasks: int = 0
    failed_runs: int = 0
    agent_error_escalations: int = 0
    budget_signals: int = 0
    open_tasks: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class ActiveBlocker:
    """A stuck task the summary lists under "Open blockers".

    Attributes:
        state: the task's state value (``BLOCKED``, or any open state with open blockers).
        waiting_on: titles of the task's open blocker tasks (empty for a bare ``BLOCKED``).
        since: when the task last changed (``updated_at``), shown as "surfaced".
    """

    task_id: str
    title: str
    state: str
    assignee_agent_id: str | None
    waiting_on: tuple[str, ...]
    since: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalDecision:
    """A decided approval of a task, for the resume delta's "Decisions" section.

    Attributes:
        status: ``approved`` or ``rejected``.
        decided_by: who decided (free text as stored), if known.
        resolved_at: when it was decided (UTC).
    """

    approval_id: str
    title: str
    status: str
    decision_note: str | None
    decided_by: str | None
    resolved_at: datetime
