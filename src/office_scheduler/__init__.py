"""Office Scheduler: wakes an office of AI coding agents and runs every wake exactly once."""

from __future__ import annotations

__version__ = "0.1.0"
