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
        leader_ttl: how long the maintenance leader's lease lasts without renewal
            (PostgreSQL; renewed every third of it). A frozen or dead leader is replaced
            within about this long; too short, and a slow database costs leadership.
        agent_base_env: the environment agent processes may copy variables from
            (each executor's ``pass_env`` lists which).
        max_output_events: output lines stored per run in ``run_events``.
        max_run_failures: the failure of a run (counting from 1) that escalates instead of
            scheduling another retry (DESIGN §6: the 4th).
        retry_backoff: backoff before the retry after failure *n* (``retry_backoff[n - 1]``,
            the last entry for later failures), jittered ±25 %; ``None`` uses
            :data:`office_scheduler.retry.BACKOFF_TABLE` (2 min, 10 min, 30 min, 2 h).
        pause_after_escalations: an agent is paused when this many of its runs in a row
            escalated (no successful run in between, no edit of the agent since); 0 never
            pauses.
        recovery_batch_size: most tasks one recovery sweep dispatches.
        recovery_max_redispatches: how often the recovery sweep re-dispatches an Office
            task whose earlier runs all failed or were cancelled (a lost wake itself is
            always re-delivered once).
        db_pool_size: database connections this process keeps open (as many again may be
            opened under load); PostgreSQL also uses a dedicated connection per
            scheduler process (the wake listener).
        db_statement_timeout: PostgreSQL ``statement_timeout`` of every connection.
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
    leader_ttl: timedelta = timedelta(seconds=30)
    agent_base_env: dict[str, str] = field(default_factory=dict)
    max_output_events: int = 2000
    max_run_failures: int = 4
    retry_backoff: tuple[timedelta, ...] | None = None
    pause_after_escalations: int = 3
    recovery_batch_size: int = 50
    recovery_max_redispatches: int = 3
    db_pool_size: int = 5
    db_statement_timeout: timedelta = timedelta(seconds=30)

    @property
    def resolved_database_url(self) -> str:
        """``database_url`` or the SQLite file in ``home``."""
        return self.database_url or f"sqlite:///{self.home / 'office.db'}"
