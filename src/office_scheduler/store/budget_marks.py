"""The once-per-period budget markers together with the notices they owe (one transaction).

Mixed into :class:`~office_scheduler.store.budgets.BudgetStore`. A crossing's marker
(``alerted_period``/``exceeded_period``), its budget pause and its inbox item and activity
entry commit together, so a crash can never leave a period marked while nobody was told.
The coordinator's ``budget_alert`` wake comes after the commit; :meth:`undelivered_alerts`
finds the alerts whose wake never got queued.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.budgets import PAUSED_FOR_BUDGET, BudgetPeriod, BudgetPolicy
from office_scheduler.domain.models import InboxItem, Run
from office_scheduler.domain.status import (
    CLAIMABLE_AGENT_STATUSES,
    AgentStatus,
    RunReason,
    RunStatus,
)
from office_scheduler.store.activity import insert_activity
from office_scheduler.store.engine import Database
from office_scheduler.store.inbox import insert_inbox_item
from office_scheduler.store.queue_common import lock_agent
from office_scheduler.store.rows import inbox_from_row, run_from_row
from office_scheduler.store.schema import (
    agents,
    budget_policies,
    inbox_items,
    runs,
    wakeup_requests,
)
from office_scheduler.store.sql import Row, all_rows

#: Prefix of the alert's inbox dedupe key and of the coordinator wake's idempotency key
#: (``budget_alert:<policy_id>:<period>``).
ALERT_KEY_PREFIX = "budget_alert:"


def alert_key(policy_id: str, period: str) -> str:
    """The key of a policy's warn alert in one period (inbox item and coordinator wake)."""
    return f"{ALERT_KEY_PREFIX}{policy_id}:{period}"


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetNotice:
    """What people are told about a crossing: inbox values and activity values.

    Attributes:
        inbox: column values made by :func:`~office_scheduler.store.inbox.inbox_values`.
        activity: column values made by
            :func:`~office_scheduler.store.activity.activity_values`.
    """

    inbox: Mapping[str, Any]
    activity: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class PauseOutcome:
    """What the budget pause of :meth:`MarkMethods.record_exceeded` did.

    Attributes:
        paused: whether this call paused the agent (false when no pause was asked or the
            agent was not ``idle``/``working``).
        status: the agent's status before the call (``paused``, ``stopped``...).
        ended: its queued runs the pause ended (reason ``budget_exceeded``), by id.
    """

    paused: bool
    status: str
    ended: list[Run] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExceededResult:
    """The outcome of :meth:`MarkMethods.record_exceeded`.

    Attributes:
        fired: false when ``mark`` was asked and the period was marked already (then
            nothing was written).
        pause: what the pause did.
    """

    fired: bool
    pause: PauseOutcome


def mark_in(conn: Connection, column: sa.Column[Any], policy_id: str, period: str) -> bool:
    """Compare-and-set ``column`` to ``period``; true when this call set it."""
    result = conn.execute(
        sa.update(budget_policies)
        .where(budget_policies.c.id == policy_id, sa.or_(column.is_(None), column != period))
        .values({column.name: period})
    )
    return result.rowcount == 1


def _write(conn: Connection, notice: BudgetNotice | None) -> None:
    if notice is not None:
        insert_inbox_item(conn, notice.inbox)
        insert_activity(conn, notice.activity)


def pause_in(conn: Connection, agent_id: str, now: datetime) -> PauseOutcome:
    """Pause an ``idle``/``working`` agent for its budget and end its queued runs."""
    row = lock_agent(conn, agent_id)
    status = str(row["status"])
    if status not in [claimable.value for claimable in CLAIMABLE_AGENT_STATUSES]:
        return PauseOutcome(paused=False, status=status)
    conn.execute(
        sa.update(agents)
        .where(agents.c.id == agent_id)
        .values(status=AgentStatus.PAUSED.value, paused_reason=PAUSED_FOR_BUDGET, updated_at=now)
    )
    ended = conn.execute(
        sa.update(runs)
        .where(runs.c.agent_id == agent_id, runs.c.status == RunStatus.QUEUED.value)
        .values(
            status=RunStatus.FINISHED.value,
            reason=RunReason.BUDGET_EXCEEDED.value,
            finished_at=now,
        )
        .returning(*runs.c)
    )
    found = sorted((run_from_row(r) for r in ended.mappings().all()), key=lambda run: run.id)
    return PauseOutcome(paused=True, status=status, ended=found)


class MarkMethods:
    """Marker methods of the budget store (see the module docstring)."""

    _db: Database

    def record_alert(self, policy_id: str, period: str, notice: BudgetNotice) -> bool:
        """Mark the warn alert of ``period`` fired and write its notice, in one transaction.

        A compare-and-set: with any number of processes exactly one caller gets true, and
        only that caller's notice is written.
        """
        with self._db.write() as conn:
            if not mark_in(conn, budget_policies.c.alerted_period, policy_id, period):
                return False
            _write(conn, notice)
            return True

    def record_exceeded(
        self,
        policy_id: str,
        agent_id: str,
        *,
        period: str,
        now: datetime,
        mark: bool,
        pause: bool,
        notice: Callable[[PauseOutcome], BudgetNotice | None],
    ) -> ExceededResult:
        """Apply a reached limit in one transaction: marker, budget pause, notice.

        Args:
            policy_id: the policy whose limit was reached.
            agent_id: the agent whose run reached it.
            period: the period key (``YYYY-MM`` UTC or ``lifetime``).
            now: the instant of the change (UTC).
            mark: compare-and-set ``exceeded_period`` first; when it was set already,
                nothing is written (``fired`` false).
            pause: pause the agent when it is ``idle``/``working`` (``paused_reason
                'budget_exceeded'``) and end its queued runs (reason ``budget_exceeded``).
            notice: builds the inbox item and activity entry from what the pause did;
                ``None`` writes nothing.

        Raises:
            NotFoundError: no such agent (when ``pause``).
        """
        with self._db.write() as conn:
            if mark and not mark_in(conn, budget_policies.c.exceeded_period, policy_id, period):
                return ExceededResult(fired=False, pause=PauseOutcome(paused=False, status=""))
            outcome = (
                pause_in(conn, agent_id, now) if pause else PauseOutcome(paused=False, status="")
            )
            _write(conn, notice(outcome))
            return ExceededResult(fired=True, pause=outcome)

    def undelivered_alerts(
        self, *, now: datetime, limit: int = 100
    ) -> list[tuple[BudgetPolicy, InboxItem]]:
        """Warn alerts of the current period whose coordinator wake was never queued.

        Policies whose ``alerted_period`` is the current one (``YYYY-MM`` of ``now`` in
        UTC, or ``lifetime``), with the alert's inbox item and no wakeup request keyed
        ``budget_alert:<policy_id>:<period>`` (both looked up through their unique keys).

        Returns:
            ``(policy, inbox item)`` pairs, at most ``limit``.
        """
        from office_scheduler.store.budgets import policy_from_row

        key = (
            sa.literal(ALERT_KEY_PREFIX)
            + budget_policies.c.id
            + ":"
            + (budget_policies.c.alerted_period)
        )
        current = sa.or_(
            sa.and_(
                budget_policies.c.period == BudgetPeriod.MONTHLY.value,
                budget_policies.c.alerted_period == BudgetPeriod.MONTHLY.key(now),
            ),
            sa.and_(
                budget_policies.c.period == BudgetPeriod.LIFETIME.value,
                budget_policies.c.alerted_period == BudgetPeriod.LIFETIME.key(now),
            ),
        )
        query = (
            sa.select(budget_policies, inbox_items.c.id.label("inbox_id"))
            .join(inbox_items, inbox_items.c.dedupe_key == key)
            .where(current, ~sa.exists().where(wakeup_requests.c.idempotency_key == key))
            .order_by(budget_policies.c.id)
            .limit(limit)
        )
        with self._db.read() as conn:
            found = all_rows(conn, query)
            items = _inbox_by_id(conn, [int(row["inbox_id"]) for row in found])
            return [(policy_from_row(row), items[int(row["inbox_id"])]) for row in found]


def _inbox_by_id(conn: Connection, item_ids: list[int]) -> dict[int, InboxItem]:
    if not item_ids:
        return {}
    rows: list[Row] = all_rows(conn, sa.select(inbox_items).where(inbox_items.c.id.in_(item_ids)))
    return {int(row["id"]): inbox_from_row(row) for row in rows}
