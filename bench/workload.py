"""The wake workload of the throughput benchmarks and the office it runs against.

The workload is a list of rounds. A round is what arrives between two passes of the runs
loop: bursts of wakes, each burst for one agent and one task scope (so they coalesce into
one run), over distinct agents. Sources are mixed (comments on the agent's task, routine
heartbeats, self wakes, user wakes without a hold) and a fixed share of wakes repeat an
idempotency key seen before (silently rejected duplicates).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from office_scheduler.domain.models import ExecutorConfig, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, Classification, WakeSource
from office_scheduler.store.facade import Store

#: Seconds the fake clock moves between rounds: past the 5 s hold and the 10 s cooldown.
ROUND_STEP = timedelta(seconds=11)


@dataclass(frozen=True, slots=True)
class Wake:
    """One wake of the workload (indexes into the office's agents and tasks)."""

    agent: int
    task: int | None
    source: WakeSource
    periodic: bool
    key: str | None
    hold: bool


@dataclass(frozen=True, slots=True)
class Plan:
    """A workload: rounds of wakes, and how many wakes repeat an earlier key."""

    rounds: list[list[Wake]]
    duplicates: int

    @property
    def wakes(self) -> int:
        return sum(len(r) for r in self.rounds)


def make_plan(
    total: int, agents: int, *, round_size: int = 100, dup_share: float = 0.2, seed: int = 7
) -> Plan:
    """Build a reproducible workload of ``total`` wakes over ``agents`` agents."""
    rng = random.Random(seed)
    rounds: list[list[Wake]] = []
    used_keys: list[str] = []
    duplicates = 0
    serial = 0
    made = 0
    while made < total:
        wakes: list[Wake] = []
        order = rng.sample(range(agents), agents)
        for agent in order:
            if len(wakes) >= round_size or made + len(wakes) >= total:
                break
            kind = rng.random()
            if kind < 0.45:
                source, task, periodic, hold = WakeSource.COMMENT, agent, False, True
            elif kind < 0.65:
                source, task, periodic, hold = WakeSource.ROUTINE, None, True, True
            elif kind < 0.9:
                source, task, periodic, hold = WakeSource.SELF, None, False, True
            else:
                source, task, periodic, hold = WakeSource.USER, None, False, False
            for _ in range(rng.randint(1, 5)):
                if used_keys and rng.random() < dup_share:
                    key: str | None = rng.choice(used_keys)
                    duplicates += 1
                else:
                    serial += 1
                    key = f"{source.value}:{serial}"
                    used_keys.append(key)
                wakes.append(Wake(agent, task, source, periodic, key, hold))
        rounds.append(wakes)
        made += len(wakes)
    return Plan(rounds=rounds, duplicates=duplicates)


@dataclass(frozen=True, slots=True)
class OfficeIds:
    """The ids of the benchmark office."""

    workspace: str
    agents: list[str]
    tasks: list[str]


def build_office(store: Store, agents: int, now: datetime, home: Path) -> OfficeIds:
    """A workspace with ``agents`` workers, each with one Office task assigned (TODO).

    The workspace's default executor is ``fake`` (kind ``command``; the benchmarks plug a
    no-op executor in under that kind).
    """
    workspace = store.office.create_workspace(
        name=f"bench-{home.name}",
        settings=WorkspaceSettings(
            default_executor="fake",
            executors={"fake": ExecutorConfig(name="fake", argv=("agent",))},
        ),
        now=now,
    )
    project = store.office.create_project(
        workspace_id=workspace.id, name="site", directory=str(home / "site"), now=now
    )
    agent_ids = [
        store.office.create_agent(
            workspace_id=workspace.id, name=f"w{n}", role=AgentRole.WORKER, now=now
        ).id
        for n in range(agents)
    ]
    task_ids = [
        store.office.create_task(
            workspace_id=workspace.id,
            title=f"task {n}",
            project_id=project.id,
            assignee_agent_id=agent_id,
            now=now,
        ).id
        for n, agent_id in enumerate(agent_ids)
    ]
    return OfficeIds(workspace=workspace.id, agents=agent_ids, tasks=task_ids)


def classification(wake: Wake) -> Classification:
    return Classification.PERIODIC if wake.periodic else Classification.EVENT
