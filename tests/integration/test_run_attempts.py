"""Run attempts on both databases: every launch has its own run token, and the token of an
attempt that is over (requeue, lease expiry, cancel, end, a later launch) changes nothing.

The field case: a node was killed mid-session, its run's lease expired, the run was claimed
and launched again, and the first session's late ``task done`` still marked the task DONE.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from office_scheduler.api import create_app
from office_scheduler.auth import ATTEMPT_OVER, INVALID_TOKEN, attempt_over
from office_scheduler.config import Settings
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import Agent, ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import (
    AgentRole,
    OutcomeStatus,
    RunReason,
    RunStatus,
    TaskState,
)
from office_scheduler.executors.base import ExecutionSink
from office_scheduler.service import Service
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock

pytestmark = pytest.mark.timeout(120)

HOLD = timedelta(seconds=10)
#: Generous: the test waits on events, never on a fixed delay.
DEADLINE_S = 60.0


@dataclass
class HeldExecutor:
    """An in-process executor whose sessions run until the test releases them."""

    launches: list[Launch] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    releases: list[asyncio.Event] = field(default_factory=list)

    async def run(self, launch: Launch, sink: ExecutionSink) -> Outcome:
        """Record the launch, then wait until :meth:`release` lets this session end."""
        release = asyncio.Event()
        self.launches.append(launch)
        self.releases.append(release)
        await sink.started(4242)
        self.started.set()
        await release.wait()
        return Outcome(status=OutcomeStatus.SUCCEEDED)

    async def launch(self, number: int) -> Launch:
        """The ``number``-th launch (1-based), once it has happened."""
        async with asyncio.timeout(DEADLINE_S):
            while len(self.launches) < number:
                self.started.clear()
                await self.started.wait()
        return self.launches[number - 1]

    def release(self, number: int) -> None:
        """Let the ``number``-th session end (successfully)."""
        self.releases[number - 1].set()


@dataclass
class Office:
    service: Service
    clock: FakeClock
    executor: HeldExecutor
    worker: Agent
    workspace_id: str
    admin: str

    @property
    def store(self) -> Store:
        return self.service.store

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=create_app(self.service))
        return httpx.AsyncClient(transport=transport, base_url="http://office.test")


@pytest.fixture
async def office(database: Database, now: Any, tmp_path: Path) -> AsyncIterator[Office]:
    clock = FakeClock(now)
    store = Store.from_database(database)
    executor = HeldExecutor()
    settings = Settings(home=tmp_path / "home", shutdown_grace=timedelta(seconds=1))
    service = Service(settings, clock=clock, executors={"command": executor}, store=store)
    workspace = store.office.create_workspace(
        name="acme",
        settings=WorkspaceSettings(
            coalesce_window=timedelta(seconds=5),
            default_executor="held",
            executors={"held": ExecutorConfig(name="held", argv=("held",))},
        ),
        now=clock.now(),
    )
    worker = store.office.create_agent(
        workspace_id=workspace.id, name="ann", role=AgentRole.WORKER, now=clock.now()
    )
    admin, _ = service.tokens.mint_admin(name="admin", now=clock.now())
    yield Office(service, clock, executor, worker, workspace.id, admin)
    for release in executor.releases:
        release.set()
    await service.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _kinds(office: Office, run_id: int) -> list[str]:
    return [event.kind for event in office.store.runlog.list_run_events(run_id)]


def _expire_lease(office: Office, run_id: int) -> None:
    """The node holding the run died: maintenance finds its lease expired and requeues it."""
    office.clock.advance(office.service.settings.lease * 3)
    assert office.store.queue.recover_expired_leases(now=office.clock.now()) == [run_id]


def _requeue(office: Office, run_id: int) -> None:
    """The run is put back to the queue (shutdown, lost database connection)."""
    count = office.store.queue.requeue(
        [run_id], reason=RunReason.INTERRUPTED, now=office.clock.now()
    )
    assert count == 1


@pytest.mark.parametrize(
    ("end_attempt", "logged"),
    [(_expire_lease, ["lease_expired", "requeued"]), (_requeue, ["requeued"])],
    ids=["lease-expired", "requeued"],
)
async def test_a_stale_attempts_token_is_refused_while_the_next_attempt_runs(
    office: Office, end_attempt: Callable[[Office, int], None], logged: list[str]
) -> None:
    task = await office.service.office.create_task(
        workspace_id=office.workspace_id, title="Ship it", assignee_agent_id=office.worker.id
    )
    office.clock.advance(HOLD)
    drain = asyncio.create_task(office.service.run_until_idle())
    first = await office.executor.launch(1)
    run_id = first.run_id
    old_token = first.env["OFFICE_TOKEN"]
    assert office.store.queue.get_run(run_id).attempt == 1

    end_attempt(office, run_id)
    office.executor.release(1)  # the old session lives on, but its run was taken away
    second = await office.executor.launch(2)
    assert second.run_id == run_id
    new_token = second.env["OFFICE_TOKEN"]
    assert new_token != old_token
    run = office.store.queue.get_run(run_id)
    assert (run.status, run.attempt) == (RunStatus.RUNNING, 2)

    async with office.client() as client:
        path = f"/api/v1/tasks/{task.id}"
        late = await client.patch(path, json={"state": "DONE"}, headers=_bearer(old_token))
        assert late.status_code == 401, late.text
        assert late.json()["error"]["message"] == ATTEMPT_OVER
        comment = {"body": "done, I think"}
        refused = await client.post(f"{path}/comments", json=comment, headers=_bearer(old_token))
        assert refused.status_code == 401
        read = await client.get(path, headers=_bearer(old_token))
        assert read.status_code == 401
        assert read.json()["error"]["message"] == ATTEMPT_OVER
        # The current attempt's token works.
        ours = await client.patch(path, json={"state": "IN_REVIEW"}, headers=_bearer(new_token))
        assert ours.status_code == 200, ours.text
        detail = (await client.get(f"/api/v1/runs/{run_id}", headers=_bearer(office.admin))).json()

    assert office.store.office.get_task(task.id).state is TaskState.IN_REVIEW
    assert detail["attempt"] == 2
    events = office.store.runlog.list_run_events(run_id)
    kinds = [event.kind for event in events]
    ended_at = kinds.index(logged[0])
    assert kinds[ended_at : ended_at + len(logged)] == logged
    relaunched_at = len(kinds) - 1 - kinds[::-1].index("launched")
    assert kinds.index("launched") < ended_at < relaunched_at
    assert kinds.count("launched") == 2
    refusals = [event for event in events if event.kind == "stale_token_refused"]
    assert [event.data["method"] for event in refusals] == ["PATCH", "POST"], "reads not logged"
    assert refusals[0].data["attempt"] == 1
    assert refusals[0].data["current_attempt"] == 2
    launched = [event.data["attempt"] for event in events if event.kind == "launched"]
    assert launched == [1, 2]
    requeued = next(event for event in events if event.kind == "requeued")
    assert requeued.data == {"reason": "interrupted", "attempt": 1}
    tokens = [t for t in office.store.tokens.list_tokens() if t.run_id == run_id]
    revoked = sorted((t.attempt, t.revoked_at is not None) for t in tokens)
    assert revoked == [(1, True), (2, False)]

    office.executor.release(2)
    await asyncio.wait_for(drain, timeout=DEADLINE_S)
    assert office.store.queue.get_run(run_id).status is RunStatus.FINISHED
    async with office.client() as client:
        ended = await client.get(f"/api/v1/tasks/{task.id}", headers=_bearer(new_token))
    assert ended.status_code == 401
    assert ended.json()["error"]["message"] == ATTEMPT_OVER


async def test_a_cancelled_attempts_token_is_refused_and_an_admin_revocation_is_plain(
    office: Office,
) -> None:
    await office.service.office.create_task(
        workspace_id=office.workspace_id, title="Ship it", assignee_agent_id=office.worker.id
    )
    office.clock.advance(HOLD)
    drain = asyncio.create_task(office.service.run_until_idle())
    launch = await office.executor.launch(1)
    token = launch.env["OFFICE_TOKEN"]
    (record,) = [t for t in office.store.tokens.list_tokens() if t.run_id == launch.run_id]
    async with office.client() as client:
        agent_path = f"/api/v1/agents/{office.worker.id}"
        assert (await client.get(agent_path, headers=_bearer(token))).status_code == 200
        # Revoked by a person while its attempt is live: an ordinary invalid token.
        office.service.tokens.revoke(record.id, now=office.clock.now())
        revoked = await client.get(agent_path, headers=_bearer(token))
        assert revoked.json()["error"]["message"] == INVALID_TOKEN
        await office.service.cancel_run(launch.run_id)
        cancelled = await client.post(
            f"/api/v1/agents/{office.worker.id}/wake", json={}, headers=_bearer(token)
        )
    assert cancelled.status_code == 401
    assert cancelled.json()["error"]["message"] == ATTEMPT_OVER
    assert "stale_token_refused" in _kinds(office, launch.run_id)
    await asyncio.wait_for(drain, timeout=DEADLINE_S)


async def test_lease_recovery_logs_the_expiry_the_orphan_kill_and_the_requeue(
    office: Office,
) -> None:
    await office.service.office.create_task(
        workspace_id=office.workspace_id, title="Ship it", assignee_agent_id=office.worker.id
    )
    office.clock.advance(HOLD)
    (run,) = office.store.queue.claim(
        now=office.clock.now(), node_id="node-a", lease=timedelta(seconds=60), limit=1
    )
    killed: list[int] = []

    def kill(expired: list[Any]) -> list[int]:
        killed.extend(r.id for r in expired)
        return list(killed)

    later = office.clock.now() + timedelta(minutes=5)
    assert office.store.queue.recover_expired_leases(now=later, before_requeue=kill) == [run.id]
    events = [e for e in office.store.runlog.list_run_events(run.id) if e.kind != "claimed"]
    assert [e.kind for e in events] == ["lease_expired", "orphan_killed", "requeued"]
    assert events[0].data["node"] == "node-a"
    assert events[0].data["attempt"] == 0
    assert office.store.queue.get_run(run.id).status is RunStatus.QUEUED


@pytest.mark.parametrize(
    ("token_attempt", "run_attempt", "status", "over"),
    [
        (1, 1, RunStatus.RUNNING, False),
        (1, 1, RunStatus.QUEUED, True),  # requeued or lease expired
        (1, 1, RunStatus.CLAIMED, True),  # requeued, then claimed again
        (1, 2, RunStatus.RUNNING, True),  # launched again
        (1, 1, RunStatus.SCHEDULED_RETRY, True),
        (1, 1, RunStatus.FINISHED, True),
        (1, 1, RunStatus.CANCELLED, True),
        (0, 0, RunStatus.QUEUED, False),  # minted before the first launch (tools, tests)
        (0, 0, RunStatus.FAILED, True),
        (0, 1, RunStatus.RUNNING, True),
    ],
)
def test_when_an_attempt_is_over(
    token_attempt: int, run_attempt: int, status: RunStatus, over: bool
) -> None:
    assert attempt_over(token_attempt, run_attempt, status) is over
