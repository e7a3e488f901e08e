"""Persistence: SQLAlchemy Core tables, Alembic migrations, one repository method per transaction.

No connection or transaction object leaves this package.
"""

from __future__ import annotations
