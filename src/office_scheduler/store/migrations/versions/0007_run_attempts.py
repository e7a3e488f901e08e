"""Every launch of a run is an attempt; a run token belongs to one attempt

Revision ID: 0007
Revises: 0008
Create Date: 2026-12-03 19:30:00

``runs.attempt`` counts the launches of a run (0 until its first session starts);
``api_tokens.attempt`` is the attempt a run token was minted for, so a token of an attempt
that is over (the run was requeued, its lease expired, or it ended) is refused even when
the run runs again. Run tokens minted before this revision get attempt 0, which no launch
after it has: they stop working with their run's current session.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD/DROP COLUMN (SQLite has both since 3.35): no table rebuild on either database.
    op.add_column("runs", sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("api_tokens", sa.Column("attempt", sa.Integer(), nullable=True))
    tokens = sa.table("api_tokens", sa.column("run_id"), sa.column("attempt"))
    op.execute(sa.update(tokens).where(tokens.c.run_id.is_not(None)).values(attempt=0))


def downgrade() -> None:
    op.drop_column("api_tokens", "attempt")
    op.drop_column("runs", "attempt")
