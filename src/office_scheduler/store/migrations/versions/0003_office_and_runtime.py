"""office events, approvals, budgets, inbox, activity actors, channel comments, prompt kind

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 13:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from office_scheduler.store import types

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("reports_to", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("paused_reason", sa.String(length=60), nullable=True))
        batch.add_column(sa.Column("permission_policy", types.json_type(), nullable=True))
        batch.create_foreign_key(
            "fk_agents_reports_to_agents", "agents", ["reports_to"], ["id"], ondelete="SET NULL"
        )
    with op.batch_alter_table("comments") as batch:
        batch.add_column(sa.Column("channel", sa.String(length=60), nullable=True))
        batch.add_column(sa.Column("external_author", sa.String(length=200), nullable=True))
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=40), nullable=False, server_default="generic")
        )
        batch.add_column(sa.Column("decided_by", sa.String(length=200), nullable=True))
        batch.create_index("ix_approvals_workspace_id_status", ["workspace_id", "status"])
        batch.create_index("ix_approvals_task_id", ["task_id"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("prompt_kind", sa.String(length=20), nullable=True))
    with op.batch_alter_table("activity_log") as batch:
        batch.add_column(
            sa.Column("actor", sa.String(length=200), nullable=False, server_default="system")
        )
        batch.create_index("ix_activity_log_workspace_id_kind_at", ["workspace_id", "kind", "at"])
    with op.batch_alter_table("inbox_items") as batch:
        batch.add_column(sa.Column("agent_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("task_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("approval_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("dedupe_key", sa.String(length=300), nullable=True))
        batch.create_unique_constraint("uq_inbox_items_dedupe_key", ["dedupe_key"])
    with op.batch_alter_table("budget_policies") as batch:
        batch.add_column(sa.Column("alerted_period", sa.String(length=20), nullable=True))
        batch.add_column(sa.Column("exceeded_period", sa.String(length=20), nullable=True))
        batch.add_column(sa.Column("updated_at", types.UTCDateTime(), nullable=True))
        batch.create_unique_constraint(
            "uq_budget_policies_workspace_id_scope_kind_scope_id",
            ["workspace_id", "scope_kind", "scope_id"],
        )
    op.execute("UPDATE budget_policies SET updated_at = created_at")
    with op.batch_alter_table("budget_policies") as batch:
        batch.alter_column("updated_at", existing_type=types.UTCDateTime(), nullable=False)
    with op.batch_alter_table("cost_events") as batch:
        batch.add_column(sa.Column("model", sa.String(length=200), nullable=True))
        batch.add_column(
            sa.Column("priced", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch.create_index("ix_cost_events_workspace_id_at", ["workspace_id", "at"])
        batch.create_index("ix_cost_events_project_id_at", ["project_id", "at"])


def downgrade() -> None:
    with op.batch_alter_table("cost_events") as batch:
        batch.drop_index("ix_cost_events_project_id_at")
        batch.drop_index("ix_cost_events_workspace_id_at")
        batch.drop_column("priced")
        batch.drop_column("model")
    with op.batch_alter_table("budget_policies") as batch:
        batch.drop_constraint("uq_budget_policies_workspace_id_scope_kind_scope_id", type_="unique")
        batch.drop_column("updated_at")
        batch.drop_column("exceeded_period")
        batch.drop_column("alerted_period")
    with op.batch_alter_table("inbox_items") as batch:
        batch.drop_constraint("uq_inbox_items_dedupe_key", type_="unique")
        batch.drop_column("dedupe_key")
        batch.drop_column("approval_id")
        batch.drop_column("task_id")
        batch.drop_column("agent_id")
    with op.batch_alter_table("activity_log") as batch:
        batch.drop_index("ix_activity_log_workspace_id_kind_at")
        batch.drop_column("actor")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("prompt_kind")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_index("ix_approvals_task_id")
        batch.drop_index("ix_approvals_workspace_id_status")
        batch.drop_column("decided_by")
        batch.drop_column("kind")
    with op.batch_alter_table("comments") as batch:
        batch.drop_column("external_author")
        batch.drop_column("channel")
    with op.batch_alter_table("agents") as batch:
        batch.drop_constraint("fk_agents_reports_to_agents", type_="foreignkey")
        batch.drop_column("permission_policy")
        batch.drop_column("paused_reason")
        batch.drop_column("reports_to")
