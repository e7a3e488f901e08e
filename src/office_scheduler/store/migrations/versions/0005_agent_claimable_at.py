"""Claim walk by when each agent may next start a run (queue head or cooldown end)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 03:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: ``office_scheduler.store.schema.AGENT_CLAIMABLE_AT`` as SQL; the claim's ``WHERE`` and
#: ``ORDER BY`` render the same expression, which is how both databases match the index.
CLAIMABLE_AT = sa.text(
    "(CASE WHEN (cooldown_until > next_queued_at) THEN cooldown_until ELSE next_queued_at END)"
)


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_index("ix_agents_next_queued_at")
    op.create_index("ix_agents_claimable_at", "agents", [CLAIMABLE_AT, sa.text("id")])


def downgrade() -> None:
    op.drop_index("ix_agents_claimable_at", table_name="agents")
    with op.batch_alter_table("agents") as batch:
        batch.create_index("ix_agents_next_queued_at", ["next_queued_at", "id"])
