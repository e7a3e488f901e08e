"""Outbound notification channels of a workspace and their deliveries (admin only).

A channel's URL and secret are credentials: they are taken here and never shown again
(the list shows the receiver's host); a webhook channel created without a secret gets one,
returned once in ``secret``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from office_scheduler.api.deps import PrincipalDep, ServiceDep, load_workspace, require_admin
from office_scheduler.api.routes.common import ERRORS
from office_scheduler.api.schemas import InputModel
from office_scheduler.api.views import ListOut
from office_scheduler.domain.notifications import Delivery, DeliveryStatus, NotificationChannel

router = APIRouter(tags=["notifications"], responses=ERRORS)


class ChannelIn(InputModel):
    """``PUT /api/v1/workspaces/{id}/notifications/{name}``: a channel, created or replaced."""

    kind: str = "webhook"
    url: Annotated[str, Field(max_length=2000)]
    secret: Annotated[str | None, Field(max_length=200)] = None
    events: Annotated[list[str], Field(max_length=50)] = []
    enabled: bool = True


class ChannelOut(BaseModel):
    """A channel as people see it: the receiver's host, never its URL path or secret."""

    name: str
    kind: str
    host: str
    events: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime
    #: Set only in the answer that made a new secret (shown once).
    secret: str | None = None

    @classmethod
    def of(cls, channel: NotificationChannel, secret: str | None = None) -> ChannelOut:
        """The view of ``channel``."""
        return cls(
            name=channel.name,
            kind=channel.kind.value,
            host=urlsplit(channel.url).hostname or "",
            events=list(channel.events),
            enabled=channel.enabled,
            created_at=channel.created_at,
            updated_at=channel.updated_at,
            secret=secret,
        )


class DeliveryOut(BaseModel):
    """One delivery of the outbox."""

    id: str
    channel: str
    event: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    payload: dict[str, Any]

    @classmethod
    def of(cls, delivery: Delivery) -> DeliveryOut:
        """The view of ``delivery``."""
        return cls(
            id=delivery.id,
            channel=delivery.channel_name,
            event=delivery.event,
            status=delivery.status,
            attempts=delivery.attempts,
            next_attempt_at=delivery.next_attempt_at,
            last_status_code=delivery.last_status_code,
            last_error=delivery.last_error,
            created_at=delivery.created_at,
            delivered_at=delivery.delivered_at,
            payload=delivery.payload,
        )


class TestOut(BaseModel):
    """The answer of a test send."""

    delivery_id: str
    delivered: bool
    status_code: int | None
    error: str | None


@router.get("/workspaces/{workspace_id}/notifications")
async def list_channels(
    workspace_id: str, service: ServiceDep, principal: PrincipalDep
) -> ListOut[ChannelOut]:
    """The workspace's notification channels, by name (admin only)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    channels = await service.notifications.list_channels(workspace_id)
    return ListOut(items=[ChannelOut.of(channel) for channel in channels])


@router.put("/workspaces/{workspace_id}/notifications/{name}")
async def put_channel(
    workspace_id: str, name: str, body: ChannelIn, service: ServiceDep, principal: PrincipalDep
) -> ChannelOut:
    """Create or replace a channel (admin only); a new webhook secret comes back once."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    fields = body.model_dump(exclude_unset=True)
    channel, _created, secret = await service.notifications.put_channel(workspace_id, name, fields)
    return ChannelOut.of(channel, secret)


@router.delete("/workspaces/{workspace_id}/notifications/{name}", status_code=204)
async def delete_channel(
    workspace_id: str, name: str, service: ServiceDep, principal: PrincipalDep
) -> None:
    """Delete a channel and its outbox (admin only)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    await service.notifications.delete_channel(workspace_id, name)


@router.post("/workspaces/{workspace_id}/notifications/{name}/test")
async def test_channel(
    workspace_id: str, name: str, service: ServiceDep, principal: PrincipalDep
) -> TestOut:
    """Post one sample event (``notification.test``) to the channel now (admin only)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    delivery_id, result = await service.notifications.send_test(workspace_id, name)
    return TestOut(
        delivery_id=delivery_id,
        delivered=result.delivered,
        status_code=result.status_code,
        error=result.error,
    )


@router.get("/workspaces/{workspace_id}/notification-deliveries")
async def list_deliveries(
    workspace_id: str,
    service: ServiceDep,
    principal: PrincipalDep,
    status: DeliveryStatus | None = None,
    channel: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> ListOut[DeliveryOut]:
    """The workspace's deliveries, newest first (admin only)."""
    require_admin(principal)
    await load_workspace(service, principal, workspace_id)
    found = await asyncio.to_thread(
        service.store.notifications.list_deliveries,
        workspace_id,
        status=status,
        channel=channel,
        limit=limit,
    )
    return ListOut(items=[DeliveryOut.of(delivery) for delivery in found])
