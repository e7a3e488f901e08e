"""Executors launch one agent session per run: ``command`` (CLI subprocess) and ``acp``."""

from __future__ import annotations
