"""The default step order of the processing pipeline (DESIGN §6).

The budget pre-check (step 7) sits between ``checkout`` and ``build_context``.
"""

from __future__ import annotations

from office_scheduler.pipeline.budget import budget_check
from office_scheduler.pipeline.context import Step
from office_scheduler.pipeline.guards import (
    agent_guard,
    blocker_hold,
    checkout,
    idle_skip,
    load,
    staleness,
)
from office_scheduler.pipeline.launch import build_context, launch, open_session, resolve_executor

DEFAULT_STEPS: tuple[Step, ...] = (
    load,
    agent_guard,
    staleness,
    idle_skip,
    blocker_hold,
    checkout,
    budget_check,
    build_context,
    resolve_executor,
    open_session,
    launch,
)
