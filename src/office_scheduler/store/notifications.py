"""Notification channels and the outbox of deliveries.

:func:`queue_notification` adds the deliveries of one event inside the caller's
transaction, so an event and what it sends commit (or roll back) together. Senders claim
due deliveries with a lease (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so with several
processes each attempt is made by one of them; a sender that dies mid-post leaves the row
to be claimed again when its lease ends, under the same delivery id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import NotFoundError
from office_scheduler.domain.models import Task
from office_scheduler.domain.notifications import (
    ChannelKind,
    Delivery,
    DeliveryStatus,
    NotificationChannel,
    NotificationEvent,
)
from office_scheduler.domain.status import TaskState
from office_scheduler.store.activity import activity_values, insert_activity
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.schema import notification_channels, notification_deliveries
from office_scheduler.store.sql import Row, all_rows, first_row, missing_reference

#: How long a delivery is retried before it ends ``failed``.
DELIVERY_WINDOW = timedelta(hours=24)
#: Longest error text kept on a delivery row.
MAX_ERROR_CHARS = 500

_C = notification_channels.c
_D = notification_deliveries.c

#: The delivery's channel is enabled (pending deliveries of a disabled one wait).
_CHANNEL_ENABLED = sa.exists().where(_C.id == _D.channel_id, _C.enabled.is_(True))

_CHANNELS_OF_WORKSPACE = (
    sa.select(notification_channels)
    .where(_C.workspace_id == sa.bindparam("workspace_id"), _C.enabled.is_(True))
    .order_by(_C.name)
)


def channel_from_row(row: Row) -> NotificationChannel:
    """A :class:`NotificationChannel` from its row."""
    return NotificationChannel(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        kind=ChannelKind(row["kind"]),
        url=row["url"],
        secret=row["secret"],
        events=tuple(row["events"] or ()),
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _delivery_from_row(row: Row, channel_name: str) -> Delivery:
    return Delivery(
        id=row["id"],
        workspace_id=row["workspace_id"],
        channel_id=row["channel_id"],
        channel_name=channel_name,
        event=row["event"],
        payload=dict(row["payload"]),
        status=DeliveryStatus(row["status"]),
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"],
        give_up_at=row["give_up_at"],
        last_error=row["last_error"],
        last_status_code=row["last_status_code"],
        created_at=row["created_at"],
        delivered_at=row["delivered_at"],
    )


def new_delivery_id() -> str:
    """A new stable delivery id: ``msg_`` and 32 hex digits."""
    return f"msg_{new_id()}"


def event_payload(event: str, data: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The body of a delivery: ``{"type", "timestamp", "data"}`` (Standard Webhooks' shape)."""
    stamp = now.isoformat().replace("+00:00", "Z")
    return {"type": event, "timestamp": stamp, "data": dict(data)}


def queue_notification(
    conn: Connection,
    *,
    workspace_id: str,
    event: str,
    data: Mapping[str, Any],
    now: datetime,
) -> list[str]:
    """Add one delivery per enabled channel of the workspace that wants ``event``.

    Runs inside the caller's transaction (one read of the workspace's channels, one insert
    when any matches).

    Returns:
        The new delivery ids (none when no channel wants the event).
    """
    channels = [
        channel_from_row(row)
        for row in all_rows(conn, _CHANNELS_OF_WORKSPACE, {"workspace_id": workspace_id})
    ]
    wanted = [channel for channel in channels if channel.wants(event)]
    if not wanted:
        return []
    payload = event_payload(event, data, now)
    rows = [
        {
            "id": new_delivery_id(),
            "workspace_id": workspace_id,
            "channel_id": channel.id,
            "event": event,
            "payload": payload,
            "status": DeliveryStatus.PENDING.value,
            "attempts": 0,
            "next_attempt_at": now,
            "give_up_at": now + DELIVERY_WINDOW,
            "created_at": now,
        }
        for channel in wanted
    ]
    conn.execute(sa.insert(notification_deliveries), rows)
    return [str(row["id"]) for row in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimedDelivery:
    """A delivery claimed for one attempt, with where and how to send it."""

    delivery: Delivery
    kind: ChannelKind
    url: str
    secret: str | None


class NotificationStore:
    """Channels (one per workspace and name) and the outbox of their deliveries."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # Channels -------------------------------------------------------------------------

    def list_channels(self, workspace_id: str) -> list[NotificationChannel]:
        """The workspace's channels, by name (disabled ones too)."""
        query = (
            sa.select(notification_channels)
            .where(_C.workspace_id == workspace_id)
            .order_by(_C.name)
        )
        with self._db.read() as conn:
            return [channel_from_row(row) for row in all_rows(conn, query)]

    def get_channel(self, workspace_id: str, name: str) -> NotificationChannel:
        """The workspace's channel ``name``.

        Raises:
            NotFoundError: no such channel (field ``name``).
        """
        query = sa.select(notification_channels).where(
            _C.workspace_id == workspace_id, _C.name == name
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
        if row is None:
            raise NotFoundError(f"notification channel {name!r} not found", field="name")
        return channel_from_row(row)

    def put_channel(
        self, workspace_id: str, name: str, values: Mapping[str, Any], *, now: datetime
    ) -> tuple[NotificationChannel, bool]:
        """Create or replace channel ``name`` with validated ``values``.

        Args:
            workspace_id: the workspace.
            name: the channel's name (unique in the workspace).
            values: ``kind``, ``url``, ``secret``, ``events`` (list), ``enabled``.
            now: the change's instant (UTC).

        Returns:
            ``(channel, created)``.

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
        """
        with (
            missing_reference(field="workspace_id", message=f"workspace {workspace_id} not found"),
            self._db.write() as conn,
        ):
            found = first_row(
                conn,
                sa.select(_C.id).where(_C.workspace_id == workspace_id, _C.name == name),
            )
            if found is None:
                channel_id = new_id()
                conn.execute(
                    sa.insert(notification_channels).values(
                        id=channel_id,
                        workspace_id=workspace_id,
                        name=name,
                        created_at=now,
                        updated_at=now,
                        **values,
                    )
                )
            else:
                channel_id = found["id"]
                conn.execute(
                    sa.update(notification_channels)
                    .where(_C.id == channel_id)
                    .values(updated_at=now, **values)
                )
            row = first_row(conn, sa.select(notification_channels).where(_C.id == channel_id))
        assert row is not None
        return channel_from_row(row), found is None

    def delete_channel(self, workspace_id: str, name: str) -> None:
        """Delete channel ``name`` and its deliveries.

        Raises:
            NotFoundError: no such channel (field ``name``).
        """
        with self._db.write() as conn:
            found = first_row(
                conn,
                sa.select(_C.id).where(_C.workspace_id == workspace_id, _C.name == name),
            )
            if found is None:
                raise NotFoundError(f"notification channel {name!r} not found", field="name")
            conn.execute(sa.delete(notification_deliveries).where(_D.channel_id == found["id"]))
            conn.execute(sa.delete(notification_channels).where(_C.id == found["id"]))

    # The outbox -----------------------------------------------------------------------

    def queue(
        self, *, workspace_id: str, event: str, data: Mapping[str, Any], now: datetime
    ) -> list[str]:
        """:func:`queue_notification` in a transaction of its own."""
        with self._db.write() as conn:
            return queue_notification(
                conn, workspace_id=workspace_id, event=event, data=data, now=now
            )

    def list_deliveries(
        self,
        workspace_id: str,
        *,
        status: DeliveryStatus | None = None,
        channel: str | None = None,
        limit: int = 100,
    ) -> list[Delivery]:
        """The workspace's deliveries, newest first, optionally filtered."""
        query = (
            sa.select(notification_deliveries, _C.name.label("channel_name"))
            .join(notification_channels, _C.id == _D.channel_id)
            .where(_D.workspace_id == workspace_id)
            .order_by(_D.created_at.desc(), _D.id)
            .limit(limit)
        )
        if status is not None:
            query = query.where(_D.status == status.value)
        if channel is not None:
            query = query.where(_C.name == channel)
        with self._db.read() as conn:
            return [_delivery_from_row(row, row["channel_name"]) for row in all_rows(conn, query)]

    def get_delivery(self, delivery_id: str) -> Delivery:
        """One delivery.

        Raises:
            NotFoundError: no such delivery (field ``delivery_id``).
        """
        query = (
            sa.select(notification_deliveries, _C.name.label("channel_name"))
            .join(notification_channels, _C.id == _D.channel_id)
            .where(_D.id == delivery_id)
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
        if row is None:
            raise NotFoundError(f"delivery {delivery_id} not found", field="delivery_id")
        return _delivery_from_row(row, row["channel_name"])

    def next_due_at(self) -> datetime | None:
        """When the earliest pending delivery can next be claimed, or ``None``.

        That is its ``next_attempt_at``, or the end of a running claim when later: a
        delivery another sender is posting (or one a killed sender left claimed) is not due
        before its claim ends, and the loop must rest until then rather than spin.
        """
        claimable_at = sa.case(
            (
                sa.and_(_D.claimed_until.is_not(None), _D.claimed_until > _D.next_attempt_at),
                _D.claimed_until,
            ),
            else_=_D.next_attempt_at,
        )
        query = sa.select(sa.func.min(claimable_at)).where(
            _D.status == DeliveryStatus.PENDING.value, _CHANNEL_ENABLED
        )
        with self._db.read() as conn:
            value: datetime | None = conn.execute(query).scalar()
        return value

    def claim_due(
        self, *, node: str, now: datetime, lease: timedelta, limit: int
    ) -> list[ClaimedDelivery]:
        """Claim up to ``limit`` due deliveries for one attempt each, oldest first.

        A delivery is due when it is ``pending``, its ``next_attempt_at`` has come, its
        channel is enabled (a disabled channel keeps its deliveries for when it is enabled
        again) and no other sender's lease on it is running.
        """
        due = (
            sa.select(_D.id)
            .where(
                _D.status == DeliveryStatus.PENDING.value,
                _D.next_attempt_at <= now,
                sa.or_(_D.claimed_until.is_(None), _D.claimed_until <= now),
                _CHANNEL_ENABLED,
            )
            .order_by(_D.next_attempt_at, _D.id)
            .limit(limit)
        )
        with self._db.write() as conn:
            if conn.dialect.name == "postgresql":
                due = due.with_for_update(skip_locked=True)
            ids = [row["id"] for row in all_rows(conn, due)]
            if not ids:
                return []
            conn.execute(
                sa.update(notification_deliveries)
                .where(_D.id.in_(ids))
                .values(claimed_until=now + lease, claimed_by=node)
            )
            rows = all_rows(
                conn,
                sa.select(
                    notification_deliveries,
                    _C.name.label("channel_name"),
                    _C.kind.label("channel_kind"),
                    _C.url.label("channel_url"),
                    _C.secret.label("channel_secret"),
                )
                .join(notification_channels, _C.id == _D.channel_id)
                .where(_D.id.in_(ids))
                .order_by(_D.next_attempt_at, _D.id),
            )
        return [
            ClaimedDelivery(
                delivery=_delivery_from_row(row, row["channel_name"]),
                kind=ChannelKind(row["channel_kind"]),
                url=row["channel_url"],
                secret=row["channel_secret"],
            )
            for row in rows
        ]

    def record_attempt(
        self,
        delivery_id: str,
        *,
        node: str,
        now: datetime,
        delivered: bool,
        status_code: int | None,
        error: str | None,
        retry_at: datetime | None,
    ) -> DeliveryStatus | None:
        """Record one attempt of a delivery this node claimed.

        Args:
            delivery_id: the delivery.
            node: this sender's node id (the claim's owner).
            now: the attempt's end (UTC).
            delivered: the receiver answered 2xx.
            status_code: the receiver's HTTP status, or ``None`` when it did not answer.
            error: why the attempt failed, or ``None``.
            retry_at: when to try again after a failure; ``None`` ends it ``failed`` (and
                adds a ``notification_failed`` activity entry in the same transaction).

        Returns:
            The delivery's new status, or ``None`` when this node's claim was lost (another
            sender took the row after the lease ran out): nothing is written then.
        """
        text = None if error is None else error[:MAX_ERROR_CHARS]
        if delivered:
            values: dict[str, Any] = {
                "status": DeliveryStatus.DELIVERED.value,
                "delivered_at": now,
                "next_attempt_at": None,
            }
        elif retry_at is None:
            values = {"status": DeliveryStatus.FAILED.value, "next_attempt_at": None}
        else:
            values = {"next_attempt_at": retry_at}
        values |= {
            "attempts": _D.attempts + 1,
            "last_status_code": status_code,
            "last_error": text,
            "claimed_until": None,
            "claimed_by": None,
        }
        with self._db.write() as conn:
            row = first_row(
                conn,
                sa.update(notification_deliveries)
                .where(
                    _D.id == delivery_id,
                    _D.claimed_by == node,
                    _D.status == DeliveryStatus.PENDING.value,
                )
                .values(**values)
                .returning(_D.status, _D.workspace_id, _D.event, _D.attempts, _D.channel_id),
            )
            if row is None:
                return None
            status = DeliveryStatus(row["status"])
            if status is DeliveryStatus.FAILED:
                channel = first_row(conn, sa.select(_C.name).where(_C.id == row["channel_id"]))
                name = channel["name"] if channel is not None else row["channel_id"]
                insert_activity(
                    conn,
                    activity_values(
                        workspace_id=row["workspace_id"],
                        kind="notification_failed",
                        message=(
                            f"notification {row['event']} to channel {name!r} failed after "
                            f"{row['attempts']} attempts: {text or 'no answer'}"
                        ),
                        now=now,
                        data={
                            "delivery_id": delivery_id,
                            "channel": name,
                            "event": row["event"],
                            "attempts": row["attempts"],
                            "last_status_code": status_code,
                        },
                    ),
                )
        return status


def notify_task_done(conn: Connection, before: Task, after: Task, now: datetime) -> None:
    """Queue ``task.done`` when a change moved a task into ``DONE`` (caller's transaction)."""
    if after.state is not TaskState.DONE or before.state is TaskState.DONE:
        return
    queue_notification(
        conn,
        workspace_id=after.workspace_id,
        event=NotificationEvent.TASK_DONE,
        data={
            "task_id": after.id,
            "title": after.title,
            "assignee_agent_id": after.assignee_agent_id,
            "parent_id": after.parent_id,
            "dashboard_path": f"/tasks/{after.id}",
        },
        now=now,
    )
