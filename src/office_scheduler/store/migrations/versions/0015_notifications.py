"""Outbound notification channels and their outbox; event filters of webhook triggers

Revision ID: 0015
Revises: 0006
Create Date: 2026-12-03 19:40:00

``notification_channels`` holds each workspace's receivers; ``notification_deliveries`` is
the durable outbox (one row per event and channel, written with the event). A webhook
trigger gains ``options``: the events a ``github`` trigger accepts, the channel task of a
``slack`` one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0015"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notification_channels",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column(
            "workspace_id",
            sa.String(length=40),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("events", types.json_type(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("created_at", types.UTCDateTime(), nullable=False),
        sa.Column("updated_at", types.UTCDateTime(), nullable=False),
        sa.UniqueConstraint("workspace_id", "name"),
    )
    op.create_table(
        "notification_deliveries",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column(
            "workspace_id",
            sa.String(length=40),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "channel_id",
            sa.String(length=40),
            sa.ForeignKey("notification_channels.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event", sa.String(length=60), nullable=False),
        sa.Column("payload", types.json_type(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_attempt_at", types.UTCDateTime(), nullable=True),
        sa.Column("claimed_until", types.UTCDateTime(), nullable=True),
        sa.Column("claimed_by", sa.String(length=200), nullable=True),
        sa.Column("give_up_at", types.UTCDateTime(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("created_at", types.UTCDateTime(), nullable=False),
        sa.Column("delivered_at", types.UTCDateTime(), nullable=True),
    )
    op.create_index(
        "ix_notification_deliveries_due",
        "notification_deliveries",
        ["status", "next_attempt_at"],
    )
    op.create_index(
        "ix_notification_deliveries_channel_id", "notification_deliveries", ["channel_id"]
    )
    # Plain ALTER TABLE on both databases: a batch copy on SQLite would reflect the agents
    # table, whose expression index SQLAlchemy cannot reflect.
    op.add_column("routine_triggers", sa.Column("options", types.json_type(), nullable=True))


def downgrade() -> None:
    op.drop_column("routine_triggers", "options")
    op.drop_index("ix_notification_deliveries_channel_id", table_name="notification_deliveries")
    op.drop_index("ix_notification_deliveries_due", table_name="notification_deliveries")
    op.drop_table("notification_deliveries")
    op.drop_table("notification_channels")
