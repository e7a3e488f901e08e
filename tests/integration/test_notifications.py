"""Outbound notifications on both databases: outbox, signing, retries, restarts, two senders."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from helpers import Office
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.notifications import DeliveryStatus
from office_scheduler.domain.status import TaskState
from office_scheduler.notifications import service as notification_service
from office_scheduler.notifications.service import NotificationService
from office_scheduler.scheduler.notifications import SAFETY_TICK, NotificationLoop
from office_scheduler.store.engine import open_database
from office_scheduler.store.facade import Store

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def independent_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """Standard Webhooks' v1 signature, computed here from the scheme's text alone."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class Receiver:
    """A mock receiver: answers from a script of status codes (then 200), records requests."""

    def __init__(self, statuses: list[int] | None = None, *, down: bool = False) -> None:
        self.statuses = list(statuses or [])
        self.down = down
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        status = self.statuses.pop(0) if self.statuses else 200
        return httpx.Response(status, text="" if status < 300 else "receiver is unhappy")

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


def sender(office: Office, receiver: Receiver, node: str = "node-a") -> NotificationService:
    return NotificationService(
        office.store,
        office.clock,
        node_id=node,
        dashboard_url="http://office.example:8700/",
        transport=receiver.transport(),
    )


async def add_webhook(office: Office, receiver: Receiver, **fields: object) -> None:
    svc = sender(office, receiver)
    await svc.put_channel(
        office.workspace.id,
        "ops",
        {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "secret": SECRET, **fields},
    )


async def request_approval(office: Office) -> None:
    await office.service.approvals.request(
        workspace_id=office.workspace.id,
        title="Deploy to production?",
        requested_by_agent_id=office.worker.id,
    )


async def test_an_approval_request_is_one_signed_delivery(office: Office) -> None:
    receiver = Receiver()
    await add_webhook(office, receiver)
    await request_approval(office)

    assert await sender(office, receiver).deliver_due() == 1
    assert await sender(office, receiver).deliver_due() == 0
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    body = request.content
    expected = independent_signature(
        SECRET, request.headers["webhook-id"], request.headers["webhook-timestamp"], body
    )
    assert request.headers["webhook-signature"] == expected
    assert request.headers["webhook-id"].startswith("msg_")
    assert int(request.headers["webhook-timestamp"]) == int(office.clock.now().timestamp())
    payload = json.loads(body)
    assert payload["type"] == "approval.requested"
    assert payload["data"]["title"] == "Deploy to production?"
    assert payload["data"]["dashboard_url"] == "http://office.example:8700/inbox"
    [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
    assert delivery.status is DeliveryStatus.DELIVERED
    assert delivery.id == request.headers["webhook-id"]


async def test_a_receiver_failing_twice_gets_the_same_id_three_times(office: Office) -> None:
    receiver = Receiver([500, 503])
    await add_webhook(office, receiver)
    await request_approval(office)
    svc = sender(office, receiver)

    await svc.deliver_due()
    for _ in range(2):
        [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
        assert delivery.status is DeliveryStatus.PENDING
        assert delivery.next_attempt_at is not None
        assert await svc.deliver_due() == 0  # not due yet: the backoff holds it
        office.clock.advance(delivery.next_attempt_at - office.clock.now())
        await svc.deliver_due()

    ids = {request.headers["webhook-id"] for request in receiver.requests}
    assert len(receiver.requests) == 3
    assert len(ids) == 1
    [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
    assert delivery.status is DeliveryStatus.DELIVERED
    assert delivery.attempts == 3


async def test_a_receiver_down_for_a_day_ends_failed_with_an_activity_entry(
    office: Office,
) -> None:
    receiver = Receiver(down=True)
    await add_webhook(office, receiver)
    await request_approval(office)
    svc = sender(office, receiver)
    start = office.clock.now()
    delivery = None
    for _ in range(100):
        await svc.deliver_due()
        [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
        if delivery.status is not DeliveryStatus.PENDING:
            break
        assert delivery.next_attempt_at is not None
        office.clock.advance(delivery.next_attempt_at - office.clock.now())
    assert delivery is not None
    assert delivery.status is DeliveryStatus.FAILED
    assert office.clock.now() - start <= timedelta(hours=24)
    assert office.clock.now() - start >= timedelta(hours=18)
    assert "ConnectError" in (delivery.last_error or "")
    entries = office.store.runlog.list_activity(office.workspace.id).items
    failed = [entry for entry in entries if entry.kind == "notification_failed"]
    assert len(failed) == 1
    assert failed[0].data["delivery_id"] == delivery.id
    # Runs are unaffected: nothing was queued or failed because of the receiver.
    assert office.store.listing.live_runs() == []


async def test_a_restart_in_the_middle_of_retries_loses_nothing(office: Office) -> None:
    receiver = Receiver([502])
    await add_webhook(office, receiver)
    await request_approval(office)
    await sender(office, receiver, node="before-restart").deliver_due()

    # A new process: a new store over the same database, a new node id.
    database = open_database(office.store.db.url, schema=office.store.db.schema)
    store = Store.from_database(database)
    try:
        [delivery] = store.notifications.list_deliveries(office.workspace.id)
        assert delivery.status is DeliveryStatus.PENDING
        assert delivery.next_attempt_at is not None
        office.clock.advance(delivery.next_attempt_at - office.clock.now())
        after = NotificationService(
            store,
            office.clock,
            node_id="after-restart",
            dashboard_url="http://x",
            transport=receiver.transport(),
        )
        assert await after.deliver_due() == 1
    finally:
        store.close()
    assert [r.headers["webhook-id"] for r in receiver.requests] == [delivery.id] * 2
    [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
    assert delivery.status is DeliveryStatus.DELIVERED


async def test_two_senders_make_each_attempt_once(office: Office) -> None:
    receiver = Receiver()
    await add_webhook(office, receiver)
    for index in range(30):
        await office.service.approvals.request(
            workspace_id=office.workspace.id, title=f"approval {index}"
        )
    second = Store.from_database(open_database(office.store.db.url, schema=office.store.db.schema))
    try:
        other = NotificationService(
            second,
            office.clock,
            node_id="node-b",
            dashboard_url="http://x",
            transport=receiver.transport(),
        )
        await asyncio.gather(sender(office, receiver).deliver_due(), other.deliver_due())
    finally:
        second.close()
    counts = Counter(request.headers["webhook-id"] for request in receiver.requests)
    assert len(counts) == 30
    assert set(counts.values()) == {1}


async def test_events_filter_and_the_run_and_task_events(office: Office) -> None:
    receiver = Receiver()
    await add_webhook(office, receiver, events=["task.done"])
    await request_approval(office)  # not subscribed
    task = await office.service.office.create_task(
        workspace_id=office.workspace.id, title="Ship it", project_id=office.project.id
    )
    await office.service.office.update_task(task.id, {"state": TaskState.DONE.value})
    await office.service.office.update_task(task.id, {"title": "Shipped"})  # still done

    await sender(office, receiver).deliver_due()
    assert [json.loads(r.content)["type"] for r in receiver.requests] == ["task.done"]
    data = json.loads(receiver.requests[0].content)["data"]
    assert data["task_id"] == task.id
    assert data["dashboard_url"] == f"http://office.example:8700/tasks/{task.id}"


async def test_a_slack_channel_gets_a_readable_message_with_a_link(office: Office) -> None:
    receiver = Receiver()
    svc = sender(office, receiver)
    await svc.put_channel(
        office.workspace.id,
        "team",
        {"kind": "slack", "url": "https://hooks.slack.example/services/T/B/X"},
    )
    await request_approval(office)
    await svc.deliver_due()
    [request] = receiver.requests
    assert "webhook-signature" not in request.headers
    text = json.loads(request.content)["text"]
    assert text.startswith("*Approval requested*\nDeploy to production?")
    assert "<http://office.example:8700/inbox|Open in the dashboard>" in text


async def test_notify_test_sends_one_sample_outside_the_outbox(office: Office) -> None:
    receiver = Receiver([404])
    await add_webhook(office, receiver)
    delivery_id, result = await sender(office, receiver).send_test(office.workspace.id, "ops")
    assert not result.delivered
    assert result.status_code == 404
    assert receiver.requests[0].headers["webhook-id"] == delivery_id
    assert json.loads(receiver.requests[0].content)["type"] == "notification.test"
    assert office.store.notifications.list_deliveries(office.workspace.id) == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "email", "url": "http://x"}, "kind"),
        ({"kind": "webhook", "url": "ftp://x"}, "url"),
        ({"kind": "webhook", "url": "http://x", "events": ["task.finished"]}, "events[0]"),
        ({"kind": "webhook", "url": "http://x", "secret": "plain"}, "secret"),
        ({"kind": "slack", "url": "http://x", "secret": SECRET}, "secret"),
        ({"kind": "webhook", "url": "http://x", "colour": "red"}, "colour"),
    ],
)
async def test_bad_channel_fields_name_the_field_and_store_nothing(
    office: Office, fields: dict[str, object], field: str
) -> None:
    svc = sender(office, Receiver())
    with pytest.raises(InvalidInputError) as caught:
        await svc.put_channel(office.workspace.id, "bad", fields)
    assert caught.value.field == field
    assert await svc.list_channels(office.workspace.id) == []


async def test_a_webhook_channel_without_a_secret_gets_one(office: Office) -> None:
    svc = sender(office, Receiver())
    channel, created, made = await svc.put_channel(
        office.workspace.id, "ops", {"kind": "webhook", "url": "http://127.0.0.1:9/"}
    )
    assert created
    assert made is not None
    assert made.startswith("whsec_")
    assert channel.secret == made
    _, created, made = await svc.put_channel(
        office.workspace.id,
        "ops",
        {"kind": "webhook", "url": "http://127.0.0.1:9/", "secret": made},
    )
    assert not created
    assert made is None


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://host:abc/", "http://host:99999/", "http://exa mple.com/hook"],
)
async def test_a_url_the_sender_cannot_parse_is_refused_naming_url(
    office: Office, url: str
) -> None:
    svc = sender(office, Receiver())
    with pytest.raises(InvalidInputError) as caught:
        await svc.put_channel(office.workspace.id, "bad", {"kind": "webhook", "url": url})
    assert caught.value.field == "url"
    assert await svc.list_channels(office.workspace.id) == []


async def test_a_stored_unparseable_url_is_a_failed_attempt_not_a_broken_pass(
    office: Office,
) -> None:
    # A channel written before the URL check was strict (or by hand): the pass must record
    # a failed attempt and go on with the other channels' deliveries.
    values: dict[str, object] = {"kind": "webhook", "url": "http://host:abc/", "secret": SECRET}
    values |= {"events": [], "enabled": True}
    office.store.notifications.put_channel(
        office.workspace.id, "broken", values, now=office.clock.now()
    )
    receiver = Receiver()
    await add_webhook(office, receiver)
    await request_approval(office)

    svc = sender(office, receiver)
    assert await svc.deliver_due() == 2
    by_channel = {
        item.channel_name: item
        for item in office.store.notifications.list_deliveries(office.workspace.id)
    }
    assert by_channel["ops"].status is DeliveryStatus.DELIVERED
    assert by_channel["broken"].status is DeliveryStatus.PENDING
    assert by_channel["broken"].attempts == 1
    _, result = await svc.send_test(office.workspace.id, "broken")
    assert not result.delivered
    assert result.error is not None
    assert "InvalidURL" in result.error


class _Trickle(httpx.AsyncByteStream):
    """An answer that never completes: one byte, then nothing (a receiver stuck mid-reply)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"{"
        await asyncio.Event().wait()


async def test_a_receiver_that_never_finishes_answering_does_not_hold_the_pass(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notification_service, "REQUEST_TIMEOUT_S", 0.05)

    def stuck(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Trickle())

    await add_webhook(office, Receiver())
    await request_approval(office)
    svc = NotificationService(
        office.store,
        office.clock,
        node_id="node-a",
        dashboard_url="http://x",
        transport=httpx.MockTransport(stuck),
    )
    # Far longer than the patched timeout, so only a pass that never ends fails this.
    assert await asyncio.wait_for(svc.deliver_due(), timeout=60) == 1
    [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.attempts == 1
    assert delivery.last_error is not None
    assert "no complete answer" in delivery.last_error


async def test_a_delivery_left_claimed_by_a_killed_sender_does_not_make_the_loop_spin(
    office: Office,
) -> None:
    await add_webhook(office, Receiver())
    await request_approval(office)
    now = office.clock.now()
    # kill -9 in the middle of a POST: the claim stays until its lease runs out.
    [_] = office.store.notifications.claim_due(
        node="killed", now=now, lease=notification_service.CLAIM_LEASE, limit=20
    )
    assert office.store.notifications.next_due_at() == now + notification_service.CLAIM_LEASE

    receiver = Receiver()
    svc = sender(office, receiver)
    loop = NotificationLoop(
        deliver_due=svc.deliver_due, next_due_at=svc.next_due_at, clock=office.clock
    )
    assert await loop.run_pass() == SAFETY_TICK.total_seconds()
    assert receiver.requests == []

    office.clock.advance(notification_service.CLAIM_LEASE)
    assert await loop.run_pass() == SAFETY_TICK.total_seconds()
    [request] = receiver.requests
    [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
    assert request.headers["webhook-id"] == delivery.id
    assert delivery.status is DeliveryStatus.DELIVERED


async def test_a_disabled_channel_sends_nothing_until_enabled_again(office: Office) -> None:
    receiver = Receiver()
    await add_webhook(office, receiver)
    await request_approval(office)  # queued while the channel is enabled
    await add_webhook(office, receiver, enabled=False)
    svc = sender(office, receiver)

    assert await svc.deliver_due() == 0
    assert await svc.next_due_at() is None  # nothing for the loop to wake up for
    assert receiver.requests == []
    await add_webhook(office, receiver, enabled=True)
    assert await svc.deliver_due() == 1
    [delivery] = office.store.notifications.list_deliveries(office.workspace.id)
    assert delivery.status is DeliveryStatus.DELIVERED
