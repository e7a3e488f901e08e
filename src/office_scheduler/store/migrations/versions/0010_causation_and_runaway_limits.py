"""Causation of wakes and runs, held wakes, runaway limits (DESIGN §15)

Revision ID: 0010
Revises: 0007
Create Date: 2026-12-03 19:30:00

Every wakeup request and run records the run that caused it, its causation depth and
whether a person is at the root of its chain. Workspaces and agents keep their runaway
limits (a JSON object of the limits set; NULL: the defaults). The indexes serve intake's
limit checks (self-wakes per hour, runs per hour, routine runs per day) and the held
wakes' lookups.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0010"
down_revision = "0007"
branch_labels = None
depends_on = None

HELD = sa.text("status = 'held'")


def _causation() -> list[sa.Column[object]]:
    return [
        sa.Column("caused_by_run_id", sa.BigInteger(), nullable=True),
        sa.Column("causation_depth", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("human_rooted", sa.Boolean(), nullable=False, server_default=sa.false()),
    ]


def upgrade() -> None:
    # Plain ADD/DROP COLUMN on both databases: a batch would copy ``agents`` on SQLite,
    # whose expression index (``ix_agents_claimable_at``) cannot be reflected.
    for table in ("wakeup_requests", "runs"):
        for column in _causation():
            op.add_column(table, column)
    for table in ("workspace_settings", "agents"):
        op.add_column(table, sa.Column("runaway_limits", types.json_type(), nullable=True))
    op.create_index(
        "ix_wakeup_requests_agent_source_requested",
        "wakeup_requests",
        ["agent_id", "source", "requested_at"],
    )
    op.create_index(
        "ix_wakeup_requests_held",
        "wakeup_requests",
        ["workspace_id", "agent_id"],
        sqlite_where=HELD,
        postgresql_where=HELD,
    )
    op.create_index("ix_runs_agent_requested", "runs", ["agent_id", "requested_at"])
    op.create_index("ix_routine_runs_routine_created", "routine_runs", ["routine_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_routine_runs_routine_created", table_name="routine_runs")
    op.drop_index("ix_runs_agent_requested", table_name="runs")
    op.drop_index("ix_wakeup_requests_held", table_name="wakeup_requests")
    op.drop_index("ix_wakeup_requests_agent_source_requested", table_name="wakeup_requests")
    bind = op.get_bind()
    # Held and released requests have no status before this revision: they end cancelled.
    bind.execute(
        sa.text(
            "UPDATE wakeup_requests SET status = 'cancelled' WHERE status IN ('held', 'released')"
        )
    )
    for table in ("workspace_settings", "agents"):
        op.drop_column(table, "runaway_limits")
    for table in ("wakeup_requests", "runs"):
        for name in ("human_rooted", "causation_depth", "caused_by_run_id"):
            op.drop_column(table, name)
