"""Budget policies: CRUD, the once-per-period markers, and the budget pause of an agent.

Every public method is one transaction. Cost events and spend sums live in
:mod:`office_scheduler.store.budget_spend` (mixed in here). Money is in subcents (1/100 cent).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.budgets import (
    SCOPE_ORDER,
    SUBCENTS_PER_CENT,
    BudgetAction,
    BudgetPeriod,
    BudgetPolicy,
    BudgetScope,
)
from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Run
from office_scheduler.store.budget_marks import MarkMethods, mark_in, pause_in
from office_scheduler.store.budget_spend import SpendQueries
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.office_common import workspace_row
from office_scheduler.store.schema import agents, budget_policies, projects
from office_scheduler.store.sql import Row, all_rows, first_row, unique_conflict
from office_scheduler.store.validation import enum_value

_CHANGES = frozenset({"limit_subcents", "period", "alert_threshold_pct", "action_on_exceed"})


def policy_from_row(row: Row) -> BudgetPolicy:
    """A budget policy from its row."""
    return BudgetPolicy(
        id=row["id"],
        workspace_id=row["workspace_id"],
        scope_kind=BudgetScope(row["scope_kind"]),
        scope_id=row["scope_id"],
        limit_subcents=int(row["limit_subcents"]),
        period=BudgetPeriod(row["period"]),
        alert_threshold_pct=int(row["alert_threshold_pct"]),
        action_on_exceed=BudgetAction(row["action_on_exceed"]),
        alerted_period=row["alerted_period"],
        exceeded_period=row["exceeded_period"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _limit(value: object) -> int:
    """A positive limit in subcents that is a whole number of cents."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value <= 0
        or value % SUBCENTS_PER_CENT
    ):
        raise InvalidInputError("limit_cents must be a positive whole number", field="limit_cents")
    return value


def _threshold(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise InvalidInputError(
            "alert_threshold_pct must be an integer from 1 to 100", field="alert_threshold_pct"
        )
    return value


def _check_scope(conn: Connection, workspace_id: str, scope: BudgetScope, scope_id: str) -> None:
    """The scope exists in the workspace (else :class:`NotFoundError` naming ``scope_id``)."""
    workspace_row(conn, workspace_id)
    if scope is BudgetScope.WORKSPACE:
        if scope_id != workspace_id:
            raise InvalidInputError(
                "a workspace budget's scope_id is the workspace id", field="scope_id"
            )
        return
    table = projects if scope is BudgetScope.PROJECT else agents
    found = conn.execute(
        sa.select(table.c.id).where(table.c.id == scope_id, table.c.workspace_id == workspace_id)
    ).first()
    if found is None:
        raise NotFoundError(f"{scope.value} {scope_id} not found", field="scope_id")


def _policy_row(conn: Connection, policy_id: str) -> Row:
    row = first_row(conn, sa.select(budget_policies).where(budget_policies.c.id == policy_id))
    if row is None:
        raise NotFoundError(f"budget {policy_id} not found", field="budget_id")
    return row


def _conflict(scope: BudgetScope) -> str:
    return f"this {scope.value} already has a budget policy; update it instead"


def budget_blocked_clause(
    workspace_id: sa.ColumnElement[Any],
    project_id: sa.ColumnElement[Any],
    agent_id: sa.ColumnElement[Any],
    *,
    now: datetime,
) -> sa.Exists:
    """SQL: a blocking policy of the agent's scopes already fired its action this period.

    Blocking means ``pause_agent`` or ``block_new_runs`` whose ``exceeded_period`` is the
    current period (``YYYY-MM`` of ``now`` in UTC, or ``lifetime``). Looked up through the
    unique ``(workspace_id, scope_kind, scope_id)`` index; for the recovery sweep.
    """
    current = [BudgetPeriod.MONTHLY.key(now), BudgetPeriod.LIFETIME.key(now)]
    return sa.exists().where(
        budget_policies.c.workspace_id == workspace_id,
        budget_policies.c.action_on_exceed.in_(
            [BudgetAction.PAUSE_AGENT.value, BudgetAction.BLOCK_NEW_RUNS.value]
        ),
        budget_policies.c.exceeded_period.in_(current),
        sa.or_(
            sa.and_(
                budget_policies.c.scope_kind == BudgetScope.WORKSPACE.value,
                budget_policies.c.scope_id == workspace_id,
            ),
            sa.and_(
                budget_policies.c.scope_kind == BudgetScope.PROJECT.value,
                budget_policies.c.scope_id == project_id,
            ),
            sa.and_(
                budget_policies.c.scope_kind == BudgetScope.AGENT.value,
                budget_policies.c.scope_id == agent_id,
            ),
        ),
    )


def _run_policies() -> sa.Select[Any]:
    """Policies of one run's scopes: its workspace, its project (if any) and its agent."""
    workspace_id: sa.BindParameter[str] = sa.bindparam("workspace_id")

    def scope(kind: BudgetScope, scope_id: sa.BindParameter[Any]) -> sa.ColumnElement[bool]:
        return sa.and_(
            budget_policies.c.scope_kind == kind.value, budget_policies.c.scope_id == scope_id
        )

    return sa.select(budget_policies).where(
        budget_policies.c.workspace_id == workspace_id,
        sa.or_(
            scope(BudgetScope.WORKSPACE, workspace_id),
            scope(BudgetScope.PROJECT, sa.bindparam("project_id", type_=sa.String)),
            scope(BudgetScope.AGENT, sa.bindparam("agent_id", type_=sa.String)),
        ),
    )


_RUN_POLICIES = _run_policies()


class BudgetStore(SpendQueries, MarkMethods):
    """Budget policies, cost events and spend sums."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create_policy(
        self,
        *,
        workspace_id: str,
        scope_kind: BudgetScope,
        scope_id: str,
        limit_subcents: int,
        period: BudgetPeriod,
        action_on_exceed: BudgetAction,
        now: datetime,
        alert_threshold_pct: int = 80,
    ) -> BudgetPolicy:
        """Create the budget policy of one scope.

        Args:
            workspace_id: the workspace.
            scope_kind: ``workspace``, ``project`` or ``agent``.
            scope_id: the workspace id itself, or a project or agent of the workspace.
            limit_subcents: the limit in 1/100 cent; a positive whole number of cents.
            period: ``monthly`` (calendar month, UTC) or ``lifetime``.
            action_on_exceed: ``pause_agent``, ``block_new_runs`` or ``notify``.
            now: creation instant.
            alert_threshold_pct: warn threshold, 1..100 percent of the limit.

        Raises:
            NotFoundError: no such workspace, or the project/agent is not in it.
            InvalidInputError: an invalid value (``field`` names it).
            ConflictError: the scope already has a policy (one per scope).
        """
        scope = enum_value(BudgetScope, scope_kind, field="scope_kind")
        values = {
            "id": new_id(),
            "workspace_id": workspace_id,
            "scope_kind": scope.value,
            "scope_id": scope_id,
            "limit_subcents": _limit(limit_subcents),
            "period": enum_value(BudgetPeriod, period, field="period").value,
            "alert_threshold_pct": _threshold(alert_threshold_pct),
            "action_on_exceed": enum_value(
                BudgetAction, action_on_exceed, field="action_on_exceed"
            ).value,
            "created_at": now,
            "updated_at": now,
        }
        with unique_conflict(field="scope_id", message=_conflict(scope)), self._db.write() as conn:
            _check_scope(conn, workspace_id, scope, scope_id)
            taken = conn.execute(
                sa.select(budget_policies.c.id).where(
                    budget_policies.c.workspace_id == workspace_id,
                    budget_policies.c.scope_kind == scope.value,
                    budget_policies.c.scope_id == scope_id,
                )
            ).first()
            if taken is not None:
                raise ConflictError(_conflict(scope), field="scope_id")
            conn.execute(sa.insert(budget_policies).values(values))
            return policy_from_row(_policy_row(conn, str(values["id"])))

    def get_policy(self, policy_id: str) -> BudgetPolicy:
        """Return policy ``policy_id``.

        Raises:
            NotFoundError: no such policy (field ``budget_id``).
        """
        with self._db.read() as conn:
            return policy_from_row(_policy_row(conn, policy_id))

    def list_policies(self, workspace_id: str) -> list[BudgetPolicy]:
        """The workspace's policies: workspace first, then projects, then agents (by id)."""
        order = sa.case(
            {scope.value: index for index, scope in enumerate(SCOPE_ORDER)},
            value=budget_policies.c.scope_kind,
        )
        query = (
            sa.select(budget_policies)
            .where(budget_policies.c.workspace_id == workspace_id)
            .order_by(order, budget_policies.c.scope_id)
        )
        with self._db.read() as conn:
            return [policy_from_row(row) for row in all_rows(conn, query)]

    def applicable_policies(
        self, workspace_id: str, *, project_id: str | None, agent_id: str
    ) -> list[BudgetPolicy]:
        """The policies of a run's scopes in check order: workspace, project, agent."""
        params = {"workspace_id": workspace_id, "project_id": project_id, "agent_id": agent_id}
        with self._db.read() as conn:
            found = [policy_from_row(row) for row in all_rows(conn, _RUN_POLICIES, params)]
        return sorted(found, key=lambda policy: SCOPE_ORDER.index(policy.scope_kind))

    def update_policy(self, policy_id: str, *, now: datetime, **changes: object) -> BudgetPolicy:
        """Change a policy.

        Keys: ``limit_subcents``, ``period``, ``alert_threshold_pct``, ``action_on_exceed``.
        A new period forgets which alert and action already fired.

        Raises:
            NotFoundError: no such policy.
            InvalidInputError: an unknown key or invalid value (``field`` names it).
        """
        unknown = sorted(set(changes) - _CHANGES)
        if unknown:
            raise InvalidInputError(f"unknown budget field {unknown[0]!r}", field=unknown[0])
        values: dict[str, Any] = {"updated_at": now}
        if "limit_subcents" in changes:
            values["limit_subcents"] = _limit(changes["limit_subcents"])
        if "alert_threshold_pct" in changes:
            values["alert_threshold_pct"] = _threshold(changes["alert_threshold_pct"])
        if "action_on_exceed" in changes:
            action = enum_value(BudgetAction, changes["action_on_exceed"], field="action_on_exceed")
            values["action_on_exceed"] = action.value
        with self._db.write() as conn:
            row = _policy_row(conn, policy_id)
            if "period" in changes:
                period = enum_value(BudgetPeriod, changes["period"], field="period")
                if period.value != row["period"]:
                    values.update(period=period.value, alerted_period=None, exceeded_period=None)
            conn.execute(
                sa.update(budget_policies).where(budget_policies.c.id == policy_id).values(values)
            )
            return policy_from_row(_policy_row(conn, policy_id))

    def delete_policy(self, policy_id: str) -> None:
        """Delete a policy (its cost events stay).

        Raises:
            NotFoundError: no such policy.
        """
        with self._db.write() as conn:
            _policy_row(conn, policy_id)
            conn.execute(sa.delete(budget_policies).where(budget_policies.c.id == policy_id))

    def mark_alerted(self, policy_id: str, period: str) -> bool:
        """Record that the warn alert of ``period`` fired; false when it already had.

        A compare-and-set, so with any number of processes exactly one caller gets true.
        """
        return self._mark(budget_policies.c.alerted_period, policy_id, period)

    def mark_exceeded(self, policy_id: str, period: str) -> bool:
        """Record that the exceed action of ``period`` fired; false when it already had."""
        return self._mark(budget_policies.c.exceeded_period, policy_id, period)

    def _mark(self, column: sa.Column[Any], policy_id: str, period: str) -> bool:
        with self._db.write() as conn:
            return mark_in(conn, column, policy_id, period)

    def clear_marks(
        self, policy_id: str, *, alerted: bool, exceeded: bool, now: datetime
    ) -> BudgetPolicy:
        """Forget that the alert and/or the exceed action fired, so they can fire again.

        Raises:
            NotFoundError: no such policy.
        """
        values: dict[str, Any] = {"updated_at": now}
        if alerted:
            values["alerted_period"] = None
        if exceeded:
            values["exceeded_period"] = None
        with self._db.write() as conn:
            _policy_row(conn, policy_id)
            conn.execute(
                sa.update(budget_policies).where(budget_policies.c.id == policy_id).values(values)
            )
            return policy_from_row(_policy_row(conn, policy_id))

    def pause_agent_for_budget(self, agent_id: str, *, now: datetime) -> tuple[bool, list[Run]]:
        """Pause an agent for its budget and end its queued runs, in one transaction.

        An ``idle``/``working`` agent becomes ``paused`` with ``paused_reason
        'budget_exceeded'``; its queued runs end ``finished``, reason ``budget_exceeded``.

        Returns:
            Whether this call paused the agent (false when it was already paused, stopped
            or pending) and the runs it ended.

        Raises:
            NotFoundError: no such agent.
        """
        with self._db.write() as conn:
            outcome = pause_in(conn, agent_id, now)
            return outcome.paused, outcome.ended

    def agents_of(self, agent_ids: Sequence[str]) -> dict[str, str]:
        """Names of the given agents by id (unknown ids are left out)."""
        if not agent_ids:
            return {}
        with self._db.read() as conn:
            rows = conn.execute(
                sa.select(agents.c.id, agents.c.name).where(agents.c.id.in_(list(agent_ids)))
            )
            return {str(row.id): str(row.name) for row in rows}
