"""Causation of wakes and the runaway limits that hold them (DESIGN §15)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from office_scheduler.domain.errors import InvalidInputError


@dataclass(frozen=True, kw_only=True, slots=True)
class Causation:
    """What caused one wake (and the run it makes).

    Attributes:
        caused_by_run_id: the run whose action produced the wake; ``None`` at a chain's root.
        depth: 0 for a person, a routine's trigger or a webhook; the causing run's depth + 1.
        human_rooted: whether a person's action is at the root of the chain.
        causing_agent_id: the agent of ``caused_by_run_id`` (not stored with the wake).
    """

    caused_by_run_id: int | None = None
    depth: int = 0
    human_rooted: bool = False
    causing_agent_id: str | None = None

    @property
    def by_person_directly(self) -> bool:
        """A person's own action made the wake: no runaway limit ever holds it."""
        return self.depth == 0 and self.human_rooted and self.caused_by_run_id is None

    def columns(self) -> dict[str, Any]:
        """The stored columns of a wakeup request or run."""
        return {
            "caused_by_run_id": self.caused_by_run_id,
            "causation_depth": self.depth,
            "human_rooted": self.human_rooted,
        }


#: The default limits; ``None`` means no limit.
DEFAULT_LIMITS: Mapping[str, int | None] = {
    "max_causation_depth": 12,
    "max_self_wakes_per_hour": 6,
    "max_runs_per_hour": 30,
    "max_workspace_runs_per_hour": 300,
    "max_routine_runs_per_day": None,
    "no_progress_runs": 3,
}
#: Limits that only make sense for a whole workspace (an agent cannot override them).
WORKSPACE_ONLY_LIMITS = frozenset({"max_workspace_runs_per_hour"})
#: Largest value a limit may take.
MAX_LIMIT_VALUE = 1_000_000


@dataclass(frozen=True, kw_only=True, slots=True)
class RunawayLimits:
    """The effective runaway limits of one agent (``None``: no limit).

    Attributes:
        max_causation_depth: most links in a chain of runs waking runs (default 12).
        max_self_wakes_per_hour: most self-wakes of one agent in a rolling hour (default 6).
        max_runs_per_hour: most runs of one agent in a rolling hour (default 30).
        max_workspace_runs_per_hour: most runs of the whole workspace in a rolling hour
            (default 300).
        max_routine_runs_per_day: most runs one routine makes in a rolling 24 hours
            (default: no limit).
        no_progress_runs: how many runs of an agent on one task that changed nothing, caused
            by the same agent, hold the next event wake (default 3).
    """

    max_causation_depth: int | None = 12
    max_self_wakes_per_hour: int | None = 6
    max_runs_per_hour: int | None = 30
    max_workspace_runs_per_hour: int | None = 300
    max_routine_runs_per_day: int | None = None
    no_progress_runs: int | None = 3

    @classmethod
    def resolve(
        cls, workspace: Mapping[str, Any] | None, agent: Mapping[str, Any] | None
    ) -> RunawayLimits:
        """The defaults, overridden by the workspace's settings, then by the agent's.

        Unknown or malformed stored keys are ignored (they were checked when set).
        """
        values: dict[str, int | None] = dict(DEFAULT_LIMITS)
        for layer in (workspace or {}, agent or {}):
            for key, value in layer.items():
                if key in values and (value is None or isinstance(value, int)):
                    values[key] = value
        return cls(**values)

    def as_dict(self) -> dict[str, int | None]:
        """Every limit by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def with_(self, **changes: int | None) -> RunawayLimits:
        """A copy with ``changes``."""
        return replace(self, **changes)


def check_limits(
    values: Mapping[str, Any], *, for_agent: bool = False, prefix: str = ""
) -> dict[str, int | None]:
    """Validate a set of limits (a workspace's, or an agent's overrides).

    Args:
        values: limit name → a whole number ≥ 0, or ``None`` for no limit.
        for_agent: refuse the limits only a workspace has.
        prefix: put in front of the field name of an error (``settings.``, ``limits.``).

    Returns:
        The validated limits.

    Raises:
        InvalidInputError: an unknown name, or a value that is not ``None`` or a whole
            number from 0 to 1,000,000 (field: the limit's name).
    """
    checked: dict[str, int | None] = {}
    for key, value in values.items():
        if key not in DEFAULT_LIMITS or (for_agent and key in WORKSPACE_ONLY_LIMITS):
            scope = "an agent" if for_agent else "a workspace"
            known = ", ".join(
                k for k in DEFAULT_LIMITS if not (for_agent and k in WORKSPACE_ONLY_LIMITS)
            )
            raise InvalidInputError(
                f"unknown limit {key!r} for {scope} (known: {known})", field=f"{prefix}{key}"
            )
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MAX_LIMIT_VALUE
        ):
            raise InvalidInputError(
                f"{key} must be a whole number from 0 to {MAX_LIMIT_VALUE}, or null for no limit",
                field=f"{prefix}{key}",
            )
        checked[key] = value
    return checked
