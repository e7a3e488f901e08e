"""Maintenance leadership: at most one process at a time runs the maintenance passes.

On PostgreSQL leadership is the lease of :mod:`office_scheduler.store.leader_lease`: a row
naming the holder, its epoch and when the lease expires. The holder renews it every third
of ``leader_ttl``; a node whose renewal fails or comes too late (the process was frozen by
``SIGSTOP``, a VM pause or a long GC; its clock jumped) stops acting as leader *before* its
lease ends: :meth:`Leadership.term` is ``None`` from ``expires_at - margin`` on. Any node
takes an expired lease with the next epoch, and every maintenance write is fenced by the
epoch it acts under, so a leader that wakes after a freeze cannot act on stale authority.

A process that dies hands leadership over when its lease expires (at most ``leader_ttl``
later); one that stops cleanly releases the lease, and the next node takes it at once.

On SQLite a single scheduler process owns the file (``Service`` takes a file lock), so that
process is always the leader and no lease is used.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import structlog

from office_scheduler.clock import Clock
from office_scheduler.store.engine import Database
from office_scheduler.store.leader_lease import LeaderLease, LeaderTerm, LeaseStore
from office_scheduler.store.reconnect import retry_once_if_connection_lost

log = structlog.get_logger(__name__)

#: The share of the TTL before the lease's end at which the holder stops acting as leader.
STOP_MARGIN = 0.1


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


class Leadership:
    """Whether this process holds maintenance leadership; thread-safe, blocking calls.

    Args:
        db: the database.
        node_id: this process's identity (the lease's holder when it leads).
        clock: time source of the lease instants.
        ttl: how long a lease lasts without renewal (``OFFICE_LEADER_TTL_S``).
        use_lease: whether leadership is the lease; default: on PostgreSQL only (tests
            exercise the lease on SQLite too).
    """

    def __init__(
        self,
        db: Database,
        *,
        node_id: str,
        clock: Clock,
        ttl: timedelta = timedelta(seconds=30),
        use_lease: bool | None = None,
    ) -> None:
        self._db = db
        self._leases = LeaseStore(db)
        self._node_id = node_id
        self._clock = clock
        self._ttl = ttl
        self._mutex = threading.Lock()  # guards the fields below; never held across I/O
        self._calls = threading.Lock()  # one database call at a time (ensure, release)
        self._uses_lease = db.dialect == "postgresql" if use_lease is None else use_lease
        #: The lease this node holds (``None`` when it does not lead).
        self._held: LeaderLease | None = None
        #: The lease as last seen in the database, whoever holds it.
        self._observed: LeaderLease | None = None

    @property
    def uses_lease(self) -> bool:
        """False on SQLite, where the file lock makes this process the only leader."""
        return self._uses_lease

    @property
    def ttl(self) -> timedelta:
        """The lease's time to live."""
        return self._ttl

    @property
    def node_id(self) -> str:
        """This process's node id."""
        return self._node_id

    @property
    def held(self) -> bool:
        """Whether this process may act as leader now (no database access)."""
        return not self._uses_lease or self.term() is not None

    def deadline(self) -> datetime | None:
        """When this node stops acting as leader unless it renews (``None``: not leading)."""
        held = self._held
        if held is None:
            return None
        return held.expires_at - self._ttl * STOP_MARGIN

    def term(self) -> LeaderTerm | None:
        """The term to name in maintenance writes, while this node may act as leader.

        ``None`` when it does not lead, or when its own deadline (``expires_at`` less
        ``STOP_MARGIN`` of the TTL) has passed without a renewal: then leadership is
        dropped here, with a log line saying when and why. On SQLite: a fixed epoch-0
        term that is never checked.
        """
        if not self._uses_lease:
            return LeaderTerm(holder=self._node_id, epoch=0)
        with self._mutex:
            held = self._held
            if held is None:
                return None
            now = self._clock.now()
            deadline = held.expires_at - self._ttl * STOP_MARGIN
            if now >= deadline:
                self._lose(
                    "the lease was not renewed in time (the process was frozen, its clock "
                    "jumped, or the database did not answer)",
                    now=now,
                )
                return None
            return held.term

    def ensure(self) -> bool:
        """Renew the lease this node holds, or take it if it is free; returns whether held.

        Database errors are logged, never raised: a holder keeps acting until its own
        deadline (see :meth:`term`) and the next call tries again.
        """
        if not self._uses_lease:
            return True
        # The database call holds only ``_calls``: ``term()`` and ``status()`` run on the
        # event loop and must never wait for it.
        with self._calls:
            with self._mutex:
                now = self._clock.now()
                held = self._held
            try:
                # A retry after a lost answer renews what the first attempt took.
                lease, ours = retry_once_if_connection_lost(
                    lambda _retry: self._leases.acquire(
                        self._node_id,
                        now=now,
                        ttl=self._ttl,
                        epoch=None if held is None else held.epoch,
                    ),
                    call="Leadership.ensure",
                )
            except Exception as exc:  # any database failure: try again next time
                log.warning("maintenance_leadership_unavailable", error=repr(exc))
                return self.term() is not None
            with self._mutex:
                return self._settle(lease, ours, held, now)

    def _settle(
        self, lease: LeaderLease, ours: bool, held: LeaderLease | None, now: datetime
    ) -> bool:
        """Record the outcome of :meth:`ensure` (under ``_mutex``)."""
        self._observed = lease
        if ours:
            if held is None or held.epoch != lease.epoch:
                log.info(
                    "maintenance_leadership_taken",
                    node_id=self._node_id,
                    epoch=lease.epoch,
                    expires_at=_iso(lease.expires_at),
                    previous_epoch=None if held is None else held.epoch,
                )
            self._held = lease
            return True
        if self._held is not None:
            self._lose(f"{lease.holder} holds the lease now (epoch {lease.epoch})", now=now)
        return False

    def fenced(self, reason: str) -> None:
        """Drop leadership because a fenced write was refused (``reason`` is logged)."""
        with self._mutex:
            if self._held is not None:
                self._lose(reason, now=self._clock.now())

    def _lose(self, reason: str, *, now: datetime) -> None:
        held = self._held
        assert held is not None
        self._held = None
        log.warning(
            "maintenance_leadership_lost",
            node_id=self._node_id,
            epoch=held.epoch,
            lost_at=_iso(now),
            lease_expires_at=_iso(held.expires_at),
            last_renewed_at=_iso(held.renewed_at),
            reason=reason,
        )

    def release(self) -> None:
        """Give leadership up so another node takes it at once (idempotent)."""
        if not self._uses_lease:
            return
        with self._calls:
            with self._mutex:
                held, self._held = self._held, None
            if held is None:
                return
            try:
                self._leases.release(held.term, now=self._clock.now())
            except Exception as exc:  # the lease then simply expires
                log.warning("maintenance_leadership_release_failed", error=repr(exc))
                return
            log.info("maintenance_leadership_released", node_id=self._node_id, epoch=held.epoch)

    def status(self) -> dict[str, Any]:
        """The leadership as this node last saw it (no database access), for health.

        Returns:
            ``{"node_id", "epoch", "expires_at", "this_node"}``: the leader's node id, its
            epoch and lease expiry (ISO 8601 UTC) as last read from the lease row (each
            node reads it every ``min(ttl / 3, maintenance interval)``), and whether this
            node acts as leader. On SQLite: this node, ``epoch`` and ``expires_at``
            ``None`` (the file lock, not a lease, makes it the leader). Before the row
            was first read, ``node_id`` is ``None``.
        """
        if not self._uses_lease:
            return {
                "node_id": self._node_id,
                "epoch": None,
                "expires_at": None,
                "this_node": True,
            }
        seen = self._held or self._observed
        return {
            "node_id": None if seen is None else seen.holder,
            "epoch": None if seen is None else seen.epoch,
            "expires_at": None if seen is None else _iso(seen.expires_at),
            "this_node": self.term() is not None,
        }
