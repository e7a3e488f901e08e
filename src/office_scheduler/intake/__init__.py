"""Intake: every wake enters here (idempotency, claim-time merge, promotion, coalescing hold)."""

from __future__ import annotations
