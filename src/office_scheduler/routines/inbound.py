"""Webhook deliveries from the tools people use: GitHub and Slack, beside the product's own.

``POST /api/routine-triggers/{public_id}/fire`` lands here. A ``github`` trigger verifies
GitHub's signature, answers ``ping`` without firing, drops events outside its ``events``
filter (answered, nothing fired) and keys each delivery by ``X-GitHub-Delivery``, so a
redelivery never fires twice; the event's JSON body is ``payload`` to the routine's
templates and variables. A ``slack`` trigger verifies Slack's signature, answers the URL
verification challenge, and turns each person's message into a comment on its channel task
(the specification's channel pathway), keyed by Slack's ``event_id``. Other signing modes
go to :meth:`RoutineService.fire_webhook` unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Comment
from office_scheduler.domain.routines import (
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
    RoutineTrigger,
    SigningMode,
)
from office_scheduler.domain.status import AuthorKind
from office_scheduler.routines import webhooks
from office_scheduler.routines.service import RoutineService
from office_scheduler.routines.templates import builtin_values, render_template, resolve_variables
from office_scheduler.store.facade import Store
from office_scheduler.store.routine_runs import NewRoutineRun

log = structlog.get_logger(__name__)


class PostComment(Protocol):
    """``OfficeService.add_comment``'s shape, as far as a channel message needs it."""

    def __call__(
        self,
        task_id: str,
        body: str,
        *,
        author_kind: AuthorKind = ...,
        author_agent_id: str | None = ...,
        channel: str | None = ...,
        external_author: str | None = ...,
    ) -> Awaitable[Comment]:
        """Post a comment on ``task_id``."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookOutcome:
    """What one delivery came to.

    Attributes:
        run: the routine run it fired (or the earlier one of a repeated key).
        created: false when the delivery's key was seen before (nothing else happened).
        ignored: why the delivery fired nothing, when it was answered without firing.
        pong: a GitHub ``ping`` (answered 200).
        challenge: Slack's URL verification challenge, to echo back.
        comment_id: the comment a Slack message became.
    """

    run: RoutineRun | None = None
    created: bool = False
    ignored: str | None = None
    pong: bool = False
    challenge: str | None = None
    comment_id: str | None = None


#: Slack message subtypes that are not a person's new message (edits, joins, bots...).
_SLACK_MESSAGE_TYPES = frozenset({"message", "app_mention"})


class InboundWebhooks:
    """Receives webhook deliveries of every signing mode.

    Args:
        store: the database.
        clock: time source.
        routines: fires routines (and handles the product's own signing modes).
        post_comment: posts a channel message as a comment (``OfficeService.add_comment``).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        routines: RoutineService,
        post_comment: PostComment | Callable[..., Awaitable[Comment]],
    ) -> None:
        self._store = store
        self._clock = clock
        self._routines = routines
        self._post_comment = post_comment
        #: A lock per Slack delivery key being handled, and how many requests use it: Slack
        #: retries a request it got no answer to within 3 s, and the retry must wait for
        #: the first one's comment.
        self._slack_keys: dict[str, tuple[asyncio.Lock, int]] = {}

    async def receive(
        self, public_id: str, headers: Mapping[str, str], body: bytes
    ) -> WebhookOutcome:
        """Handle one delivery.

        Args:
            public_id: the trigger's URL id.
            headers: request headers, names in lower case.
            body: the raw body.

        Raises:
            NotFoundError: no such webhook trigger.
            AuthError: a missing or wrong signature, or a stale timestamp; nothing is stored.
            ConflictError: a disabled trigger or inactive routine; a replayed Slack request.
            InvalidInputError: a malformed body or a variable of the wrong type.
        """
        found = await asyncio.to_thread(self._store.routines.webhook_trigger, public_id)
        if found is None:
            raise NotFoundError("no such webhook trigger", field="public_id")
        trigger, secret = found
        mode = trigger.signing_mode or SigningMode.NONE
        if mode is SigningMode.GITHUB:
            return await self._github(trigger, secret, headers, body)
        if mode is SigningMode.SLACK:
            return await self._slack(trigger, secret, headers, body)
        run, created = await self._routines.fire_webhook(public_id, headers, body)
        return WebhookOutcome(run=run, created=created)

    async def _github(
        self,
        trigger: RoutineTrigger,
        secret: str | None,
        headers: Mapping[str, str],
        body: bytes,
    ) -> WebhookOutcome:
        now = self._clock.now()
        webhooks.verify(SigningMode.GITHUB, secret, headers, body, now)
        event = headers.get(webhooks.GITHUB_EVENT_HEADER, "").strip()
        if not event:
            raise InvalidInputError("missing X-GitHub-Event header", field="X-GitHub-Event")
        if event == "ping":
            return WebhookOutcome(pong=True)
        data = webhooks.parse_github_payload(headers, body)
        action = data.get("action")
        if not webhooks.github_event_accepted(trigger.events, event, action):
            what = f"{event}.{action}" if isinstance(action, str) else event
            return WebhookOutcome(ignored=f"GitHub event {what} is not in the trigger's events")
        delivery = headers.get(webhooks.GITHUB_DELIVERY_HEADER, "").strip()[:200]
        key = webhooks.idempotency_key({"idempotency-key": delivery}) if delivery else None
        prefix = f"routine:{trigger.routine_id}:webhook:"
        scoped_key = f"{prefix}{key}" if key else None
        if scoped_key is not None:
            earlier = await asyncio.to_thread(self._store.routines.find_run_by_key, scoped_key)
            if earlier is not None:
                return WebhookOutcome(run=earlier, created=False)
        routine = await self._routines.firing_routine(trigger)
        warnings: list[str] = []
        provided = {
            "github_event": event,
            "github_action": action if isinstance(action, str) else "",
            "github_delivery": delivery,
        }
        values = resolve_variables(
            routine.variables,
            provided,
            builtin_values(now, trigger.timezone),
            payload=data,
            warnings=warnings,
        )
        if routine.task_template is not None:
            render_template(routine.task_template, values, warnings)  # collects missing paths
        run, created = await asyncio.to_thread(
            self._store.routines.insert_run,
            NewRoutineRun(
                routine_id=routine.id,
                trigger_id=trigger.id,
                source=RoutineRunSource.WEBHOOK,
                variables=values,
                scheduled_for=None,
                idempotency_key=scoped_key,
                key_prefix=prefix,
                warnings=tuple(warnings),
            ),
            now=now,
        )
        if not created:
            return WebhookOutcome(run=run, created=False)
        if warnings:
            log.warning("webhook_payload_paths_missing", routine_run_id=run.id, missing=warnings)
        return WebhookOutcome(run=await self._routines.dispatch(run, routine), created=True)

    async def _slack(
        self,
        trigger: RoutineTrigger,
        secret: str | None,
        headers: Mapping[str, str],
        body: bytes,
    ) -> WebhookOutcome:
        now = self._clock.now()
        signature = webhooks.verify(SigningMode.SLACK, secret, headers, body, now)
        data = webhooks.parse_json_object(body)
        kind = data.get("type")
        if kind == "url_verification":
            challenge = data.get("challenge")
            if not isinstance(challenge, str):
                raise InvalidInputError("url_verification needs a challenge", field="challenge")
            return WebhookOutcome(challenge=challenge)
        if kind != "event_callback":
            return WebhookOutcome(ignored=f"Slack request type {kind!r} is not a message")
        event = data.get("event")
        if not isinstance(event, dict) or event.get("type") not in _SLACK_MESSAGE_TYPES:
            return WebhookOutcome(ignored="the Slack event is not a message")
        text, user = event.get("text"), event.get("user")
        if event.get("subtype") or event.get("bot_id") or not isinstance(user, str):
            # Edits, joins and bots' messages (ours included) wake nobody: a loop guard.
            return WebhookOutcome(ignored="the Slack message is not a person's new message")
        if not isinstance(text, str) or not text.strip():
            return WebhookOutcome(ignored="the Slack message has no text")
        task_id = trigger.channel_task_id
        if task_id is None:
            raise ConflictError("this slack trigger has no channel task", field="task_id")
        event_id = data.get("event_id")
        key_part = event_id if isinstance(event_id, str) and event_id else signature
        prefix = f"routine:{trigger.routine_id}:webhook:"
        scoped_key = f"{prefix}slack:{str(key_part)[:150]}"
        lock, users = self._slack_keys.get(scoped_key, (asyncio.Lock(), 0))
        self._slack_keys[scoped_key] = (lock, users + 1)
        try:
            async with lock:
                return await self._slack_message(trigger, event, scoped_key, prefix, now)
        finally:
            lock, users = self._slack_keys[scoped_key]
            if users == 1:
                del self._slack_keys[scoped_key]
            else:
                self._slack_keys[scoped_key] = (lock, users - 1)

    async def _slack_message(
        self,
        trigger: RoutineTrigger,
        event: Mapping[str, Any],
        scoped_key: str,
        prefix: str,
        now: datetime,
    ) -> WebhookOutcome:
        """Post one Slack message as a comment, once per key (the caller holds its lock)."""
        text, user = event["text"], event["user"]
        task_id = trigger.channel_task_id
        assert task_id is not None  # checked by the caller
        earlier = await asyncio.to_thread(self._store.routines.find_run_by_key, scoped_key)
        if earlier is not None:
            return WebhookOutcome(run=earlier, created=False)
        routine = await self._routines.firing_routine(trigger)
        channel = event.get("channel")
        comment = await self._post_comment(
            task_id,
            text,
            author_kind=AuthorKind.USER,
            channel=f"slack:{channel}"[:60] if isinstance(channel, str) else "slack",
            external_author=user[:200],
        )
        run, created = await asyncio.to_thread(
            self._store.routines.insert_run,
            NewRoutineRun(
                routine_id=routine.id,
                trigger_id=trigger.id,
                source=RoutineRunSource.WEBHOOK,
                variables={"slack_channel": channel, "slack_user": user, "text": text},
                scheduled_for=None,
                idempotency_key=scoped_key,
                key_prefix=prefix,
                status=RoutineRunStatus.DONE,
                status_reason=f"comment {comment.id} on task {task_id}",
            ),
            now=now,
        )
        log.info("slack_message_received", task_id=task_id, comment_id=comment.id)
        return WebhookOutcome(run=run, created=created, comment_id=comment.id)
