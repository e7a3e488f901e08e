"""Shared fixtures of the acceptance suite."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _restore_logging(restore_logging: None) -> None:
    """Many acceptance tests run the CLI in process, which configures logging."""
