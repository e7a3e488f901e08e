"""Agents remember the status the last config import gave them

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 19:30:00

An import must not undo a pause or stop that the system (budgets, escalations) or a
person made after the last import; comparing the current status with the one the import
last set tells the two apart. Existing agents start with NULL (unknown), which an import
treats as "not set by an import": it keeps their paused or stopped status.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both databases: a batch (copy-and-move) migration of ``agents`` on
# SQLite would drop its expression index (ix_agents_claimable_at) and cascade deletes.
def upgrade() -> None:
    op.add_column("agents", sa.Column("imported_status", sa.String(40), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE agents DROP COLUMN imported_status")
