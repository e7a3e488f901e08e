"""Shared test helpers (importable as ``helpers``; ``tests`` is on the pytest path)."""

from __future__ import annotations

from dataclasses import dataclass

from office_scheduler.domain.models import Agent, ContextEntry, Project, WakeRequest, Workspace
from office_scheduler.domain.routines import Routine, RoutineRun, RoutineRunSource
from office_scheduler.domain.status import WakeSource
from office_scheduler.service import Service
from office_scheduler.store.facade import Store
from office_scheduler.store.routine_runs import NewRoutineRun
from office_scheduler.testing import FakeClock, ScriptedExecutor


@dataclass
class Office:
    """A small office: a workspace with a coordinator, two workers and a project."""

    service: Service
    clock: FakeClock
    executor: ScriptedExecutor
    workspace: Workspace
    coordinator: Agent
    worker: Agent
    other_worker: Agent
    project: Project

    @property
    def store(self) -> Store:
        return self.service.store

    def received_manual_run(self, routine: Routine) -> RoutineRun:
        """A manual fire of ``routine`` stored ``received``, as if its process stopped there."""
        run, _ = self.store.routines.insert_run(
            NewRoutineRun(
                routine_id=routine.id,
                trigger_id=None,
                source=RoutineRunSource.MANUAL,
                variables={},
                scheduled_for=None,
                key_prefix=f"routine:{routine.id}:manual:",
            ),
            now=self.clock.now(),
        )
        return run


def self_wake(
    office: Office, agent_id: str, key: str | None, *, hold: bool = True, task_id: str | None = None
) -> WakeRequest:
    """A self wake keyed ``key`` (payload ``{"key": key}``), held for the workspace's
    coalescing window unless ``hold`` is off (as for a user wake)."""
    return WakeRequest(
        workspace_id=office.workspace.id,
        agent_id=agent_id,
        source=WakeSource.SELF,
        payload={"key": key},
        idempotency_key=key,
        hold=hold,
        task_id=task_id,
    )


def dashboard_session(service: Service, secret: str) -> str:
    """A dashboard session id (the cookie's value) for the admin token ``secret``."""
    now = service.clock.now()
    return service.tokens.start_session(service.tokens.authenticate(secret, now=now), now=now)


def merged_wakes(store: Store, run_id: int) -> tuple[ContextEntry, ...]:
    """Every wake merged into run ``run_id``, oldest first (for runs of a few hundred)."""
    wakes = store.queue.run_wakes(run_id, newest=1000)
    assert wakes.total == len(wakes.entries), "more wakes than this helper reads"
    return wakes.entries
