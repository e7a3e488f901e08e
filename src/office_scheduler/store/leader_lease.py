"""The maintenance leader's lease: one row per schema, taken and renewed by compare-and-set.

The row names the ``holder`` (a node id), its ``epoch`` and when the lease ``expires_at``
(aware UTC, written from the holder's clock). Rules:

* the holder renews while its lease has not expired (same holder, same epoch);
* any node takes a lease that has expired (or was released), and the epoch grows by one
  on every take, so each term of leadership has its own number;
* a maintenance write runs inside a transaction that first checks, with the row locked
  (``FOR SHARE`` on PostgreSQL), that the writer's :class:`LeaderTerm` is still the
  current one (:meth:`LeaseStore.check_term`); otherwise :class:`LeaderFenced` is raised
  and the transaction rolls back. A take-over (an ``UPDATE`` of the row) therefore waits
  for fenced writes in progress, and every write after it is refused.

Node clocks are compared through ``expires_at``: they must agree to well within the TTL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.store.engine import Database
from office_scheduler.store.schema import leader_lease
from office_scheduler.store.sql import insert

#: The primary key of the one lease row.
LEASE_ROW = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderTerm:
    """The authority a maintenance write acts under: who leads, in which epoch."""

    holder: str
    epoch: int


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderLease:
    """The lease row as read or written.

    Attributes:
        holder: the node id of the leader (or of the last one, when expired).
        epoch: the term number; grows by one on every take.
        expires_at: end of the lease (aware UTC).
        acquired_at: when ``holder`` took it (aware UTC).
        renewed_at: the holder's last renewal (aware UTC).
    """

    holder: str
    epoch: int
    expires_at: datetime
    acquired_at: datetime
    renewed_at: datetime

    @property
    def term(self) -> LeaderTerm:
        """The term this lease stands for."""
        return LeaderTerm(holder=self.holder, epoch=self.epoch)

    def held_by(self, node_id: str, *, now: datetime) -> bool:
        """Whether ``node_id`` holds this lease at ``now``."""
        return self.holder == node_id and now < self.expires_at


class LeaderFenced(Exception):
    """A maintenance write named a term that is no longer the current one (rolled back).

    Attributes:
        term: the stale term the write named.
        current: the lease found, or ``None`` when there is no lease row.
    """

    def __init__(self, term: LeaderTerm, current: LeaderLease | None) -> None:
        now_held = "nobody" if current is None else f"{current.holder} (epoch {current.epoch})"
        super().__init__(
            f"maintenance write of {term.holder} under epoch {term.epoch} refused: "
            f"the lease is held by {now_held}"
        )
        self.term = term
        self.current = current


def _lease(row: Mapping[Any, Any] | None) -> LeaderLease | None:
    if row is None:
        return None
    return LeaderLease(
        holder=row["holder"],
        epoch=int(row["epoch"]),
        expires_at=row["expires_at"],
        acquired_at=row["acquired_at"],
        renewed_at=row["renewed_at"],
    )


_ROW = leader_lease.c.id == LEASE_ROW


class LeaseStore:
    """Reads and compare-and-set writes of the leader lease (each method one transaction).

    Args:
        db: the database (both dialects; SQLite deployments never contend for it).
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def current(self) -> LeaderLease | None:
        """The lease row, or ``None`` before any node ever took it."""
        with self._db.read() as conn:
            return _lease(conn.execute(sa.select(leader_lease).where(_ROW)).mappings().first())

    def acquire(
        self,
        node_id: str,
        *,
        now: datetime,
        ttl: timedelta,
        epoch: int | None = None,
    ) -> tuple[LeaderLease, bool]:
        """Renew ``node_id``'s lease of ``epoch``, or take the lease if it is free.

        In one transaction: the first lease ever is created (epoch 1); the holder renews
        it while it has not expired (``expires_at`` → ``now + ttl``, same epoch);
        otherwise an expired or released lease is taken (``epoch + 1``, by any node, the
        last holder too). A lease held by another node is left alone.

        Args:
            node_id: the node asking.
            now: its clock's instant (aware UTC).
            ttl: how long the lease lasts without renewal.
            epoch: the epoch the caller believes it holds; ``None`` renews a running lease
                of ``node_id`` whatever its epoch (node ids are unique per process: it is
                this process's own, e.g. taken by a commit whose answer was lost).

        Returns:
            ``(lease row after the attempt, whether the caller now holds it)``.
        """
        until = now + ttl
        with self._db.write() as conn:
            created = conn.execute(
                insert(conn)(leader_lease)
                .values(
                    id=LEASE_ROW,
                    holder=node_id,
                    epoch=1,
                    expires_at=until,
                    acquired_at=now,
                    renewed_at=now,
                )
                .on_conflict_do_nothing(index_elements=[leader_lease.c.id])
                .returning(*leader_lease.c)
            )
            lease = _lease(created.mappings().first())
            if lease is not None:
                return lease, True
            renewable = [_ROW, leader_lease.c.holder == node_id, leader_lease.c.expires_at > now]
            if epoch is not None:
                renewable.append(leader_lease.c.epoch == epoch)
            lease = _update(
                conn,
                sa.update(leader_lease).where(*renewable).values(expires_at=until, renewed_at=now),
            )
            if lease is not None:
                return lease, True
            lease = _update(
                conn,
                sa.update(leader_lease)
                .where(_ROW, leader_lease.c.expires_at <= now)
                .values(
                    holder=node_id,
                    epoch=leader_lease.c.epoch + 1,
                    expires_at=until,
                    acquired_at=now,
                    renewed_at=now,
                ),
            )
            if lease is not None:
                return lease, True
            found = _lease(conn.execute(sa.select(leader_lease).where(_ROW)).mappings().first())
            assert found is not None  # the row exists: the insert above conflicted
            return found, False

    def release(self, term: LeaderTerm, *, now: datetime) -> bool:
        """End ``term``'s lease at ``now`` so another node can take it at once.

        Returns:
            False when ``term`` no longer held the lease (nothing changed).
        """
        with self._db.write() as conn:
            done = conn.execute(
                sa.update(leader_lease)
                .where(
                    _ROW,
                    leader_lease.c.holder == term.holder,
                    leader_lease.c.epoch == term.epoch,
                    leader_lease.c.expires_at > now,
                )
                .values(expires_at=now)
            )
            return bool(done.rowcount)

    def check_term(self, term: LeaderTerm) -> None:
        """Fence: refuse the caller's transaction unless ``term`` is the current lease.

        Call it first inside the maintenance write's transaction (a
        :meth:`Database.transaction` block). On PostgreSQL the row is locked ``FOR SHARE``
        until that transaction ends, so no take-over commits in between.

        Raises:
            LeaderFenced: another holder or a newer epoch holds the lease (or none does).
        """
        with self._db.write() as conn:
            check_term(conn, term)


def check_term(conn: Connection, term: LeaderTerm) -> None:
    """:meth:`LeaseStore.check_term` on the caller's connection (its transaction).

    Raises:
        LeaderFenced: ``term`` is not the current lease's holder and epoch.
    """
    row = (
        conn.execute(sa.select(leader_lease).where(_ROW).with_for_update(read=True))
        .mappings()
        .first()
    )
    lease = _lease(row)
    if lease is None or lease.holder != term.holder or lease.epoch != term.epoch:
        raise LeaderFenced(term, lease)


def _update(conn: Connection, stmt: sa.Update) -> LeaderLease | None:
    return _lease(conn.execute(stmt.returning(*leader_lease.c)).mappings().first())
