"""Request bodies of the routine endpoints.

These models only shape types loosely (strings, numbers, objects): the routine service
does the semantic validation (known enum values, cron expressions, zones, variable
declarations) and raises errors whose ``field`` names the input, so a client gets the
same clear message whichever way a routine is created. Unknown fields are still rejected.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from office_scheduler.api.schemas import MAX_ITEMS, InputModel

#: A loosely typed default of a declared variable (the service checks it against the type).
DefaultValue = str | bool | int | float | None


class TaskTemplateIn(InputModel):
    """What a heavy routine creates on each fire; ``{{name}}`` placeholders are filled in."""

    title: str | None = None
    description: str | None = None


class VariableIn(InputModel):
    """A declared template variable (``type``: ``text``, ``number``, ``boolean``, ``select``)."""

    name: str | None = None
    type: str | None = None
    default: DefaultValue = None
    required: bool | None = None
    options: Annotated[list[str], Field(max_length=MAX_ITEMS)] | None = None
    path: Annotated[str, Field(max_length=200)] | None = None


Variables = Annotated[list[VariableIn], Field(max_length=MAX_ITEMS)]


def _sent(model: InputModel) -> dict[str, Any]:
    """The fields the client sent, nested models as plain dicts (unsent keys left out)."""
    return model.model_dump(exclude_unset=True)


class RoutineCreate(InputModel):
    """``POST /api/v1/workspaces/{id}/routines``.

    ``task_template`` ``null`` (default) makes a lightweight routine, which wakes its
    assignee without a task; a template makes a heavy one, which creates a task per fire.
    A ``{{name}}`` used in the template but not declared in ``variables`` is declared on
    save (type ``text``). Fields sent as ``null`` take their default.
    """

    name: str | None = None
    description: str | None = None
    assignee_agent_id: str | None = None
    status: str | None = Field(default=None, description="active (default), paused, archived")
    concurrency_policy: str | None = Field(
        default=None, description="coalesce_if_active (default), skip_if_active, always_enqueue"
    )
    catch_up_policy: str | None = Field(
        default=None, description="enqueue_missed_with_cap (default), skip_missed"
    )
    catch_up_max: int | None = Field(default=None, description="1 to 1000 (default 25)")
    task_template: TaskTemplateIn | None = None
    variables: Variables | None = None

    def as_fields(self) -> dict[str, Any]:
        """The routine fields for :meth:`RoutineService.create_routine` (nulls left out)."""
        return {key: value for key, value in _sent(self).items() if value is not None}


class RoutinePatch(InputModel):
    """``PATCH /api/v1/routines/{id}``; pause with ``{"status": "paused"}``.

    ``assignee_agent_id: null`` unassigns; ``task_template: null`` makes the routine
    lightweight. ``variables`` replaces the declarations.
    """

    name: str | None = None
    description: str | None = None
    assignee_agent_id: str | None = None
    status: str | None = None
    concurrency_policy: str | None = None
    catch_up_policy: str | None = None
    catch_up_max: int | None = None
    task_template: TaskTemplateIn | None = None
    variables: Variables | None = None

    NULLABLE: ClassVar[frozenset[str]] = frozenset({"assignee_agent_id", "task_template"})

    def as_fields(self) -> dict[str, Any]:
        """The changes for :meth:`RoutineService.update_routine`.

        Raises:
            InvalidInputError: ``null`` for a field that needs a value.
        """
        self.changes(nullable=self.NULLABLE)
        return _sent(self)


class FireIn(InputModel):
    """``POST /api/v1/routines/{id}/fire``: values of the routine's variables."""

    variables: dict[str, Any] | None = None


class TriggerCreate(InputModel):
    """``POST /api/v1/routines/{id}/triggers``.

    ``kind`` ``schedule`` needs ``cron_expression`` (five fields) and takes ``timezone``
    (IANA, default UTC); ``webhook`` takes ``signing_mode`` (``none``, ``bearer``,
    ``hmac_sha256``, ``github``, ``slack``; default ``hmac_sha256``), a ``secret`` of your
    own (``github``, ``slack``: the one the sender signs with; else one is made), ``events``
    (``github``: event name → accepted actions) and ``task_id`` (``slack``: the channel
    task its messages become comments on); ``manual`` takes none of these.
    """

    kind: str
    cron_expression: str | None = None
    timezone: str | None = None
    signing_mode: str | None = None
    enabled: bool | None = None
    secret: Annotated[str, Field(max_length=500)] | None = None
    events: dict[str, list[str]] | None = None
    task_id: Annotated[str, Field(max_length=40)] | None = None

    def as_fields(self) -> dict[str, Any]:
        """The trigger fields for :meth:`RoutineService.add_trigger` (nulls left out)."""
        return {key: value for key, value in _sent(self).items() if value is not None}


class TriggerPatch(InputModel):
    """``PATCH /api/v1/routine-triggers/{id}``: enable/disable, or change a schedule."""

    enabled: bool | None = None
    cron_expression: str | None = None
    timezone: str | None = None

    def as_fields(self) -> dict[str, Any]:
        """The changes for :meth:`RoutineService.update_trigger`.

        Raises:
            InvalidInputError: an explicit ``null``.
        """
        return self.changes()
