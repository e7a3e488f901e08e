"""Dashboard sessions: the cookie holds a random id, not the admin token

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 19:50:00

One row per dashboard sign-in, keyed by the SHA-256 of the session id in the browser's
cookie, tied to the admin token that signed in (deleted with it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("session_hash", sa.String(128), primary_key=True),
        sa.Column(
            "token_id",
            sa.String(40),
            sa.ForeignKey("api_tokens.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", types.UTCDateTime(), nullable=False),
        sa.Column("expires_at", types.UTCDateTime(), nullable=False),
        sa.Column("revoked_at", types.UTCDateTime(), nullable=True),
    )
    op.create_index("ix_dashboard_sessions_token", "dashboard_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_token", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
