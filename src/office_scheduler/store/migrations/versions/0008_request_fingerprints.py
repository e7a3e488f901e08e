"""Request fingerprints beside idempotency keys; an agent's expected run cost

Revision ID: 0008
Revises: 0009
Create Date: 2026-12-03 19:30:00

``wakeup_requests.request_fingerprint`` and ``routine_runs.request_fingerprint`` hold a
SHA-256 (hex) of the request a caller's ``Idempotency-Key`` came with, so that the key
reused with another body is refused (HTTP 422) instead of answered as a duplicate. Rows
written before this revision have none and keep the old behaviour (a silent duplicate).

``agents.expected_run_cents`` is what one run of the agent is expected to cost, in cents,
for the budget pre-launch check when the agent has too few priced runs to tell.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0009"
branch_labels = None
depends_on = None

FINGERPRINTED = ("wakeup_requests", "routine_runs")


def upgrade() -> None:
    for table in FINGERPRINTED:
        op.add_column(table, sa.Column("request_fingerprint", sa.String(64)))
    op.add_column("agents", sa.Column("expected_run_cents", sa.Integer()))


def _drop(table: str, column: str) -> None:
    if op.get_bind().dialect.name == "sqlite":
        # SQLite (3.35+) drops a plain column in place; a batch copy of ``agents`` would
        # have to reflect its expression index, which SQLite cannot.
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    else:
        op.drop_column(table, column)


def downgrade() -> None:
    _drop("agents", "expected_run_cents")
    for table in FINGERPRINTED:
        _drop(table, "request_fingerprint")
