"""The routines of due cron ticks, read inside the ticks' write transaction.

One query gives the cron pass what dispatching a batch's runs needs besides the routines:
whether each assignee exists and each workspace's coalescing hold. The cron pass would
otherwise read the routine, the agent and the workspace settings once per run.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.routines import Routine
from office_scheduler.store.office_workspaces import coalesce_window_of
from office_scheduler.store.routine_rows import routine_from_row
from office_scheduler.store.rows import Row
from office_scheduler.store.schema import agents, routines, workspace_settings
from office_scheduler.store.sql import all_rows


@dataclass(frozen=True, slots=True)
class RoutineToFire:
    """A routine as the transaction of one of its cron ticks holds it.

    Attributes:
        routine: the routine; on PostgreSQL its row stays locked until the transaction
            ends, so dispatches of the routine's runs are gated one at a time.
        assignee_exists: whether the routine's assignee agent exists (false without one).
        coalesce_window: the coalescing hold of the routine's workspace.
    """

    routine: Routine
    assignee_exists: bool
    coalesce_window: timedelta


class RoutinesToFire:
    """The rows :func:`routines_to_fire` read; each becomes a :class:`RoutineToFire` on demand.

    Converting one routine at a time keeps a malformed row the failure of its own tick,
    not of the whole batch.
    """

    def __init__(self, rows: dict[str, Row]) -> None:
        self._rows = rows

    def get(self, routine_id: str) -> RoutineToFire:
        """The routine ``routine_id`` as read.

        Raises:
            NotFoundError: it did not exist when read (field ``routine_id``).
        """
        row = self._rows.get(routine_id)
        if row is None:
            raise NotFoundError(f"routine {routine_id} not found", field="routine_id")
        return RoutineToFire(
            routine=routine_from_row(row),
            assignee_exists=bool(row["assignee_exists"]),
            coalesce_window=coalesce_window_of(row["coalesce_window_s"]),
        )


_ASSIGNEE_EXISTS = (
    sa.exists().where(agents.c.id == routines.c.assignee_agent_id).label("assignee_exists")
)
_WINDOW_SECONDS = (
    sa.select(workspace_settings.c.coalesce_window_s)
    .where(workspace_settings.c.workspace_id == routines.c.workspace_id)
    .scalar_subquery()
    .label("coalesce_window_s")
)
_ROUTINES_TO_FIRE = (
    sa.select(routines, _ASSIGNEE_EXISTS, _WINDOW_SECONDS)
    .where(routines.c.id.in_(sa.bindparam("routine_ids", expanding=True)))
    .order_by(routines.c.id)
)
#: Locked in the order of their ids, so two batches over the same routines cannot deadlock.
_LOCK_ROUTINES_TO_FIRE = _ROUTINES_TO_FIRE.with_for_update(of=routines)


def routines_to_fire(conn: Connection, routine_ids: Collection[str]) -> RoutinesToFire:
    """Read (and on PostgreSQL lock ``FOR UPDATE``) the routines of due ticks, one query."""
    query = _LOCK_ROUTINES_TO_FIRE if conn.dialect.name == "postgresql" else _ROUTINES_TO_FIRE
    rows = all_rows(conn, query, {"routine_ids": sorted(routine_ids)})
    return RoutinesToFire({row["id"]: row for row in rows})
