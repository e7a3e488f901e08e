"""Routines: next fires, pause/resume, fire now, create and edit with a live cron preview.

Every write goes through :class:`~office_scheduler.routines.service.RoutineService`, as the
API's routine endpoints do; a schedule is validated before anything is written, so a bad
expression never leaves a routine without its trigger.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request
from starlette.responses import Response

from office_scheduler.cron import parse_schedule
from office_scheduler.domain.errors import InvalidInputError, NotFoundError, OfficeError
from office_scheduler.domain.routines import (
    ConcurrencyPolicy,
    Routine,
    RoutineStatus,
    RoutineTrigger,
    TriggerKind,
)
from office_scheduler.service import Service
from office_scheduler.web.cron_preview import preview
from office_scheduler.web.pages.common import PAGE_SIZE, back, page_router, show
from office_scheduler.web.params import Scope, scope_of, text
from office_scheduler.web.render import render, status_of
from office_scheduler.web.session import SameOriginDep, SessionDep, service_of

router = page_router()

FORM_FIELDS = (
    "name",
    "description",
    "assignee_agent_id",
    "concurrency_policy",
    "task_title",
    "task_description",
    "cron_expression",
    "timezone",
)


async def _routine(service: Service, scope: Scope, routine_id: str) -> Routine:
    routine = await service.routines.get_routine(routine_id)
    if routine.workspace_id != scope.workspace.id:
        raise NotFoundError(f"routine {routine_id} not found in this workspace", field="id")
    return routine


def _schedule(triggers: list[RoutineTrigger]) -> RoutineTrigger | None:
    return next((t for t in triggers if t.kind is TriggerKind.SCHEDULE), None)


@router.get("/routines")
async def routines_page(request: Request, _: SessionDep) -> Response:
    """Routines with their triggers and the next five fires of each schedule."""
    service = service_of(request)
    scope = await scope_of(request, service)
    routines = await asyncio.to_thread(service.store.routines.list_routines, scope.workspace.id)
    triggers = await asyncio.gather(*(service.routines.list_triggers(r.id) for r in routines))
    now = service.clock.now()
    rows = []
    for routine, found in zip(routines, triggers, strict=True):
        previews = [
            preview(t.cron_expression or "", t.timezone, after=now, flags=False)
            for t in found
            if t.kind is TriggerKind.SCHEDULE and t.enabled
        ]
        rows.append({"routine": routine, "triggers": found, "previews": previews})
    return show(request, "routines.html", scope, section="routines", rows=rows)


@router.get("/routines/cron-preview")
async def cron_preview(
    request: Request, _: SessionDep, cron_expression: str = "", timezone: str = ""
) -> Response:
    """The editor's live preview fragment (fires in the zone and UTC, DST flags)."""
    service = service_of(request)
    shown = preview(
        text(cron_expression, field="cron_expression", limit=200),
        text(timezone, field="timezone", limit=100),
        after=service.clock.now(),
    )
    return render(request, "cron_preview.html", {"preview": shown})


def _form_values(form: Any) -> dict[str, str]:
    values: dict[str, str] = {}
    for name in FORM_FIELDS:
        value = form.get(name)
        if value is not None and not isinstance(value, str):
            # A multipart post can carry a file under any field name.
            raise InvalidInputError(f"{name} must be text, not a file", field=name)
        values[name] = text(value, field=name, limit=5000)
    return values


def _routine_fields(values: dict[str, str], *, creating: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": values["name"],
        "description": values["description"],
        "assignee_agent_id": values["assignee_agent_id"] or None,
    }
    if values["concurrency_policy"]:
        fields["concurrency_policy"] = values["concurrency_policy"]
    if values["task_title"]:
        fields["task_template"] = {
            "title": values["task_title"],
            "description": values["task_description"],
        }
    elif not creating:
        fields["task_template"] = None
    return fields


def _editor(
    request: Request,
    scope: Scope,
    values: dict[str, str],
    *,
    routine: Routine | None,
    error: OfficeError | None = None,
) -> Response:
    status = 200 if error is None else status_of(error)
    return show(
        request,
        "routine_form.html",
        scope,
        section="routines",
        status_code=status,
        values=values,
        routine=routine,
        form_error=None if error is None else error.message,
        form_field=None if error is None else error.field,
        policies=[p.value for p in ConcurrencyPolicy],
    )


@router.get("/routines/new")
async def new_routine(request: Request, _: SessionDep) -> Response:
    """The empty routine editor."""
    scope = await scope_of(request, service_of(request))
    values = dict.fromkeys(FORM_FIELDS, "")
    values["cron_expression"] = "0 9 * * mon-fri"
    return _editor(request, scope, values, routine=None)


@router.post("/routines/new", dependencies=[SameOriginDep])
async def create_routine(request: Request, _: SessionDep) -> Response:
    """Create a routine (and its schedule trigger when an expression is given)."""
    service = service_of(request)
    scope = await scope_of(request, service)
    values = dict.fromkeys(FORM_FIELDS, "")
    try:
        async with request.form() as form:  # closes any uploaded file
            values = _form_values(form)
        if values["cron_expression"]:
            parse_schedule(values["cron_expression"], values["timezone"])
        routine = await service.routines.create_routine(
            scope.workspace.id, _routine_fields(values, creating=True)
        )
    except OfficeError as exc:
        return _editor(request, scope, values, routine=None, error=exc)
    if values["cron_expression"]:
        await service.routines.add_trigger(
            routine.id,
            {
                "kind": TriggerKind.SCHEDULE.value,
                "cron_expression": values["cron_expression"],
                "timezone": values["timezone"],
            },
        )
        service.cron.poke()
    return back(f"/routines/{routine.id}", notice=f"Routine “{routine.name}” created")


@router.get("/routines/{routine_id}")
async def routine_detail(request: Request, routine_id: str, _: SessionDep) -> Response:
    """A routine: triggers with next fires (and DST flags), and its routine runs."""
    service = service_of(request)
    scope = await scope_of(request, service)
    routine = await _routine(service, scope, routine_id)
    triggers, runs = await asyncio.gather(
        service.routines.list_triggers(routine.id),
        asyncio.to_thread(service.store.routines.list_runs, routine.id, limit=PAGE_SIZE),
    )
    now = service.clock.now()
    previews = {
        t.id: preview(t.cron_expression or "", t.timezone, after=now)
        for t in triggers
        if t.kind is TriggerKind.SCHEDULE
    }
    return show(
        request,
        "routine.html",
        scope,
        section="routines",
        routine=routine,
        triggers=triggers,
        previews=previews,
        runs=runs,
    )


@router.get("/routines/{routine_id}/edit")
async def edit_routine(request: Request, routine_id: str, _: SessionDep) -> Response:
    """The routine editor, filled in."""
    service = service_of(request)
    scope = await scope_of(request, service)
    routine = await _routine(service, scope, routine_id)
    schedule = _schedule(await service.routines.list_triggers(routine.id))
    template = routine.task_template
    values = {
        "name": routine.name,
        "description": routine.description,
        "assignee_agent_id": routine.assignee_agent_id or "",
        "concurrency_policy": routine.concurrency_policy.value,
        "task_title": template.title if template else "",
        "task_description": template.description if template else "",
        "cron_expression": (schedule.cron_expression or "") if schedule else "",
        "timezone": schedule.timezone if schedule else "",
    }
    return _editor(request, scope, values, routine=routine)


@router.post("/routines/{routine_id}/edit", dependencies=[SameOriginDep])
async def update_routine(request: Request, routine_id: str, _: SessionDep) -> Response:
    """Save the editor: routine fields, then its schedule (validated first)."""
    service = service_of(request)
    scope = await scope_of(request, service)
    routine = await _routine(service, scope, routine_id)
    values = dict.fromkeys(FORM_FIELDS, "")
    try:
        async with request.form() as form:  # closes any uploaded file
            values = _form_values(form)
        if values["cron_expression"]:
            parse_schedule(values["cron_expression"], values["timezone"])
        routine = await service.routines.update_routine(
            routine.id, _routine_fields(values, creating=False)
        )
    except OfficeError as exc:
        return _editor(request, scope, values, routine=routine, error=exc)
    if values["cron_expression"]:
        schedule = _schedule(await service.routines.list_triggers(routine.id))
        change = {"cron_expression": values["cron_expression"], "timezone": values["timezone"]}
        if schedule is None:
            await service.routines.add_trigger(
                routine.id, {"kind": TriggerKind.SCHEDULE.value, **change}
            )
        else:
            await service.routines.update_trigger(schedule.id, change)
        service.cron.poke()
    return back(f"/routines/{routine.id}", notice="Routine saved")


@router.post("/routines/{routine_id}/pause", dependencies=[SameOriginDep])
async def pause(request: Request, routine_id: str, _: SessionDep) -> Response:
    """Pause a routine (its triggers stop firing)."""
    return await _set_status(request, routine_id, RoutineStatus.PAUSED)


@router.post("/routines/{routine_id}/resume", dependencies=[SameOriginDep])
async def resume(request: Request, routine_id: str, _: SessionDep) -> Response:
    """Resume a routine (ticks missed while paused are not caught up)."""
    return await _set_status(request, routine_id, RoutineStatus.ACTIVE)


async def _set_status(request: Request, routine_id: str, status: RoutineStatus) -> Response:
    service = service_of(request)
    scope = await scope_of(request, service)
    routine = await _routine(service, scope, routine_id)
    await service.routines.update_routine(routine.id, {"status": status.value})
    service.cron.poke()
    return back("/routines", notice=f"Routine “{routine.name}” is {status.value}")


@router.post("/routines/{routine_id}/fire", dependencies=[SameOriginDep])
async def fire(request: Request, routine_id: str, _: SessionDep) -> Response:
    """Fire now (the API's manual fire); the routine's page shows what it became."""
    service = service_of(request)
    scope = await scope_of(request, service)
    routine = await _routine(service, scope, routine_id)
    run = await service.routines.fire_manual(routine.id)
    return back(
        f"/routines/{routine.id}",
        notice=f"Fired “{routine.name}”: routine run {run.id} is {run.status.value}",
    )
