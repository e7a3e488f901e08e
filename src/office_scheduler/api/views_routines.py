"""Response models of the routine endpoints (instants ISO-8601 UTC with ``Z``).

A webhook trigger's secret appears only in the response that created it
(:class:`TriggerCreatedOut`); every other view of a trigger leaves it out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from office_scheduler.api.views import Timestamp, View
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    Routine,
    RoutineRun,
    RoutineRunSource,
    RoutineRunStatus,
    RoutineStatus,
    RoutineTrigger,
    RoutineVariable,
    SigningMode,
    TaskTemplate,
    TriggerKind,
    VariableType,
)

#: Where a webhook trigger is called (relative to the server's URL).
WEBHOOK_PATH = "/api/routine-triggers/{public_id}/fire"


def webhook_path(public_id: str) -> str:
    """The path a webhook trigger with ``public_id`` is delivered to."""
    return WEBHOOK_PATH.format(public_id=public_id)


class TaskTemplateOut(View):
    """What a heavy routine creates; ``{{name}}`` placeholders are filled in per fire."""

    title: str
    description: str

    @classmethod
    def of(cls, template: TaskTemplate) -> TaskTemplateOut:
        """The view of ``template``."""
        return cls(title=template.title, description=template.description)


class VariableOut(View):
    """A declared template variable."""

    name: str
    type: VariableType
    default: str | bool | int | float | None
    required: bool
    options: list[str]
    path: str | None = None

    @classmethod
    def of(cls, variable: RoutineVariable) -> VariableOut:
        """The view of ``variable``."""
        return cls(
            name=variable.name,
            type=variable.type,
            default=variable.default,
            required=variable.required,
            options=list(variable.options),
            path=variable.path,
        )


class RoutineOut(View):
    """A routine; ``kind`` ``heavy`` creates a task per fire, ``lightweight`` only wakes."""

    id: str
    workspace_id: str
    name: str
    description: str
    kind: Literal["heavy", "lightweight"]
    assignee_agent_id: str | None
    status: RoutineStatus
    concurrency_policy: ConcurrencyPolicy
    catch_up_policy: CatchUpPolicy
    catch_up_max: int
    task_template: TaskTemplateOut | None
    variables: list[VariableOut]
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, routine: Routine) -> RoutineOut:
        """The view of ``routine``."""
        template = routine.task_template
        return cls(
            id=routine.id,
            workspace_id=routine.workspace_id,
            name=routine.name,
            description=routine.description,
            kind="heavy" if routine.is_heavy else "lightweight",
            assignee_agent_id=routine.assignee_agent_id,
            status=routine.status,
            concurrency_policy=routine.concurrency_policy,
            catch_up_policy=routine.catch_up_policy,
            catch_up_max=routine.catch_up_max,
            task_template=None if template is None else TaskTemplateOut.of(template),
            variables=[VariableOut.of(variable) for variable in routine.variables],
            created_at=routine.created_at,
            updated_at=routine.updated_at,
        )


class TriggerOut(View):
    """A trigger, without its secret; ``url_path`` is where a webhook trigger is called."""

    id: str
    routine_id: str
    kind: TriggerKind
    enabled: bool
    cron_expression: str | None
    timezone: str
    next_run_at: Timestamp | None
    last_fired_at: Timestamp | None
    public_id: str | None
    signing_mode: SigningMode | None
    url_path: str | None
    events: dict[str, list[str]] | None = None
    task_id: str | None = None
    created_at: Timestamp

    @classmethod
    def of(cls, trigger: RoutineTrigger) -> TriggerOut:
        """The view of ``trigger``."""
        return cls(**_trigger_fields(trigger))


class TriggerCreatedOut(TriggerOut):
    """A new trigger with its ``secret`` (``bearer``/``hmac_sha256`` webhooks): shown once."""

    secret: str | None = Field(
        description="the webhook secret; returned only now, never again (null when unsigned)"
    )

    @classmethod
    def created(cls, trigger: RoutineTrigger, secret: str | None) -> TriggerCreatedOut:
        """The view of a trigger that was just created, with its secret."""
        return cls(**_trigger_fields(trigger), secret=secret)


def _trigger_fields(trigger: RoutineTrigger) -> dict[str, Any]:
    return {
        "id": trigger.id,
        "routine_id": trigger.routine_id,
        "kind": trigger.kind,
        "enabled": trigger.enabled,
        "cron_expression": trigger.cron_expression,
        "timezone": trigger.timezone,
        "next_run_at": trigger.next_run_at,
        "last_fired_at": trigger.last_fired_at,
        "public_id": trigger.public_id,
        "signing_mode": trigger.signing_mode,
        "url_path": webhook_path(trigger.public_id) if trigger.public_id else None,
        "events": trigger.events,
        "task_id": trigger.channel_task_id,
        "created_at": trigger.created_at,
    }


class RoutineRunOut(View):
    """One firing of a routine and what became of it (the task or run it created)."""

    id: int
    routine_id: str
    trigger_id: str | None
    source: RoutineRunSource
    status: RoutineRunStatus
    status_reason: str | None
    variables: dict[str, Any]
    missed: dict[str, Any] | None
    idempotency_key: str | None
    linked_task_id: str | None
    linked_run_id: int | None
    coalesced_into_run_id: int | None
    dispatch_fingerprint: str | None
    scheduled_for: Timestamp | None
    created_at: Timestamp
    completed_at: Timestamp | None
    warnings: list[str] = []

    @classmethod
    def of(cls, run: RoutineRun) -> RoutineRunOut:
        """The view of ``run``."""
        return cls.model_validate(run)


class WebhookFiredOut(BaseModel):
    """``POST /api/routine-triggers/{public_id}/fire``.

    ``deduplicated`` is true when the ``Idempotency-Key`` (``X-GitHub-Delivery``) was seen
    before: the first delivery's routine run comes back and nothing else happens.
    ``ignored`` says why a delivery fired nothing (a GitHub event outside the trigger's
    ``events``); then ``routine_run`` is null. A Slack message answers ``comment_id``.
    """

    routine_run: RoutineRunOut | None
    deduplicated: bool
    ignored: str | None = None
    comment_id: str | None = None
