"""Per-agent settings in the store on both databases: reports_to, permission policy."""

from __future__ import annotations

import pytest

from helpers import Office
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.models import WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AgentStatus


def test_reports_to_must_be_another_agent_of_the_workspace_without_cycles(
    office: Office,
) -> None:
    agents, now = office.store.office, office.clock.now()
    boss, ann, bob = office.coordinator.id, office.worker.id, office.other_worker.id
    assert agents.update_agent(ann, now=now, reports_to=boss).reports_to == boss
    assert agents.update_agent(bob, now=now, reports_to=ann).reports_to == ann

    other_ws = agents.create_workspace(name="elsewhere", settings=WorkspaceSettings(), now=now)
    stranger = agents.create_agent(
        workspace_id=other_ws.id, name="x", role=AgentRole.WORKER, now=now
    )
    bad = [
        (ann, ann, "itself"),
        (ann, stranger.id, "no agent"),
        (boss, bob, "cycle"),  # bob -> ann -> boss -> bob
        (ann, "", "agent id"),
    ]
    for agent_id, target, words in bad:
        with pytest.raises(InvalidInputError) as caught:
            agents.update_agent(agent_id, now=now, reports_to=target)
        assert caught.value.field == "reports_to"
        assert words in caught.value.message
    assert agents.get_agent(boss).reports_to is None
    assert agents.update_agent(bob, now=now, reports_to=None).reports_to is None
    created = agents.create_agent(
        workspace_id=office.workspace.id,
        name="cat",
        role=AgentRole.WORKER,
        now=now,
        reports_to=boss,
    )
    assert created.reports_to == boss


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ("allow_all", "permission_policy"),
        ({"mode": "sometimes"}, "permission_policy.mode"),
        ({"tools": []}, "permission_policy.mode"),
        ({"mode": "allow_listed", "tools": "bash"}, "permission_policy.tools"),
        ({"mode": "allow_listed", "tools": [""]}, "permission_policy.tools"),
        ({"mode": "deny", "tools": ["bash"]}, "permission_policy.tools"),
        ({"mode": "deny", "colour": "red"}, "permission_policy.colour"),
    ],
)
def test_bad_permission_policies_name_the_field(office: Office, policy: object, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        office.store.office.update_agent(
            office.worker.id, now=office.clock.now(), permission_policy=policy
        )
    assert caught.value.field == field


def test_permission_policy_is_normalised_and_cleared(office: Office) -> None:
    agents, now = office.store.office, office.clock.now()
    policy = {"mode": "allow_listed", "tools": ["bash", " read ", "bash"]}
    stored = agents.update_agent(office.worker.id, now=now, permission_policy=policy)
    assert stored.permission_policy == {"mode": "allow_listed", "tools": ["bash", "read"]}
    assert agents.get_agent(office.worker.id).permission_policy == stored.permission_policy
    assert (
        agents.update_agent(office.worker.id, now=now, permission_policy=None).permission_policy
        is None
    )


def test_a_running_status_clears_the_paused_reason(office: Office) -> None:
    agents, now = office.store.office, office.clock.now()
    paused, _ = agents.change_agent_status(office.worker.id, AgentStatus.PAUSED, now=now)
    assert paused.paused_reason == "manual"
    resumed = agents.update_agent(office.worker.id, now=now, status=AgentStatus.IDLE)
    assert resumed.paused_reason is None
    with pytest.raises(InvalidInputError) as caught:
        agents.change_agent_status(office.worker.id, AgentStatus.WORKING, now=now)
    assert caught.value.field == "status"
