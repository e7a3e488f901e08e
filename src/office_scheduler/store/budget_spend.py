"""Cost events and spend sums; mixed into :class:`~office_scheduler.store.budgets.BudgetStore`.

Sums are driven by the ``cost_events`` indexes on ``(workspace_id, at)``, ``(project_id, at)``
and ``(agent_id, at)``. Only priced events add cost; unpriced ones are counted apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.budgets import BudgetScope, CostEvent, Spend
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import cost_events
from office_scheduler.store.sql import Row, first_row, missing_reference

_SCOPE_COLUMNS = {
    BudgetScope.WORKSPACE: cost_events.c.workspace_id,
    BudgetScope.PROJECT: cost_events.c.project_id,
    BudgetScope.AGENT: cost_events.c.agent_id,
}


def cost_event_from_row(row: Row) -> CostEvent:
    """A cost event from its row."""
    return CostEvent(
        id=int(row["id"]),
        workspace_id=row["workspace_id"],
        agent_id=row["agent_id"],
        project_id=row["project_id"],
        task_id=row["task_id"],
        run_id=row["run_id"],
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        cost_subcents=int(row["cost_subcents"]),
        model=row["model"],
        priced=bool(row["priced"]),
        at=row["at"],
    )


def _sums() -> list[sa.ColumnElement[Any]]:
    priced = cost_events.c.priced.is_(True)
    return [
        sa.func.coalesce(
            sa.func.sum(sa.case((priced, cost_events.c.cost_subcents), else_=0)), 0
        ).label("cost"),
        sa.func.coalesce(sa.func.sum(sa.case((priced, 1), else_=0)), 0).label("priced"),
        sa.func.coalesce(sa.func.sum(sa.case((priced, 0), else_=1)), 0).label("unpriced"),
        sa.func.coalesce(sa.func.sum(cost_events.c.input_tokens), 0).label("tin"),
        sa.func.coalesce(sa.func.sum(cost_events.c.output_tokens), 0).label("tout"),
    ]


def _spend(kind: BudgetScope, scope_id: str, row: Any) -> Spend:
    return Spend(
        scope_kind=kind,
        scope_id=scope_id,
        cost_subcents=int(row.cost),
        priced_count=int(row.priced),
        unpriced_count=int(row.unpriced),
        input_tokens=int(row.tin),
        output_tokens=int(row.tout),
    )


def _window(since: datetime | None, until: datetime | None) -> list[sa.ColumnElement[bool]]:
    clauses: list[sa.ColumnElement[bool]] = []
    if since is not None:
        clauses.append(cost_events.c.at >= since)
    if until is not None:
        clauses.append(cost_events.c.at < until)
    return clauses


class SpendQueries:
    """Cost event writes and spend reads."""

    _db: Database

    def add_cost_event(
        self,
        *,
        workspace_id: str,
        agent_id: str,
        input_tokens: int,
        output_tokens: int,
        cost_subcents: int,
        priced: bool,
        now: datetime,
        project_id: str | None = None,
        task_id: str | None = None,
        run_id: int | None = None,
        model: str | None = None,
    ) -> CostEvent:
        """Record what one run reported (an unpriced event stores cost 0).

        Raises:
            InvalidInputError: a negative count or cost.
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        for name, value in (
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("cost_subcents", cost_subcents),
        ):
            if value < 0:
                raise InvalidInputError(f"{name} must not be negative", field=name)
        values = {
            "workspace_id": workspace_id,
            "agent_id": agent_id,
            "project_id": project_id,
            "task_id": task_id,
            "run_id": run_id,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_subcents": cost_subcents if priced else 0,
            "model": model[:200] if model else None,
            "priced": priced,
            "at": now,
        }
        message = f"workspace {workspace_id} not found"
        with missing_reference(field="workspace_id", message=message), self._db.write() as conn:
            row = first_row(conn, sa.insert(cost_events).values(values).returning(cost_events))
            assert row is not None
            return cost_event_from_row(row)

    def spend(
        self,
        workspace_id: str,
        scope_kind: BudgetScope,
        scope_id: str,
        *,
        since: datetime | None,
        until: datetime | None = None,
    ) -> Spend:
        """What one scope spent from ``since`` (``None``: all time) to ``until`` (exclusive)."""
        column = _SCOPE_COLUMNS[BudgetScope(scope_kind)]
        query = sa.select(*_sums()).where(
            column == scope_id,
            cost_events.c.workspace_id == workspace_id,
            *_window(since, until),
        )
        with self._db.read() as conn:
            return _spend(BudgetScope(scope_kind), scope_id, conn.execute(query).one())

    def spend_report(
        self, workspace_id: str, *, since: datetime | None, until: datetime | None
    ) -> list[Spend]:
        """Spend of the workspace, each project and each agent in ``[since, until)``.

        Returns:
            The workspace total first, then projects, then agents (each by id); scopes
            without cost events in the window are left out (the workspace always shows).
        """
        window = [cost_events.c.workspace_id == workspace_id, *_window(since, until)]
        with self._db.read() as conn:
            total = conn.execute(sa.select(*_sums()).where(*window)).one()
            found = [_spend(BudgetScope.WORKSPACE, workspace_id, total)]
            for kind in (BudgetScope.PROJECT, BudgetScope.AGENT):
                column = _SCOPE_COLUMNS[kind]
                rows = conn.execute(
                    sa.select(column.label("scope_id"), *_sums())
                    .where(*window, column.is_not(None))
                    .group_by(column)
                    .order_by(column)
                )
                found += [_spend(kind, str(row.scope_id), row) for row in rows]
            return found

    def recent_run_costs(self, agent_id: str, *, limit: int) -> list[int]:
        """What each of the agent's ``limit`` latest priced runs cost, newest first.

        A run's cost is the sum of its priced cost events, in subcents; runs that reported
        no price (or no usage) are not counted. Driven by ``ix_cost_events_agent_at``.
        """
        query = (
            sa.select(sa.func.sum(cost_events.c.cost_subcents))
            .where(
                cost_events.c.agent_id == agent_id,
                cost_events.c.priced.is_(sa.true()),
                cost_events.c.run_id.is_not(None),
            )
            .group_by(cost_events.c.run_id)
            .order_by(sa.func.max(cost_events.c.at).desc(), cost_events.c.run_id.desc())
            .limit(limit)
        )
        with self._db.read() as conn:
            return [int(cost) for cost in conn.execute(query).scalars()]
