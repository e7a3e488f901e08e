"""Runaway limits in the config files (DESIGN §15).

``office.yml`` may hold a ``limits:`` mapping for the workspace and ``agents/<name>.yml``
a ``limits:`` mapping of the agent's overrides, each limit a whole number or ``null``
(no limit); see docs/scheduling.md. The files give the whole set: an import replaces the
stored limits with them (a file without ``limits:`` leaves them as they are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.runaway import check_limits
from office_scheduler.files.fields import Fields
from office_scheduler.files.model import AgentSpec, Change
from office_scheduler.store.facade import Store


def read_limits(fields: Fields, *, for_agent: bool) -> dict[str, int | None] | None:
    """The ``limits:`` mapping of a config file, checked (``None`` when absent).

    Raises:
        InvalidInputError: not a mapping, an unknown limit or a bad value; the field is
            ``<file>: limits.<name>``.
    """
    value = fields.get("limits")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise fields.error("limits", "must map limit names to whole numbers or null")
    try:
        return check_limits({str(k): v for k, v in value.items()}, for_agent=for_agent)
    except InvalidInputError as exc:
        key = exc.field or "limits"
        raise fields.error(f"limits.{key}", exc.message) from None


def workspace_limits_changed(
    store: Store, workspace_id: str | None, wanted: Mapping[str, int | None] | None
) -> bool:
    """Whether importing ``wanted`` would change the workspace's stored limits."""
    if wanted is None or workspace_id is None:
        return wanted is not None and bool(wanted)
    return store.runaway.workspace_limits(workspace_id) != dict(wanted)


def agent_limits_changed(store: Store, agent_id: str, spec: AgentSpec) -> bool:
    """Whether importing ``spec`` would change the agent's stored overrides."""
    return spec.limits is not None and store.runaway.agent_limits(agent_id) != spec.limits


def apply_limits(
    store: Store,
    workspace_id: str,
    wanted: Mapping[str, int | None] | None,
    agents: Sequence[AgentSpec],
    changes: Sequence[Change],
    now: datetime,
) -> None:
    """Store the limits of the files whose plan says they changed (or were created)."""
    runaway = store.runaway
    touched = {(change.kind, change.name) for change in changes if "limits" in change.fields}
    if wanted is not None:
        stored = runaway.workspace_limits(workspace_id)
        if stored != dict(wanted):
            runaway.set_workspace_limits(
                workspace_id, wanted, remove=set(stored) - set(wanted), now=now
            )
    for spec in agents:
        if spec.limits is None:
            continue
        agent = store.office.find_agent_by_name(workspace_id, spec.name)
        if agent is None:
            continue
        stored = runaway.agent_limits(agent.id)
        if stored != spec.limits or ("agent", spec.name) in touched:
            runaway.set_agent_limits(
                agent.id, spec.limits, remove=set(stored) - set(spec.limits), now=now
            )


def limits_data(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``limits:`` value an export writes (``None``: leave the key out)."""
    return dict(sorted(values.items())) or None
