"""Write the continuation summary after a successful taskless run (DESIGN §6 step 12).

Scope: ``routine:<routine_id>`` when a routine wake is among the run's merged wakes (the
routine id comes from its payload), ``agent`` otherwise. A failed, cancelled or retried
run writes nothing, so the last good summary stays. Task-bound runs write nothing: their
context lives in the resumed session.
"""

from __future__ import annotations

from datetime import timedelta

import structlog

from office_scheduler.domain.errors import OfficeError
from office_scheduler.domain.execution import Outcome
from office_scheduler.domain.models import Run
from office_scheduler.domain.status import OutcomeStatus, RunStatus
from office_scheduler.domain.summaries import ROUTINE_SCOPE_PREFIX, ContinuationSummary
from office_scheduler.pipeline.context import AfterEnd, RunContext
from office_scheduler.store.engine import is_connection_lost
from office_scheduler.store.facade import Store
from office_scheduler.store.runlog import RunEventRow
from office_scheduler.summary import SummaryInput, build_summary, summary_scope

log = structlog.get_logger(__name__)

#: Activity window of the first summary of a scope (later ones count since the previous).
FIRST_WINDOW = timedelta(hours=24)


def _scope_label(store: Store, scope: str) -> str:
    if not scope.startswith(ROUTINE_SCOPE_PREFIX):
        return "the agent's own wakes"
    routine_id = scope.removeprefix(ROUTINE_SCOPE_PREFIX)
    try:
        return f"routine {store.routines.get_routine(routine_id).name}"
    except OfficeError:
        return f"routine {routine_id}"


def write_summary(store: Store, run: Run, agent_name: str, scope: str) -> ContinuationSummary:
    """Build the summary of the run's scope from the store and upsert it (blocking).

    Args:
        store: the store.
        run: the ended, successful, taskless run (``finished_at`` set, UTC).
        agent_name: the run's agent's name.
        scope: the run's summary scope (:func:`~office_scheduler.summary.summary_scope`
            of its merged wakes).

    Returns:
        The stored summary.
    """
    assert run.finished_at is not None
    previous = store.summaries.get_summary(run.agent_id, scope)
    since = previous.updated_at if previous else run.finished_at - FIRST_WINDOW
    blockers = store.summaries.active_blockers(run.agent_id)
    # Names are only needed to say who holds a blocked task.
    names = store.office.agent_names(run.workspace_id) if blockers else {}
    built = build_summary(
        SummaryInput(
            agent_name=agent_name,
            scope=scope,
            scope_label=_scope_label(store, scope),
            run_id=run.id,
            finished_at=run.finished_at,
            result=run.result,
            stats=store.summaries.activity_stats(
                run.workspace_id, since=since, until=run.finished_at
            ),
            blockers=blockers,
            previous=previous.content if previous else "",
            agent_names=names,
        )
    )
    return store.summaries.upsert_summary(
        agent_id=run.agent_id,
        scope=scope,
        content=built.content,
        content_tokens=built.content_tokens,
        run_id=run.id,
        now=run.finished_at,
    )


def summary_after_end(ctx: RunContext, outcome: Outcome) -> AfterEnd | None:
    """The follow-up that rebuilds the continuation summary inside the run's end transaction.

    ``None`` for a task-bound run or an unsuccessful outcome. The follow-up writes only when
    the run ended ``finished``; it works under a savepoint, so a failure to build or write
    the summary is logged and noted as a ``summary_failed`` event and never changes the
    run's outcome (a lost connection still fails the whole end, which is then retried).
    """
    if ctx.run.task_id is not None or outcome.status is not OutcomeStatus.SUCCEEDED:
        return None
    store = ctx.deps.store
    name = ctx.agent.name if ctx.agent is not None else ctx.run.agent_id
    scope = summary_scope(ctx.wakes.entries if ctx.wakes is not None else ())

    def write(run: Run) -> list[RunEventRow]:
        if run.status is not RunStatus.FINISHED:
            return []
        at = run.finished_at or ctx.deps.clock.now()
        try:
            with store.db.transaction() as conn, conn.begin_nested():
                stored = write_summary(store, run, name, scope)
        except Exception as exc:  # the run has ended; a summary problem must not undo it
            if is_connection_lost(exc):
                raise
            log.exception("continuation_summary_failed", run_id=run.id, agent_id=run.agent_id)
            return [(run.id, "summary_failed", f"continuation summary not written: {exc}", {}, at)]
        size = len(stored.content.encode())
        data = {"scope": stored.scope, "bytes": size, "tokens": stored.content_tokens}
        message = f"continuation summary {stored.scope}: {size} bytes"
        return [(run.id, "summary_updated", message, data, at)]

    return write
