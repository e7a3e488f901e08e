"""Idempotency keys of wakes and runs hold a caller's 500 characters plus their scope

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 12:00:00

A caller's key (up to 500 characters) is stored with its scope in front, e.g.
``user:<agent id>:`` (38 characters), so the columns need more than 500. Widening a
``varchar`` is a catalogue change on PostgreSQL (no table rewrite); SQLite does not enforce
lengths, so nothing changes there.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLES = ("wakeup_requests", "runs")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.alter_column(
            table, "idempotency_key", type_=sa.String(600), existing_type=sa.String(500)
        )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in TABLES:
        key = sa.table(table, sa.column("idempotency_key")).c.idempotency_key
        too_long = bind.execute(
            sa.select(sa.func.count()).where(sa.func.length(key) > 500)
        ).scalar_one()
        if too_long:
            raise RuntimeError(
                f"cannot downgrade below 0006: {too_long} row(s) of {table} have an "
                "idempotency key longer than 500 characters; shorten or delete them first"
            )
    for table in TABLES:
        op.alter_column(
            table, "idempotency_key", type_=sa.String(500), existing_type=sa.String(600)
        )
