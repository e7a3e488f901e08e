"""The loops: runs (claim → pipeline) and maintenance (lease recovery)."""

from __future__ import annotations
