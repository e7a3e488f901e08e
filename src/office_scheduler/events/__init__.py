"""Event bus and the Office subscribers that turn task events into wakes."""

from __future__ import annotations
