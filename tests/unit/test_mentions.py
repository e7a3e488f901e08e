"""Which agents a comment @mentions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from office_scheduler.domain.models import Agent
from office_scheduler.domain.status import AgentRole, AgentStatus
from office_scheduler.events.mentions import mentioned

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _agent(name: str) -> Agent:
    return Agent(
        id=f"id-{name}",
        workspace_id="ws",
        name=name,
        role=AgentRole.WORKER,
        status=AgentStatus.IDLE,
        instructions="",
        max_concurrent_sessions=1,
        cooldown=timedelta(seconds=10),
        skip_idle_wakeups=True,
        executor=None,
        last_wakeup_finished_at=None,
        created_at=T0,
    )


AGENTS = [_agent("ann"), _agent("ann smith"), _agent("bob"), _agent("q.a")]


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ("@bob look", ["bob"]),
        ("thanks @Bob!", ["bob"]),
        ("@ann smith and @bob", ["ann smith", "bob"]),
        ("@ann smith alone", ["ann smith"]),
        ("@ann, and @ann smith", ["ann", "ann smith"]),
        ("mail ops@bob.example", []),
        ("@annie", []),
        ("@@bob", []),
        ("ask @q.a.", ["q.a"]),
        ("no mention", []),
    ],
)
def test_mentions(body: str, names: list[str]) -> None:
    assert [agent.name for agent in mentioned(body, AGENTS)] == names
