"""The claim-time merge rules (specification "Coalescing - three layers", DESIGN §5 step 2).

Pure functions: given the new request and the agent's in-flight run in the same task
scope, decide whether to merge into it or to create a fresh run.
"""

from __future__ import annotations

from office_scheduler.domain.models import Run, WakeRequest
from office_scheduler.domain.status import Classification, MergeDecision, RunStatus, WakeSource

#: Wakes that people and agents send themselves (``Service.wake``, ``wake_many``).
EXPLICIT_SOURCES = frozenset({WakeSource.USER, WakeSource.SELF})


def needs_promotion(run: Run, request: WakeRequest) -> bool:
    """True when merging would promote the run periodic → event (monotonic, never back)."""
    return (
        run.classification is Classification.PERIODIC
        and request.classification is Classification.EVENT
    )


def decide_merge(request: WakeRequest, in_flight: Run | None) -> MergeDecision:
    """Decide how ``request`` joins the agent's in-flight run.

    Rules:
        * no in-flight run → create a run;
        * ``queued`` run → coalesce, promoting periodic → event when needed;
        * ``claimed`` run that would need promotion → create a fresh run: the claimed
          run's idle-skip decision is already in flight and must not be raced;
        * ``claimed`` run needing no promotion → coalesce (the launch step rebuilds the
          prompt when the context version moved).

    Args:
        request: the new wake.
        in_flight: the agent's newest ``queued`` (preferred) or ``claimed`` run of the same
            task scope, or ``None``.
    """
    if in_flight is None:
        return MergeDecision.CREATE
    promote = needs_promotion(in_flight, request)
    if in_flight.status is RunStatus.QUEUED:
        return MergeDecision.COALESCE_AND_PROMOTE if promote else MergeDecision.COALESCE
    if in_flight.status is RunStatus.CLAIMED and not promote:
        return MergeDecision.COALESCE
    return MergeDecision.CREATE


def not_the_assignee(task_id: str, assignee: str | None, agent: str) -> str:
    """Why an explicit wake about ``task_id`` for ``agent`` is refused (not its assignee).

    Such a run would only be cancelled as ``assignee_changed`` by the staleness check
    (specification "Staleness check"), so user and self wakes are refused up front.
    ``assignee`` and ``agent`` are how the message names them (names or ids).
    """
    if assignee is None:
        return (
            f"task {task_id} has no assignee, and a wake about a task runs only for its "
            f"assignee: assign it to {agent} first, or queue a run for any agent (runs queue)"
        )
    return (
        f"task {task_id} is assigned to {assignee}, not to {agent}: a wake about a task runs "
        f"only for its assignee (wake {assignee}, or queue a run for any agent: runs queue)"
    )
