"""The routine of a due cron tick, read once inside the tick's write transaction.

One query gives the cron pass what dispatching the tick's runs needs besides the routine:
whether its assignee exists and its workspace's coalescing hold. The cron pass would
otherwise read the routine, the agent and the workspace settings once per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.routines import Routine
from office_scheduler.store.routine_rows import routine_from_row
from office_scheduler.store.schema import agents, routines, workspace_settings
from office_scheduler.store.sql import first_row


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


_ASSIGNEE_EXISTS = (
    sa.exists().where(agents.c.id == routines.c.assignee_agent_id).label("assignee_exists")
)
_WINDOW_SECONDS = (
    sa.select(workspace_settings.c.coalesce_window_s)
    .where(workspace_settings.c.workspace_id == routines.c.workspace_id)
    .scalar_subquery()
    .label("coalesce_window_s")
)
_ROUTINE_TO_FIRE = sa.select(routines, _ASSIGNEE_EXISTS, _WINDOW_SECONDS).where(
    routines.c.id == sa.bindparam("routine_id")
)
_LOCK_ROUTINE_TO_FIRE = _ROUTINE_TO_FIRE.with_for_update(of=routines)


def routine_to_fire(conn: Connection, routine_id: str) -> RoutineToFire:
    """Read (and on PostgreSQL lock ``FOR UPDATE``) the routine of a due tick, one query.

    Raises:
        NotFoundError: no such routine (field ``routine_id``).
    """
    query = _LOCK_ROUTINE_TO_FIRE if conn.dialect.name == "postgresql" else _ROUTINE_TO_FIRE
    row = first_row(conn, query, {"routine_id": routine_id})
    if row is None:
        raise NotFoundError(f"routine {routine_id} not found", field="routine_id")
    seconds = row["coalesce_window_s"]
    return RoutineToFire(
        routine=routine_from_row(row),
        assignee_exists=bool(row["assignee_exists"]),
        coalesce_window=(
            WorkspaceSettings().coalesce_window if seconds is None else timedelta(seconds=seconds)
        ),
    )
