"""Routines and their triggers: one transaction per method.

Values arrive validated by the routine service. Routine runs are in
:mod:`office_scheduler.store.routine_runs`; :class:`RoutineStore` offers both.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.routines import (
    HEARTBEAT_CRON,
    HEARTBEAT_DESCRIPTION,
    HEARTBEAT_NAME,
    HEARTBEAT_TIMEZONE,
    CatchUpPolicy,
    ConcurrencyPolicy,
    Routine,
    RoutineStatus,
    RoutineTrigger,
    TriggerKind,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.office_common import workspace_row
from office_scheduler.store.routine_rows import (
    routine_from_row,
    routine_row,
    trigger_from_row,
    trigger_row,
)
from office_scheduler.store.routine_runs import RoutineRunMethods
from office_scheduler.store.routine_to_fire import RoutinesToFire, routines_to_fire
from office_scheduler.store.schema import routine_runs, routine_triggers, routines
from office_scheduler.store.sql import all_rows, first_row


class RoutineStore(RoutineRunMethods):
    """Routines, triggers and routine runs over one :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- routines -------------------------------------------------------------------------

    def create_routine(self, values: Mapping[str, Any], *, now: datetime) -> Routine:
        """Insert a routine from validated column ``values`` (see the routine service).

        Raises:
            NotFoundError: the workspace does not exist.
        """
        routine_id = new_id()
        with self._db.write() as conn:
            workspace_row(conn, values["workspace_id"])
            conn.execute(
                sa.insert(routines).values(id=routine_id, created_at=now, updated_at=now, **values)
            )
            return routine_from_row(routine_row(conn, routine_id))

    def get_routine(self, routine_id: str) -> Routine:
        """The routine ``routine_id``.

        Raises:
            NotFoundError: no such routine (field ``routine_id``).
        """
        with self._db.read() as conn:
            return routine_from_row(routine_row(conn, routine_id))

    def list_routines(
        self, workspace_id: str, *, assignee_agent_id: str | None = None
    ) -> list[Routine]:
        """A workspace's routines, oldest first; optionally only one assignee's."""
        query = sa.select(routines).where(routines.c.workspace_id == workspace_id)
        if assignee_agent_id is not None:
            query = query.where(routines.c.assignee_agent_id == assignee_agent_id)
        with self._db.read() as conn:
            rows = all_rows(conn, query.order_by(routines.c.created_at, routines.c.id))
        return [routine_from_row(row) for row in rows]

    def update_routine(
        self,
        routine_id: str,
        values: Mapping[str, Any],
        *,
        now: datetime,
        next_runs_on_resume: Mapping[str, datetime] | None = None,
    ) -> Routine:
        """Apply validated column ``values`` to a routine.

        ``next_runs_on_resume`` maps schedule trigger ids to their next tick; they are set
        in the same transaction when this change makes a paused routine active again, so
        no cron pass can see the routine active with the ticks it missed while paused.

        Raises:
            NotFoundError: no such routine.
        """
        with self._db.write() as conn:
            before = routine_row(conn, routine_id, lock=True)
            if values:
                conn.execute(
                    sa.update(routines)
                    .where(routines.c.id == routine_id)
                    .values(updated_at=now, **values)
                )
            after = routine_row(conn, routine_id)
            active = RoutineStatus.ACTIVE.value
            if next_runs_on_resume and before["status"] != active == after["status"]:
                for trigger_id, next_run_at in next_runs_on_resume.items():
                    conn.execute(
                        sa.update(routine_triggers)
                        .where(
                            routine_triggers.c.id == trigger_id,
                            routine_triggers.c.routine_id == routine_id,
                        )
                        .values(next_run_at=next_run_at)
                    )
            return routine_from_row(after)

    def delete_routine(self, routine_id: str) -> None:
        """Delete a routine with its triggers and routine runs (tasks it created stay).

        Raises:
            NotFoundError: no such routine.
        """
        with self._db.write() as conn:
            routine_row(conn, routine_id)
            conn.execute(sa.delete(routine_runs).where(routine_runs.c.routine_id == routine_id))
            conn.execute(
                sa.delete(routine_triggers).where(routine_triggers.c.routine_id == routine_id)
            )
            conn.execute(sa.delete(routines).where(routines.c.id == routine_id))

    # -- triggers -------------------------------------------------------------------------

    def create_trigger(
        self, routine_id: str, values: Mapping[str, Any], *, now: datetime
    ) -> RoutineTrigger:
        """Insert a trigger of ``routine_id`` from validated column ``values``.

        Raises:
            NotFoundError: no such routine.
        """
        trigger_id = new_id()
        with self._db.write() as conn:
            routine_row(conn, routine_id)
            conn.execute(
                sa.insert(routine_triggers).values(
                    id=trigger_id, routine_id=routine_id, created_at=now, **values
                )
            )
            return trigger_from_row(trigger_row(conn, trigger_id))

    def get_trigger(self, trigger_id: str) -> RoutineTrigger:
        """The trigger ``trigger_id``.

        Raises:
            NotFoundError: no such trigger (field ``trigger_id``).
        """
        with self._db.read() as conn:
            return trigger_from_row(trigger_row(conn, trigger_id))

    def webhook_trigger(self, public_id: str) -> tuple[RoutineTrigger, str | None] | None:
        """The webhook trigger with ``public_id`` and its secret, or ``None``."""
        query = sa.select(routine_triggers).where(
            routine_triggers.c.public_id == public_id,
            routine_triggers.c.kind == TriggerKind.WEBHOOK.value,
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
        return (trigger_from_row(row), row["secret"]) if row else None

    def list_triggers(self, routine_id: str) -> list[RoutineTrigger]:
        """The triggers of a routine, oldest first."""
        query = (
            sa.select(routine_triggers)
            .where(routine_triggers.c.routine_id == routine_id)
            .order_by(routine_triggers.c.created_at, routine_triggers.c.id)
        )
        with self._db.read() as conn:
            return [trigger_from_row(row) for row in all_rows(conn, query)]

    def update_trigger(self, trigger_id: str, values: Mapping[str, Any]) -> RoutineTrigger:
        """Apply validated column ``values`` to a trigger.

        Raises:
            NotFoundError: no such trigger.
        """
        with self._db.write() as conn:
            trigger_row(conn, trigger_id)
            if values:
                conn.execute(
                    sa.update(routine_triggers)
                    .where(routine_triggers.c.id == trigger_id)
                    .values(**values)
                )
            return trigger_from_row(trigger_row(conn, trigger_id))

    def delete_trigger(self, trigger_id: str) -> None:
        """Delete a trigger (its routine runs stay).

        Raises:
            NotFoundError: no such trigger.
        """
        with self._db.write() as conn:
            trigger_row(conn, trigger_id)
            conn.execute(sa.delete(routine_triggers).where(routine_triggers.c.id == trigger_id))

    # -- cron -----------------------------------------------------------------------------

    def _due_query(self) -> sa.Select[Any]:
        return (
            sa.select(routine_triggers)
            .join(routines, routines.c.id == routine_triggers.c.routine_id)
            .where(
                routine_triggers.c.enabled.is_(True),
                routine_triggers.c.kind == TriggerKind.SCHEDULE.value,
                routine_triggers.c.next_run_at.is_not(None),
                routines.c.status == RoutineStatus.ACTIVE.value,
            )
        )

    def due_triggers(self, now: datetime, *, limit: int = 100) -> list[RoutineTrigger]:
        """Enabled schedule triggers of active routines with ``next_run_at <= now``."""
        query = (
            self._due_query()
            .where(routine_triggers.c.next_run_at <= now)
            .order_by(routine_triggers.c.next_run_at, routine_triggers.c.id)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [trigger_from_row(row) for row in all_rows(conn, query)]

    def routines_to_fire(self, routine_ids: Collection[str]) -> RoutinesToFire:
        """The routines of due ticks, their assignees' existence and coalescing holds.

        One query for a batch of ticks. Call it inside
        :meth:`~office_scheduler.store.engine.Database.transaction`: on PostgreSQL the
        routines' rows stay locked until that transaction ends, so :meth:`gate` may be told
        (``fresh``) that a run's routine is held. A routine missing from the result did not
        exist (:meth:`RoutinesToFire.get` raises ``NotFoundError``).
        """
        with self._db.write() as conn:
            return routines_to_fire(conn, routine_ids)

    def next_due_at(self) -> datetime | None:
        """The earliest ``next_run_at`` of an enabled schedule trigger of an active routine."""
        query = self._due_query().with_only_columns(sa.func.min(routine_triggers.c.next_run_at))
        with self._db.read() as conn:
            value: datetime | None = conn.execute(query).scalar()
        return value

    def unscheduled_triggers(self, *, limit: int = 100) -> list[RoutineTrigger]:
        """Enabled schedule triggers of active routines that have no ``next_run_at`` yet.

        Triggers installed without the cron maths (the coordinator heartbeat of a new agent)
        start this way; the cron loop gives them their first tick.
        """
        query = (
            sa.select(routine_triggers)
            .join(routines, routines.c.id == routine_triggers.c.routine_id)
            .where(
                routine_triggers.c.enabled.is_(True),
                routine_triggers.c.kind == TriggerKind.SCHEDULE.value,
                routine_triggers.c.next_run_at.is_(None),
                routines.c.status == RoutineStatus.ACTIVE.value,
            )
            .limit(limit)
        )
        with self._db.read() as conn:
            return [trigger_from_row(row) for row in all_rows(conn, query)]

    def set_first_tick(self, trigger_id: str, next_run_at: datetime | None) -> bool:
        """Give an unscheduled trigger its first tick; false when it already has one."""
        with self._db.write() as conn:
            changed = conn.execute(
                sa.update(routine_triggers)
                .where(
                    routine_triggers.c.id == trigger_id,
                    routine_triggers.c.next_run_at.is_(None),
                )
                .values(next_run_at=next_run_at)
            ).rowcount
        return bool(changed == 1)


def install_heartbeat(conn: Connection, *, workspace_id: str, agent_id: str, now: datetime) -> None:
    """Install the "Coordinator heartbeat" routine for a new coordinator agent.

    Runs inside the agent's creating transaction, so a coordinator never exists without
    it (a brand-new agent cannot already have one). The trigger starts without
    ``next_run_at``; the cron loop gives it its first tick.
    """
    routine_id = new_id()
    conn.execute(
        sa.insert(routines).values(
            id=routine_id,
            workspace_id=workspace_id,
            name=HEARTBEAT_NAME,
            description=HEARTBEAT_DESCRIPTION,
            assignee_agent_id=agent_id,
            status=RoutineStatus.ACTIVE.value,
            concurrency_policy=ConcurrencyPolicy.COALESCE_IF_ACTIVE.value,
            catch_up_policy=CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP.value,
            catch_up_max=25,
            task_template=None,
            variables=[],
            created_at=now,
            updated_at=now,
        )
    )
    conn.execute(
        sa.insert(routine_triggers).values(
            id=new_id(),
            routine_id=routine_id,
            kind=TriggerKind.SCHEDULE.value,
            enabled=True,
            cron_expression=HEARTBEAT_CRON,
            timezone=HEARTBEAT_TIMEZONE,
            next_run_at=None,
            created_at=now,
        )
    )


def heartbeat_follows_role(
    conn: Connection, *, workspace_id: str, agent_id: str, coordinator: bool, now: datetime
) -> None:
    """Keep an agent's "Coordinator heartbeat" in step with a change of its role.

    Inside the transaction that changes the role. A promotion to a coordinator role
    installs the heartbeat (:func:`install_heartbeat`) unless the agent has one, and makes
    a paused one active again with its schedule triggers' ``next_run_at`` cleared, so the
    cron loop gives them a first tick from now instead of catching up the ticks missed
    meanwhile. A demotion pauses the agent's active heartbeat: a worker is not woken every
    five minutes. Archived heartbeats are left alone (someone retired them on purpose).
    """
    mine = sa.and_(
        routines.c.workspace_id == workspace_id,
        routines.c.assignee_agent_id == agent_id,
        routines.c.name == HEARTBEAT_NAME,
    )
    if not coordinator:
        conn.execute(
            sa.update(routines)
            .where(mine, routines.c.status == RoutineStatus.ACTIVE.value)
            .values(status=RoutineStatus.PAUSED.value, updated_at=now)
        )
        return
    found = conn.execute(sa.select(routines.c.id, routines.c.status).where(mine)).all()
    if not found:
        install_heartbeat(conn, workspace_id=workspace_id, agent_id=agent_id, now=now)
        return
    paused = [row.id for row in found if row.status == RoutineStatus.PAUSED.value]
    if paused:
        conn.execute(
            sa.update(routines)
            .where(routines.c.id.in_(paused))
            .values(status=RoutineStatus.ACTIVE.value, updated_at=now)
        )
        conn.execute(
            sa.update(routine_triggers)
            .where(
                routine_triggers.c.routine_id.in_(paused),
                routine_triggers.c.kind == TriggerKind.SCHEDULE.value,
            )
            .values(next_run_at=None)
        )
