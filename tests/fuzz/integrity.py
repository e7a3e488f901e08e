"""Database integrity checks run after the API fuzz (importable as ``integrity``).

Every declared foreign key must point at a row; the soft references the schema keeps
without a constraint (run ids on wakeup requests and routine runs, task ids on runs) too;
and request/run statuses must agree (DESIGN §4: no request stays ``queued``, a claimed or
coalesced request names an existing run, every run was created by a request).
"""

from __future__ import annotations

import sqlalchemy as sa

from office_scheduler.domain.status import RunStatus, WakeupStatus
from office_scheduler.store.engine import Database
from office_scheduler.store.schema import metadata, routine_runs, runs, tasks, wakeup_requests

#: Columns that reference another table's id without a foreign key, and which must resolve.
SOFT_REFERENCES: tuple[tuple[sa.Table, str, sa.Table], ...] = (
    (wakeup_requests, "run_id", runs),
    (runs, "task_id", tasks),
    (routine_runs, "linked_run_id", runs),
    (routine_runs, "coalesced_into_run_id", runs),
    (routine_runs, "linked_task_id", tasks),
)


def _dangling(conn: sa.Connection, table: sa.Table, column: str, target: sa.Table) -> list[object]:
    """Values of ``table.column`` (not null) that no row of ``target`` has as its id."""
    source = table.c[column]
    missing = sa.select(source).where(
        source.is_not(None), ~sa.exists().where(target.c.id == source)
    )
    return [row[0] for row in conn.execute(missing)]


def integrity_problems(db: Database) -> list[str]:
    """Every integrity problem found, as readable lines (empty when the data is sound)."""
    problems: list[str] = []
    with db.read() as conn:
        for table in metadata.sorted_tables:
            for fk in table.foreign_keys:
                target = fk.column.table
                source = fk.parent
                missing = sa.select(source).where(
                    source.is_not(None), ~sa.exists().where(fk.column == source)
                )
                for (value,) in conn.execute(missing):
                    problems.append(f"{table.name}.{source.name}={value!r}: no {target.name} row")
        for table, column, target in SOFT_REFERENCES:
            for value in _dangling(conn, table, column, target):
                problems.append(f"{table.name}.{column}={value!r}: no {target.name} row")
        problems += _status_problems(conn)
    return problems


def _status_problems(conn: sa.Connection) -> list[str]:
    problems: list[str] = []
    request_states = {status.value for status in WakeupStatus}
    run_states = {status.value for status in RunStatus}
    for request_id, status, run_id in conn.execute(
        sa.select(wakeup_requests.c.id, wakeup_requests.c.status, wakeup_requests.c.run_id)
    ):
        if status not in request_states or status == WakeupStatus.QUEUED.value:
            problems.append(f"wakeup request {request_id} is {status!r} after intake")
        bound = (WakeupStatus.CLAIMED.value, WakeupStatus.COALESCED.value)
        if status in bound and run_id is None:
            problems.append(f"wakeup request {request_id} is {status} without a run")
    for run_id, status, agent_workspace, workspace in conn.execute(
        sa.select(
            runs.c.id, runs.c.status, sa.literal_column("agents.workspace_id"), runs.c.workspace_id
        ).select_from(runs.join(metadata.tables["agents"]))
    ):
        if status not in run_states:
            problems.append(f"run {run_id} has unknown status {status!r}")
        if agent_workspace != workspace:
            problems.append(f"run {run_id} is in {workspace} but its agent in {agent_workspace}")
    unrequested = sa.select(runs.c.id).where(
        ~sa.exists().where(wakeup_requests.c.run_id == runs.c.id)
    )
    problems += [f"run {run_id} has no wakeup request" for (run_id,) in conn.execute(unrequested)]
    return problems
