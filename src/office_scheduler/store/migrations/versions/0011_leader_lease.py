"""Maintenance leadership is a lease in a table: holder, epoch, expiry

Revision ID: 0011
Revises: 0015
Create Date: 2026-12-03 19:30:00

One row per schema (``id`` = 1), taken and renewed by compare-and-set
(:mod:`office_scheduler.store.leader_lease`). The epoch grows on every take-over and fences
the maintenance writes of a leader that lost the lease.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0011"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leader_lease",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", types.UTCDateTime(), nullable=False),
        sa.Column("acquired_at", types.UTCDateTime(), nullable=False),
        sa.Column("renewed_at", types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leader_lease")),
        sa.CheckConstraint("id = 1", name=op.f("ck_leader_lease_single_row")),
    )


def downgrade() -> None:
    op.drop_table("leader_lease")
