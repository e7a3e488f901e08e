"""Settings of one scheduler process, parsed once by the CLI and passed down."""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path


def default_home() -> Path:
    """``~/.office``; the CLI passes ``$OFFICE_HOME`` instead when it is set."""
    return Path.home() / ".office"


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Process-wide settings.

    Attributes:
        home: data directory (database, logs, agent working directories).
        database_url: SQLAlchemy URL; default ``sqlite:///<home>/office.db``.
        api_url: base URL agents use to call back (``OFFICE_API_URL`` in their environment).
        node_id: this process's identity in leases.
        safety_tick: how often the runs loop looks at the queue without being poked.
        lease: how long a claim stays valid without renewal.
        max_parallel_runs: pipelines run concurrently by this process.
        shutdown_grace: how long running sessions get to finish on shutdown.
        maintenance_interval: period of the maintenance loop.
        agent_base_env: the environment agent processes may copy variables from
            (each executor's ``pass_env`` lists which).
        max_output_events: output lines stored per run in ``run_events``.
    """

    home: Path = field(default_factory=default_home)
    database_url: str | None = None
    api_url: str = "http://127.0.0.1:8700"
    node_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}")
    safety_tick: timedelta = timedelta(seconds=5)
    lease: timedelta = timedelta(seconds=60)
    max_parallel_runs: int = 8
    shutdown_grace: timedelta = timedelta(seconds=10)
    maintenance_interval: timedelta = timedelta(seconds=30)
    agent_base_env: dict[str, str] = field(default_factory=dict)
    max_output_events: int = 2000

    @property
    def resolved_database_url(self) -> str:
        """``database_url`` or the SQLite file in ``home``."""
        return self.database_url or f"sqlite:///{self.home / 'office.db'}"
