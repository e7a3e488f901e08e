"""Validation and side effects of per-agent settings (used by the agent store methods).

Rules (per-agent settings, DESIGN §1): ``reports_to`` names another agent of the same
workspace and never closes a cycle; ``permission_policy`` is
``{"mode": "allow_all"|"deny"|"allow_listed", "tools": [...]}``; stopping an agent ends
its queued runs and scheduled retries.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import Run
from office_scheduler.domain.status import PermissionMode, RunReason, RunStatus
from office_scheduler.store.queue_common import release_stale_checkout
from office_scheduler.store.rows import run_from_row
from office_scheduler.store.schema import agents, runs
from office_scheduler.store.validation import enum_value

#: Most tools an ``allow_listed`` policy may name; longest tool name.
MAX_TOOLS = 200
MAX_TOOL_CHARS = 200
#: Why an agent is paused when a person paused it.
MANUAL_PAUSE = "manual"
#: Longest ``paused_reason`` (the column's width).
MAX_PAUSED_REASON = 60


#: Largest ``expected_run_cents`` (one million dollars).
MAX_EXPECTED_RUN_CENTS = 100_000_000


def expected_run_cents(value: object) -> int | None:
    """Validate an agent's expected cost of one run, in cents (``None``: not set).

    Raises:
        InvalidInputError: not a whole number in ``0..MAX_EXPECTED_RUN_CENTS`` (field
            ``expected_run_cents``).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(
            "expected_run_cents must be a whole number of cents", field="expected_run_cents"
        )
    if not 0 <= value <= MAX_EXPECTED_RUN_CENTS:
        raise InvalidInputError(
            f"expected_run_cents must be in 0..{MAX_EXPECTED_RUN_CENTS}",
            field="expected_run_cents",
        )
    return value


def permission_policy(value: object) -> dict[str, Any] | None:
    """Validate an agent's permission policy.

    ``mode`` is required; ``tools`` (a list of distinct non-blank tool names, order kept)
    defaults to empty and is allowed only with ``allow_listed``. ``None`` clears the policy.

    Returns:
        The normalised policy, or ``None``.

    Raises:
        InvalidInputError: naming ``permission_policy``, ``permission_policy.mode``,
            ``permission_policy.tools`` or the unknown key.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInputError(
            "permission_policy must be an object with mode and tools", field="permission_policy"
        )
    unknown = sorted(str(key) for key in value if key not in ("mode", "tools"))
    if unknown:
        field = f"permission_policy.{unknown[0]}"
        raise InvalidInputError(f"unknown key {field}", field=field)
    mode = enum_value(PermissionMode, value.get("mode"), field="permission_policy.mode")
    tools = value.get("tools", [])
    field = "permission_policy.tools"
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise InvalidInputError(f"{field} must be a list of at most {MAX_TOOLS} names", field=field)
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, str) or not tool.strip() or len(tool) > MAX_TOOL_CHARS:
            raise InvalidInputError(f"{field} must hold non-empty tool names", field=field)
        if tool.strip() not in names:
            names.append(tool.strip())
    if names and mode is not PermissionMode.ALLOW_LISTED:
        raise InvalidInputError(f"{field} is only allowed with mode allow_listed", field=field)
    return {"mode": mode.value, "tools": names}


def paused_reason(value: object) -> str | None:
    """Validate a ``paused_reason`` (short text, or ``None``).

    Raises:
        InvalidInputError: not text, blank, or longer than 60 characters.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_PAUSED_REASON:
        raise InvalidInputError(
            f"paused_reason must be text of 1..{MAX_PAUSED_REASON} characters",
            field="paused_reason",
        )
    return value.strip()


def check_reports_to(
    conn: Connection, *, agent_id: str | None, workspace_id: str, reports_to: object
) -> str | None:
    """Validate ``reports_to`` of agent ``agent_id`` (``None`` for an agent being created).

    Returns:
        The coordinator's id, or ``None``.

    Raises:
        InvalidInputError: (field ``reports_to``) not text, the agent itself, no agent of
            the workspace, or a chain that leads back to the agent (a cycle).
    """
    if reports_to is None:
        return None
    if not isinstance(reports_to, str) or not reports_to.strip():
        raise InvalidInputError("reports_to must be an agent id", field="reports_to")
    if reports_to == agent_id:
        raise InvalidInputError("an agent cannot report to itself", field="reports_to")
    chain = dict(
        conn.execute(
            sa.select(agents.c.id, agents.c.reports_to).where(agents.c.workspace_id == workspace_id)
        ).all()
    )
    if reports_to not in chain:
        raise InvalidInputError(
            f"reports_to: no agent {reports_to} in this workspace", field="reports_to"
        )
    seen: set[str] = set()
    current: str | None = reports_to
    while current is not None and current not in seen:
        if current == agent_id:
            raise InvalidInputError(
                f"reports_to {reports_to} would make a reporting cycle", field="reports_to"
            )
        seen.add(current)
        current = chain.get(current)
    return reports_to


def end_pending_runs(conn: Connection, agent_id: str, *, now: datetime) -> list[Run]:
    """Cancel the agent's queued runs and scheduled retries (reason ``agent_paused``).

    A scheduled retry's leftover checkout of its task is released.

    Returns:
        The cancelled runs, by id.
    """
    rows = (
        conn.execute(
            sa.update(runs)
            .where(
                runs.c.agent_id == agent_id,
                runs.c.status.in_([RunStatus.QUEUED.value, RunStatus.SCHEDULED_RETRY.value]),
            )
            .values(
                status=RunStatus.CANCELLED.value,
                reason=RunReason.AGENT_PAUSED.value,
                finished_at=now,
            )
            .returning(*runs.c)
        )
        .mappings()
        .all()
    )
    ended = sorted((run_from_row(row) for row in rows), key=lambda run: run.id)
    for run in ended:
        if run.task_id is not None:
            release_stale_checkout(conn, run.task_id, run.agent_id)
    return ended
