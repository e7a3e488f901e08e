"""Outbound notifications: channels, event names and deliveries (DESIGN §11).

A *channel* is where a workspace's people want to hear about events: a ``webhook`` (a JSON
POST signed in the Standard Webhooks format) or a ``slack`` incoming webhook. Each event
that matches a channel becomes one *delivery* in a durable outbox, written in the same
transaction as the event itself; a delivery keeps one stable id over all its attempts, so
receivers can drop a repeat. Instants are aware UTC datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class ChannelKind(StrEnum):
    """How a channel is reached."""

    WEBHOOK = "webhook"
    SLACK = "slack"


class DeliveryStatus(StrEnum):
    """Outbox lifecycle: ``pending`` (due now or after a backoff) → ``delivered`` | ``failed``."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class NotificationEvent(StrEnum):
    """The dotted event names a channel can subscribe to.

    Inbox items notify under their kind (``approval.requested``, ``agent.error``,
    ``budget.alert``, ...); ``run.failed`` and ``task.done`` come from the run and task
    transitions themselves.
    """

    APPROVAL_REQUESTED = "approval.requested"
    AGENT_ERROR = "agent.error"
    AGENT_PAUSED = "agent.paused"
    ACCOUNT_ACTION_REQUIRED = "account.action_required"
    BUDGET_ALERT = "budget.alert"
    BUDGET_EXCEEDED = "budget.exceeded"
    EXECUTOR_MISSING = "executor.missing"
    TASK_REVIEW = "task.review"
    WAKE_HELD = "wake.held"
    WORKTREE_KEPT = "worktree.kept"
    RUN_FAILED = "run.failed"
    TASK_DONE = "task.done"


#: What ``office notify test`` sends: never produced by the scheduler itself.
TEST_EVENT = "notification.test"


@dataclass(frozen=True, kw_only=True, slots=True)
class NotificationChannel:
    """One outbound channel of a workspace.

    Attributes:
        name: unique within the workspace (``[A-Za-z0-9_.-]``, up to 100 characters).
        events: the event names it receives; empty means every event.
        url: the receiver's URL (a secret: it often embeds a token, as Slack's do).
        secret: ``whsec_<base64>`` signing secret of a ``webhook`` channel; ``None`` for slack.
    """

    id: str
    workspace_id: str
    name: str
    kind: ChannelKind
    url: str
    secret: str | None
    events: tuple[str, ...]
    enabled: bool
    created_at: datetime
    updated_at: datetime

    def wants(self, event: str) -> bool:
        """Whether an event of this name is delivered to the channel."""
        return self.enabled and (not self.events or event in self.events)


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """One event on its way to one channel.

    Attributes:
        id: the stable delivery id (``msg_<32 hex>``), sent as ``webhook-id`` on every attempt.
        payload: ``{"type", "timestamp", "data"}`` as sent (Standard Webhooks' shape).
        attempts: attempts made so far.
        next_attempt_at: when the next attempt is due (``pending`` only).
        give_up_at: after this instant a failed attempt ends the delivery ``failed``.
    """

    id: str
    workspace_id: str
    channel_id: str
    channel_name: str
    event: str
    payload: dict[str, Any]
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    give_up_at: datetime
    last_error: str | None
    last_status_code: int | None
    created_at: datetime
    delivered_at: datetime | None
