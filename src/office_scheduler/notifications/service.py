"""The notification service: channel rules, one delivery pass, and ``office notify test``.

A pass claims the due deliveries (a lease each, so with several processes one of them
makes each attempt), posts them concurrently with a per-request timeout, and records each
result. A failed attempt is retried with jittered backoff (:data:`RETRY_DELAYS`) until 24
hours after the event; the attempt after that ends the delivery ``failed`` with an activity
entry. Posting happens in the delivery loop only, never in a request or a run, so a slow or
dead receiver delays nothing else.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.notifications import (
    TEST_EVENT,
    ChannelKind,
    DeliveryStatus,
    NotificationChannel,
)
from office_scheduler.notifications.messages import slack_message
from office_scheduler.notifications.rules import channel_values, check_name
from office_scheduler.notifications.signing import signature_headers
from office_scheduler.store.facade import Store
from office_scheduler.store.notifications import (
    ClaimedDelivery,
    event_payload,
    new_delivery_id,
)

log = structlog.get_logger(__name__)

#: Pause after the n-th failed attempt (the last entry repeats), before ±25 % jitter.
RETRY_DELAYS = (
    timedelta(seconds=5),
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=2),
    timedelta(hours=4),
)
#: Longest wait for one receiver's answer.
REQUEST_TIMEOUT_S = 10.0
#: Most bytes of a receiver's answer read (its first line goes into the error).
MAX_ANSWER_BYTES = 4096
#: How long a sender's claim on a delivery lasts (longer than one request).
CLAIM_LEASE = timedelta(seconds=60)
#: Deliveries claimed by one pass.
BATCH = 20


def retry_delay(failures: int, *, rng: random.Random | None = None) -> timedelta:
    """The pause after ``failures`` failed attempts (≥ 1), with ±25 % jitter."""
    base = RETRY_DELAYS[min(failures, len(RETRY_DELAYS)) - 1]
    spread = (rng or random).uniform(0.75, 1.25)
    return base * spread


@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptResult:
    """What one POST to a receiver came to.

    Attributes:
        delivered: the receiver answered 2xx.
        status_code: its HTTP status, or ``None`` when no answer came.
        error: why it failed (``None`` when delivered).
    """

    delivered: bool
    status_code: int | None
    error: str | None


class NotificationService:
    """Channels of a workspace and the delivery of its outbox.

    Args:
        store: the store.
        clock: time source.
        node_id: this process's id (the owner of its claims).
        dashboard_url: base URL of the dashboard, for the links in messages.
        transport: an httpx transport (tests pass a mock); default: the network.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        node_id: str,
        dashboard_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._node_id = node_id
        self._dashboard_url = dashboard_url.rstrip("/")
        self._transport = transport
        self._rng = random.Random()

    # Channels -------------------------------------------------------------------------

    async def list_channels(self, workspace_id: str) -> list[NotificationChannel]:
        """The workspace's channels, by name."""
        return await asyncio.to_thread(self._store.notifications.list_channels, workspace_id)

    async def put_channel(
        self, workspace_id: str, name: str, fields: Mapping[str, object]
    ) -> tuple[NotificationChannel, bool, str | None]:
        """Create or replace a channel.

        Returns:
            ``(channel, created, secret)``; ``secret`` is set only when one was made here.

        Raises:
            InvalidInputError: a bad name or field.
            NotFoundError: no such workspace.
        """
        values, made = channel_values(fields)
        channel, created = await asyncio.to_thread(
            self._store.notifications.put_channel,
            workspace_id,
            check_name(name),
            values,
            now=self._clock.now(),
        )
        log.info("notification_channel_saved", workspace_id=workspace_id, channel=channel.name)
        return channel, created, made

    async def delete_channel(self, workspace_id: str, name: str) -> None:
        """Delete a channel and its outbox.

        Raises:
            NotFoundError: no such channel.
        """
        await asyncio.to_thread(self._store.notifications.delete_channel, workspace_id, name)

    # Sending --------------------------------------------------------------------------

    def _body(self, kind: ChannelKind, payload: Mapping[str, Any]) -> str:
        data = dict(payload.get("data") or {})
        path = data.get("dashboard_path")
        if isinstance(path, str) and path.startswith("/"):
            data["dashboard_url"] = self._dashboard_url + path
        full = {**payload, "data": data}
        message = slack_message(full) if kind is ChannelKind.SLACK else full
        return json.dumps(message, separators=(",", ":"), sort_keys=True)

    async def _post(
        self,
        client: httpx.AsyncClient,
        *,
        kind: ChannelKind,
        url: str,
        secret: str | None,
        delivery_id: str,
        payload: Mapping[str, Any],
    ) -> AttemptResult:
        body = self._body(kind, payload)
        headers = {"content-type": "application/json", "user-agent": "office-scheduler"}
        if kind is ChannelKind.WEBHOOK and secret:
            headers |= signature_headers(secret, delivery_id, self._clock.now(), body)
        try:
            # httpx's timeout bounds each read, not the whole exchange: a receiver that
            # trickles its answer would hold the pass (and its claims) forever without this.
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                status_code, text = await self._send(client, url, body, headers)
        except TimeoutError:
            return AttemptResult(
                delivered=False,
                status_code=None,
                error=f"no complete answer within {REQUEST_TIMEOUT_S:g} s",
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return AttemptResult(
                delivered=False, status_code=None, error=f"{type(exc).__name__}: {exc}"
            )
        if 200 <= status_code < 300:
            return AttemptResult(delivered=True, status_code=status_code, error=None)
        first = text.strip().splitlines()[0][:200] if text.strip() else ""
        error = f"HTTP {status_code}" + (f": {first}" if first else "")
        return AttemptResult(delivered=False, status_code=status_code, error=error)

    @staticmethod
    async def _send(
        client: httpx.AsyncClient, url: str, body: str, headers: Mapping[str, str]
    ) -> tuple[int, str]:
        """POST ``body``; the status and at most :data:`MAX_ANSWER_BYTES` of the answer."""
        async with client.stream("POST", url, content=body.encode(), headers=headers) as response:
            kept = b""
            async for chunk in response.aiter_bytes():
                kept += chunk
                if len(kept) >= MAX_ANSWER_BYTES:
                    break
            return response.status_code, kept[:MAX_ANSWER_BYTES].decode("utf-8", "replace")

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=REQUEST_TIMEOUT_S, follow_redirects=False, transport=self._transport
        )

    async def send_test(self, workspace_id: str, name: str) -> tuple[str, AttemptResult]:
        """Post one sample event (``notification.test``) to a channel now, outside the outbox.

        Returns:
            ``(delivery_id, result)``.

        Raises:
            NotFoundError: no such channel.
        """
        channel = await asyncio.to_thread(self._store.notifications.get_channel, workspace_id, name)
        delivery_id = new_delivery_id()
        payload = event_payload(
            TEST_EVENT,
            {
                "title": f"Test notification from Office Scheduler to channel {channel.name!r}",
                "channel": channel.name,
                "dashboard_path": "/inbox",
            },
            self._clock.now(),
        )
        async with self._client() as client:
            result = await self._post(
                client,
                kind=channel.kind,
                url=channel.url,
                secret=channel.secret,
                delivery_id=delivery_id,
                payload=payload,
            )
        return delivery_id, result

    async def _attempt(self, client: httpx.AsyncClient, claimed: ClaimedDelivery) -> None:
        delivery = claimed.delivery
        result = await self._post(
            client,
            kind=claimed.kind,
            url=claimed.url,
            secret=claimed.secret,
            delivery_id=delivery.id,
            payload=delivery.payload,
        )
        now = self._clock.now()
        retry_at: datetime | None = None
        if not result.delivered:
            retry_at = now + retry_delay(delivery.attempts + 1, rng=self._rng)
            if retry_at > delivery.give_up_at:
                retry_at = None
        status = await asyncio.to_thread(
            self._store.notifications.record_attempt,
            delivery.id,
            node=self._node_id,
            now=now,
            delivered=result.delivered,
            status_code=result.status_code,
            error=result.error,
            retry_at=retry_at,
        )
        log.info(
            "notification_attempt",
            delivery_id=delivery.id,
            channel=delivery.channel_name,
            notification_event=delivery.event,
            attempt=delivery.attempts + 1,
            status=None if status is None else status.value,
            status_code=result.status_code,
            error=result.error,
        )
        if status is DeliveryStatus.FAILED:
            log.warning("notification_failed", delivery_id=delivery.id, error=result.error)

    async def deliver_due(self) -> int:
        """Make one attempt of every due delivery (in batches); returns how many were tried."""
        tried = 0
        async with self._client() as client:
            while True:
                claimed = await asyncio.to_thread(
                    self._store.notifications.claim_due,
                    node=self._node_id,
                    now=self._clock.now(),
                    lease=CLAIM_LEASE,
                    limit=BATCH,
                )
                if not claimed:
                    return tried
                await asyncio.gather(*(self._attempt(client, item) for item in claimed))
                tried += len(claimed)

    async def next_due_at(self) -> datetime | None:
        """The earliest due time of a pending delivery, or ``None``."""
        return await asyncio.to_thread(self._store.notifications.next_due_at)


def summarise(channels: Sequence[NotificationChannel]) -> list[dict[str, Any]]:
    """Channels as shown to people: never the URL's path or the secret."""
    shown = []
    for channel in channels:
        parts = urlsplit(channel.url)
        shown.append(
            {
                "name": channel.name,
                "kind": channel.kind.value,
                "host": parts.hostname or "",
                "events": list(channel.events),
                "enabled": channel.enabled,
            }
        )
    return shown
