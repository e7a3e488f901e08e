"""The :class:`Store`: every repository over one database."""

from __future__ import annotations

from dataclasses import dataclass

from office_scheduler.store.approvals import ApprovalStore
from office_scheduler.store.budgets import BudgetStore
from office_scheduler.store.engine import Database, open_database
from office_scheduler.store.held import HeldWakeNotes
from office_scheduler.store.listing import ListingStore
from office_scheduler.store.notifications import NotificationStore
from office_scheduler.store.office import OfficeStore
from office_scheduler.store.queue import QueueStore
from office_scheduler.store.routines import RoutineStore
from office_scheduler.store.runaway import RunawayStore
from office_scheduler.store.runlog import RunLogStore
from office_scheduler.store.summaries import SummaryStore
from office_scheduler.store.tokens import TokenStore


@dataclass(frozen=True, slots=True)
class Store:
    """Repositories sharing one :class:`Database`.

    Each method is one transaction, or part of the caller's :meth:`Database.transaction`.
    """

    db: Database
    office: OfficeStore
    queue: QueueStore
    runlog: RunLogStore
    routines: RoutineStore
    tokens: TokenStore
    listing: ListingStore
    summaries: SummaryStore
    approvals: ApprovalStore
    budgets: BudgetStore
    runaway: RunawayStore
    held_notes: HeldWakeNotes
    notifications: NotificationStore

    @classmethod
    def from_database(cls, db: Database) -> Store:
        """Build every repository over ``db``."""
        return cls(
            db=db,
            office=OfficeStore(db),
            queue=QueueStore(db),
            runlog=RunLogStore(db),
            routines=RoutineStore(db),
            tokens=TokenStore(db),
            listing=ListingStore(db),
            summaries=SummaryStore(db),
            approvals=ApprovalStore(db),
            budgets=BudgetStore(db),
            runaway=RunawayStore(db),
            held_notes=HeldWakeNotes(db),
            notifications=NotificationStore(db),
        )

    @classmethod
    def open(cls, url: str, *, schema: str | None = None) -> Store:
        """Open ``url`` (see :func:`open_database`) and build the repositories."""
        return cls.from_database(open_database(url, schema=schema))

    def close(self) -> None:
        """Dispose the database; the store must not be used afterwards."""
        self.db.dispose()
