"""Reading and validating ``routines/<name>.yml``: one routine with its triggers per file.

The values are checked by the routine service's own validators
(:mod:`office_scheduler.routines.validation`, :mod:`office_scheduler.routines.templates`,
:func:`office_scheduler.cron.parse_schedule`) and normalised the way the service stores
them (stripped texts, every ``{{name}}`` of the template declared, normalised cron
expressions), so a loaded routine compares equal to the stored one it was imported as.
Their errors are relabelled in the loader's style: ``routines/nightly.yml: triggers[0].cron:
'0 2 * *' has 4 fields; ...``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from office_scheduler.cron import parse_schedule
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.routines import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    RoutineStatus,
    SigningMode,
    TriggerKind,
)
from office_scheduler.files.fields import Fields, read_yaml
from office_scheduler.files.model import RoutineSpec, TriggerSpec
from office_scheduler.routines import validation, webhooks
from office_scheduler.routines.templates import declare_variables

T = TypeVar("T")

#: Trigger keys and the kind of trigger they belong to.
_TRIGGER_KEYS = {
    "cron": "schedule",
    "timezone": "schedule",
    "signing_mode": "webhook",
    "events": "webhook",
}
DEFAULT_TIMEZONE = "UTC"


_KIND_ORDER = {kind: index for index, kind in enumerate(TriggerKind)}


def trigger_order(
    kind: TriggerKind, cron: str | None, timezone: str, signing_mode: SigningMode | None
) -> tuple[int, str, str, str]:
    """The sort key of a trigger: a routine's triggers are kept in one canonical order.

    Loading and export both sort by it, so export → load gives equal routines whatever
    order the file listed the triggers in (the store orders them by creation).
    """
    mode = signing_mode.value if signing_mode is not None else ""
    return (_KIND_ORDER[kind], cron or "", timezone or DEFAULT_TIMEZONE, mode)


def _checked(where: str, call: Callable[[], T], rename: Mapping[str, str] | None = None) -> T:
    """Run a service validator; relabel its error as ``file: key: message``."""
    try:
        return call()
    except InvalidInputError as exc:
        field = exc.field or ""
        message = exc.message
        if field and message.startswith(field):
            message = message[len(field) :].lstrip(" :")
        key = (rename or {}).get(field, field)
        label = f"{where}: {key}" if key else where
        raise InvalidInputError(f"{label}: {message}", field=label) from None


def _trigger(data: object, where: str, index: int) -> TriggerSpec:
    prefix = f"triggers[{index}]"
    spec = Fields(data, where, f"{prefix}.")
    kind = TriggerKind(spec.choice("kind", TriggerKind))
    enabled = spec.boolean("enabled", True)
    for key, owner in _TRIGGER_KEYS.items():
        if owner != kind.value and key in spec.data:
            raise spec.error(key, f"does not apply to a {kind.value} trigger")
    trigger = TriggerSpec(kind=kind, enabled=enabled)
    if kind is TriggerKind.SCHEDULE:
        cron = spec.get("cron")
        if not isinstance(cron, str):
            raise spec.error("cron", "a schedule trigger needs a cron expression (a string)")
        timezone = spec.text("timezone", DEFAULT_TIMEZONE)
        rename = {"cron_expression": f"{prefix}.cron", "timezone": f"{prefix}.timezone"}
        schedule = _checked(where, lambda: parse_schedule(cron, timezone), rename)
        trigger = TriggerSpec(
            kind=kind,
            enabled=enabled,
            cron=schedule.expression,
            timezone=schedule.timezone or DEFAULT_TIMEZONE,
        )
    elif kind is TriggerKind.WEBHOOK:
        mode = SigningMode(spec.choice("signing_mode", SigningMode, SigningMode.HMAC_SHA256.value))
        if mode is SigningMode.SLACK:
            raise spec.error(
                "signing_mode",
                "slack triggers name their channel task: create them with the API or CLI",
            )
        raw_events = spec.get("events")
        if raw_events is not None and mode is not SigningMode.GITHUB:
            raise spec.error("events", "applies to a github webhook only")
        events = _checked(
            where,
            lambda: webhooks.check_github_events(raw_events),
            {"events": f"{prefix}.events"},
        )
        trigger = TriggerSpec(kind=kind, enabled=enabled, signing_mode=mode, events=events)
    spec.done()
    return trigger


def load_routine(path: Path, where: str) -> RoutineSpec:
    """Read and validate one routine file (``where`` names it in errors).

    The name defaults to the file's stem. The assignee is checked against the agents by
    :func:`~office_scheduler.files.load.load_config`.

    Raises:
        InvalidInputError: a malformed file or value; ``field`` names the file and key, e.g.
            ``routines/nightly.yml: triggers[0].cron``.
    """
    spec = Fields(read_yaml(path, where), where)
    raw_name = spec.get("name")
    name = _checked(
        where,
        lambda: validation.text(
            path.stem if raw_name is None else raw_name, field="name", limit=200
        ),
    )
    description = _checked(
        where,
        lambda: validation.text(
            spec.text("description"),
            field="description",
            limit=validation.MAX_DESCRIPTION,
            required=False,
        ),
    )
    assignee = spec.optional_text("assignee")
    status = RoutineStatus(spec.choice("status", RoutineStatus, RoutineStatus.ACTIVE.value))
    concurrency = ConcurrencyPolicy(
        spec.choice(
            "concurrency_policy", ConcurrencyPolicy, ConcurrencyPolicy.COALESCE_IF_ACTIVE.value
        )
    )
    catch_up = CatchUpPolicy(
        spec.choice("catch_up_policy", CatchUpPolicy, CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP.value)
    )
    catch_up_max = spec.integer("catch_up_max", 25, minimum=1, maximum=validation.MAX_CATCH_UP)
    raw_template = spec.get("task_template")
    template = _checked(where, lambda: validation.task_template(raw_template))
    declared = spec.get("variables")
    if declared is None:
        declared = []
    if not isinstance(declared, list):
        raise spec.error("variables", "must be a list of variable declarations")
    variables = _checked(where, lambda: declare_variables(declared, template))
    raw_triggers = spec.get("triggers")
    if raw_triggers is None:
        raw_triggers = []
    if not isinstance(raw_triggers, list):
        raise spec.error("triggers", "must be a list of triggers")
    triggers = tuple(
        sorted(
            (_trigger(item, where, index) for index, item in enumerate(raw_triggers)),
            key=lambda t: trigger_order(t.kind, t.cron, t.timezone, t.signing_mode),
        )
    )
    spec.done()
    return RoutineSpec(
        name=name,
        description=description,
        assignee=assignee.strip() if assignee else None,
        status=status,
        concurrency_policy=concurrency,
        catch_up_policy=catch_up,
        catch_up_max=catch_up_max,
        task_template=template,
        variables=variables,
        triggers=triggers,
    )
