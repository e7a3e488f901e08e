"""agents.next_queued_at (the head of each agent's queue) and a live-runs index, for the claim

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("next_queued_at", types.UTCDateTime(), nullable=True))
        batch.create_index("ix_agents_next_queued_at", ["next_queued_at", "id"])
    op.create_index(
        "ix_runs_live_agent",
        "runs",
        ["agent_id"],
        sqlite_where=sa.text("status IN ('claimed', 'running')"),
        postgresql_where=sa.text("status IN ('claimed', 'running')"),
    )
    op.execute(
        "UPDATE agents SET next_queued_at = (SELECT min(runs.not_before) FROM runs "
        "WHERE runs.agent_id = agents.id AND runs.status = 'queued')"
    )


def downgrade() -> None:
    op.drop_index("ix_runs_live_agent", table_name="runs")
    with op.batch_alter_table("agents") as batch:
        batch.drop_index("ix_agents_next_queued_at")
        batch.drop_column("next_queued_at")
