"""routine run idempotency keys and webhook replay guard

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 12:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("routine_runs") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=600), nullable=True))
        batch.add_column(sa.Column("delivery_signature", sa.String(length=128), nullable=True))
        batch.create_unique_constraint("uq_routine_runs_idempotency_key", ["idempotency_key"])
        batch.create_unique_constraint(
            "uq_routine_runs_trigger_id_delivery_signature", ["trigger_id", "delivery_signature"]
        )
        batch.create_index("ix_routine_runs_linked_task_id", ["linked_task_id"])
        batch.create_index("ix_routine_runs_linked_run_id", ["linked_run_id"])
        batch.create_index("ix_routine_runs_status_created_at", ["status", "created_at"])


def downgrade() -> None:
    with op.batch_alter_table("routine_runs") as batch:
        batch.drop_index("ix_routine_runs_status_created_at")
        batch.drop_index("ix_routine_runs_linked_run_id")
        batch.drop_index("ix_routine_runs_linked_task_id")
        batch.drop_constraint("uq_routine_runs_trigger_id_delivery_signature", type_="unique")
        batch.drop_constraint("uq_routine_runs_idempotency_key", type_="unique")
        batch.drop_column("delivery_signature")
        batch.drop_column("idempotency_key")
