"""Activity entries for task creation, moves, assignments, archiving, comments and approvals.

On both databases; the last test reads them back through ``office activity list`` and the
dashboard's Activity page over HTTP.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from click.testing import CliRunner

from cli_harness import CLEAN_ENV, serving_in_thread
from helpers import Office, dashboard_session
from office_scheduler.api import create_app
from office_scheduler.cli import office as office_cli
from office_scheduler.domain.models import ActivityEntry
from office_scheduler.domain.status import AuthorKind, TaskState, WakeSource
from office_scheduler.store.activity import ActivityFilter


def _entries(office: Office, kind: str) -> list[ActivityEntry]:
    """Entries of ``kind``, oldest first."""
    page = office.store.runlog.list_activity(
        office.workspace.id, where=ActivityFilter(kind=kind), limit=500
    )
    return sorted(page.items, key=lambda entry: entry.id)


def _summary(entry: ActivityEntry) -> tuple[str, str | None, str | None, dict[str, Any]]:
    return (entry.actor, entry.agent_id, entry.task_id, entry.data)


async def test_task_created_names_person_agent_or_routine(office: Office) -> None:
    svc = office.service.office
    by_person = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Write spec",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    by_agent = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Sub",
        project_id=office.project.id,
        parent_id=by_person.id,
        actor_agent_id=office.coordinator.id,
    )
    routine = await office.service.routines.create_routine(
        office.workspace.id,
        {
            "name": "Triage",
            "assignee_agent_id": office.other_worker.id,
            "task_template": {"title": "Triage inbox"},
        },
    )
    fired = await office.service.routines.fire_manual(routine.id)

    created = _entries(office, "task_created")

    ann, bob = office.worker.id, office.other_worker.id
    assert [_summary(entry) for entry in created] == [
        ("user", ann, by_person.id, {"state": "TODO", "assignee_agent_id": ann}),
        (
            f"agent:{office.coordinator.id}",
            None,
            by_agent.id,
            {"state": "TODO", "assignee_agent_id": None},
        ),
        ("system", bob, fired.linked_task_id, {"state": "TODO", "assignee_agent_id": bob}),
    ]
    assert created[0].message == "task created: Write spec"
    assert created[0].run_id is None


async def test_moves_assignments_and_archiving_are_logged(office: Office) -> None:
    svc = office.service.office
    task = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Build",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    await svc.update_task(task.id, {"state": TaskState.IN_PROGRESS.value})
    await svc.update_task(
        task.id, {"assignee_agent_id": office.other_worker.id}, actor_agent_id=office.coordinator.id
    )
    await svc.update_task(
        task.id, {"state": TaskState.BLOCKED.value}, actor_agent_id=office.other_worker.id
    )
    await svc.archive_task(task.id)

    moved = _entries(office, "task_moved")
    assert [_summary(entry) for entry in moved] == [
        ("user", office.worker.id, task.id, {"from": "TODO", "to": "IN_PROGRESS", "by": "user"}),
        (
            f"agent:{office.other_worker.id}",
            office.other_worker.id,
            task.id,
            {"from": "IN_PROGRESS", "to": "BLOCKED", "by": f"agent:{office.other_worker.id}"},
        ),
    ]
    assert moved[0].message == "task moved from TODO to IN_PROGRESS: Build"
    [assigned] = _entries(office, "task_assigned")
    assert _summary(assigned) == (
        f"agent:{office.coordinator.id}",
        office.other_worker.id,
        task.id,
        {"from": office.worker.id, "to": office.other_worker.id},
    )
    [archived] = _entries(office, "task_archived")
    assert _summary(archived) == ("user", office.other_worker.id, task.id, {})
    # A change that changes nothing logs nothing.
    await svc.update_task(task.id, {"title": "Build"})
    assert len(_entries(office, "task_moved")) == 2


async def test_comments_are_logged_with_their_author(office: Office) -> None:
    svc = office.service.office
    task = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Docs",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    by_person = await svc.add_comment(task.id, "please add examples")
    by_agent = await svc.add_comment(
        task.id, "done", author_kind=AuthorKind.AGENT, author_agent_id=office.worker.id
    )
    from_chat = await svc.add_comment(task.id, "ship it", channel="slack", external_author="carol")

    comments = _entries(office, "comment_added")

    ann = office.worker.id
    assert [_summary(entry) for entry in comments] == [
        ("user", ann, task.id, {"comment_id": by_person.id, "author": "user"}),
        (f"agent:{ann}", ann, task.id, {"comment_id": by_agent.id, "author": f"agent:{ann}"}),
        ("user", ann, task.id, {"comment_id": from_chat.id, "author": "carol"}),
    ]
    assert comments[0].message == "comment on task: Docs"


async def test_review_gate_logs_moves_and_one_entry_per_approval_step(office: Office) -> None:
    svc = office.service.office
    task = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Spec",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
        requires_approval=True,
    )
    await svc.update_task(task.id, {"state": TaskState.DONE.value}, actor_agent_id=office.worker.id)
    [requested] = _entries(office, "approval_requested")
    approval_id = requested.data["approval_id"]
    await office.service.approvals.approve(approval_id, decided_by="user")
    generic = await office.service.approvals.request(
        workspace_id=office.workspace.id,
        title="Buy a domain",
        requested_by_agent_id=office.worker.id,
    )

    worker = f"agent:{office.worker.id}"
    moved = _entries(office, "task_moved")
    assert [(e.actor, e.data["from"], e.data["to"]) for e in moved] == [
        (worker, "TODO", "IN_REVIEW"),
        ("user", "IN_REVIEW", "DONE"),
    ]
    requests = _entries(office, "approval_requested")
    assert [(e.actor, e.task_id, e.data["approval_id"]) for e in requests] == [
        (worker, task.id, approval_id),
        (worker, None, generic.id),
    ]
    [approved] = _entries(office, "approval_approved")
    assert (approved.actor, approved.task_id) == ("user", task.id)


async def test_a_failing_activity_write_does_not_break_the_change(
    office: Office, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = office.service.office
    task = await svc.create_task(
        workspace_id=office.workspace.id, title="Fix", project_id=office.project.id
    )

    def broken(**_: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(office.store.runlog, "add_activity", broken)
    with structlog.testing.capture_logs() as logs:
        updated = await svc.update_task(task.id, {"assignee_agent_id": office.worker.id})
    monkeypatch.undo()

    assert updated.assignee_agent_id == office.worker.id
    assert office.store.office.get_task(task.id).assignee_agent_id == office.worker.id
    failures = [log for log in logs if log["event"] == "event_handler_failed"]
    assert [log["handler"] for log in failures] == ["ActivitySubscribers.on_task_assigned"]
    # The wake for the new assignee (another subscriber of the same event) still went out.
    wakes = office.store.listing.list_wakeups(agent_id=office.worker.id, limit=10).items
    assert [(w.source, w.task_id) for w in wakes] == [(WakeSource.TASK_ASSIGNED, task.id)]
    assert _entries(office, "task_assigned") == []


async def test_cli_and_dashboard_show_the_entries(office: Office, tmp_path: Path) -> None:
    svc = office.service.office
    task = await svc.create_task(
        workspace_id=office.workspace.id,
        title="Release notes",
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )
    await svc.add_comment(task.id, "looks good")
    secret, _ = office.service.tokens.mint_admin(name="cli", now=office.clock.now())
    office.clock.advance(timedelta(seconds=1))

    with serving_in_thread(create_app(office.service)) as url:
        env: dict[str, str | None] = dict(CLEAN_ENV) | {
            "OFFICE_HOME": str(tmp_path / "cli"),
            "OFFICE_TOKEN": secret,
        }
        result = CliRunner().invoke(
            office_cli,
            ["--api-url", url, "--json", "activity", "list", "--task", task.id],
            env=env,
        )
        page = httpx.get(
            f"{url}/activity",
            params={"task": task.id},
            cookies={"office_session": dashboard_session(office.service, secret)},
        )

    assert result.exit_code == 0, (result.stdout, result.stderr)
    listed = json.loads(result.stdout)
    ours = [e for e in listed if e["kind"] in ("task_created", "comment_added")]
    assert [(e["kind"], e["actor"], e["agent_id"]) for e in ours] == [
        ("comment_added", "user", office.worker.id),
        ("task_created", "user", office.worker.id),
    ]
    assert page.status_code == 200
    assert "comment_added" in page.text
    assert "task created: Release notes" in page.text
