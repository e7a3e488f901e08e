"""Contract tests of OfficeStore: tasks, blockers, subtasks, comments (both databases)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.models import Agent, Project, Task, Workspace, WorkspaceSettings
from office_scheduler.domain.status import AgentRole, AuthorKind, TaskState, WorkflowKind
from office_scheduler.store.office import OfficeStore


@dataclass(frozen=True, kw_only=True)
class Tenant:
    workspace: Workspace
    project: Project
    agent: Agent
    other_agent: Agent


def _tenant(store: OfficeStore, name: str, now: datetime) -> Tenant:
    ws = store.create_workspace(name=name, settings=WorkspaceSettings(), now=now)
    return Tenant(
        workspace=ws,
        project=store.create_project(workspace_id=ws.id, name="web", now=now),
        agent=store.create_agent(workspace_id=ws.id, name="dev", role=AgentRole.WORKER, now=now),
        other_agent=store.create_agent(
            workspace_id=ws.id, name="qa", role=AgentRole.REVIEWER, now=now
        ),
    )


@pytest.fixture
def acme(office_store: OfficeStore, now: datetime) -> Tenant:
    return _tenant(office_store, "acme", now)


@pytest.fixture
def globex(office_store: OfficeStore, now: datetime) -> Tenant:
    return _tenant(office_store, "globex", now)


def _task(store: OfficeStore, tenant: Tenant, now: datetime, **kwargs: object) -> Task:
    title = str(kwargs.pop("title", "task"))
    return store.create_task(workspace_id=tenant.workspace.id, title=title, now=now, **kwargs)  # type: ignore[arg-type]


def test_create_task_with_everything(
    office_store: OfficeStore, acme: Tenant, now: datetime
) -> None:
    b1 = _task(office_store, acme, now, title="b1")
    b2 = _task(office_store, acme, now, title="b2")
    task = office_store.create_task(
        workspace_id=acme.workspace.id,
        title="build",
        description="the site",
        project_id=acme.project.id,
        assignee_agent_id=acme.agent.id,
        state=TaskState.IN_PROGRESS,
        requires_approval=True,
        reviewers=[acme.other_agent.id],
        approvers=[acme.agent.id],
        executor="claude",
        blocked_by=[b2.id, b1.id],
        now=now,
    )
    assert task.workflow_id == acme.workspace.office_workflow_id
    assert task.project_id == acme.project.id
    assert task.state is TaskState.IN_PROGRESS
    assert task.requires_approval is True
    assert task.reviewers == (acme.other_agent.id,)
    assert task.approvers == (acme.agent.id,)
    assert task.blocked_by == tuple(sorted([b1.id, b2.id]))
    assert task.created_at == task.updated_at == now
    assert task.archived_at is None
    assert task.checkout_agent_id is None
    assert office_store.get_task(task.id) == task
    assert office_store.find_task(task.id) == task
    assert office_store.find_task("missing") is None
    with pytest.raises(NotFoundError) as missing:
        office_store.get_task("missing")
    assert missing.value.field == "task_id"


def test_is_office_predicate(office_store: OfficeStore, acme: Tenant, now: datetime) -> None:
    on_office = _task(office_store, acme, now)
    kanban = _task(office_store, acme, now, workflow=WorkflowKind.KANBAN)
    kanban_project = _task(
        office_store, acme, now, workflow=WorkflowKind.KANBAN, project_id=acme.project.id
    )
    routine = _task(office_store, acme, now, workflow=WorkflowKind.ROUTINE)
    assert on_office.is_office is True
    assert kanban.is_office is False
    assert kanban.workflow_id == acme.workspace.kanban_workflow_id
    assert kanban_project.is_office is True
    # A heavy routine's task starts a run for its assignee like any Office task.
    assert routine.is_office is True
    assert routine.workflow_id == acme.workspace.routine_workflow_id
    _, linked = office_store.update_task(
        kanban.id, now=now, changes={"project_id": acme.project.id}
    )
    assert linked.is_office is True


def test_subtask_inherits_parent_project(
    office_store: OfficeStore, acme: Tenant, now: datetime
) -> None:
    parent = _task(office_store, acme, now, project_id=acme.project.id)
    child = _task(office_store, acme, now + timedelta(seconds=1), parent_id=parent.id)
    assert child.parent_id == parent.id
    assert child.project_id == acme.project.id
    other = office_store.create_project(workspace_id=acme.workspace.id, name="api", now=now)
    explicit = _task(office_store, acme, now, parent_id=parent.id, project_id=other.id)
    assert explicit.project_id == other.id
    assert [t.id for t in office_store.list_children(parent.id)] == [explicit.id, child.id]
    assert office_store.list_children(child.id) == []


@pytest.mark.parametrize(
    "field",
    ["project_id", "parent_id", "assignee_agent_id", "reviewers", "approvers", "blocked_by"],
)
def test_create_task_references_must_be_in_workspace(
    office_store: OfficeStore, acme: Tenant, globex: Tenant, now: datetime, field: str
) -> None:
    foreign_task = _task(office_store, globex, now)
    foreign = {
        "project_id": globex.project.id,
        "parent_id": foreign_task.id,
        "assignee_agent_id": globex.agent.id,
        "reviewers": [acme.agent.id, globex.agent.id],
        "approvers": [globex.other_agent.id],
        "blocked_by": [foreign_task.id],
    }
    with pytest.raises(NotFoundError) as err:
        _task(office_store, acme, now, **{field: foreign[field]})
    assert err.value.field == field
    with pytest.raises(NotFoundError) as missing:
        _task(office_store, acme, now, **{field: "missing" if "_id" in field else ["missing"]})
    assert missing.value.field == field


def test_create_task_validation(office_store: OfficeStore, acme: Tenant, now: datetime) -> None:
    with pytest.raises(InvalidInputError) as blank:
        _task(office_store, acme, now, title="   ")
    assert blank.value.field == "title"
    with pytest.raises(NotFoundError) as no_ws:
        office_store.create_task(workspace_id="missing", title="t", now=now)
    assert no_ws.value.field == "workspace_id"


def test_list_tasks_pagination_and_filters(
    office_store: OfficeStore, acme: Tenant, now: datetime
) -> None:
    created = [
        _task(office_store, acme, now + timedelta(seconds=i // 2), title=f"t{i}")
        for i in range(7)  # pairs share a created_at: the id breaks the tie
    ]
    expected = sorted(created, key=lambda t: (t.created_at, t.id))
    seen: list[Task] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = office_store.list_tasks(acme.workspace.id, limit=3, cursor=cursor)
        seen.extend(page.items)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 3
    assert [t.id for t in seen] == [t.id for t in expected]

    office_store.update_task(
        created[0].id, now=now, changes={"assignee_agent_id": acme.agent.id, "state": "DONE"}
    )
    office_store.archive_task(created[1].id, now=now)
    ws = acme.workspace.id
    done = office_store.list_tasks(ws, state=TaskState.DONE).items
    assert [t.id for t in done] == [created[0].id]
    mine = office_store.list_tasks(ws, assignee_agent_id=acme.agent.id).items
    assert [t.id for t in mine] == [created[0].id]
    assert len(office_store.list_tasks(ws).items) == 6
    assert len(office_store.list_tasks(ws, include_archived=True).items) == 7
    child = _task(office_store, acme, now, parent_id=created[2].id, project_id=acme.project.id)
    assert [t.id for t in office_store.list_tasks(ws, parent_id=created[2].id).items] == [child.id]
    assert [t.id for t in office_store.list_tasks(ws, project_id=acme.project.id).items] == [
        child.id
    ]
    assert office_store.list_tasks(ws, limit=10_000).next_cursor is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cursor": "not a cursor!"}, "cursor"),
        ({"cursor": "WzEsMl0"}, "cursor"),  # valid base64 JSON, wrong shape
        ({"limit": 0}, "limit"),
    ],
)
def test_list_tasks_bad_input(
    office_store: OfficeStore, acme: Tenant, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        office_store.list_tasks(acme.workspace.id, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_update_task(office_store: OfficeStore, acme: Tenant, now: datetime) -> None:
    task = _task(office_store, acme, now, assignee_agent_id=acme.agent.id)
    later = now + timedelta(minutes=5)
    before, after = office_store.update_task(
        task.id,
        now=later,
        changes={
            "title": "renamed",
            "description": "more",
            "state": TaskState.IN_REVIEW,
            "assignee_agent_id": None,
            "requires_approval": True,
            "reviewers": [acme.other_agent.id],
            "approvers": [acme.agent.id],
            "executor": "codex",
            "project_id": acme.project.id,
        },
    )
    assert before == task
    assert after.title == "renamed"
    assert after.description == "more"
    assert after.state is TaskState.IN_REVIEW
    assert after.assignee_agent_id is None
    assert after.requires_approval is True
    assert after.reviewers == (acme.other_agent.id,)
    assert after.approvers == (acme.agent.id,)
    assert after.executor == "codex"
    assert after.project_id == acme.project.id
    assert after.updated_at == later
    assert office_store.get_task(task.id) == after
    same_before, same_after = office_store.update_task(task.id, now=later, changes={})
    assert same_before == same_after == after


@pytest.mark.parametrize(
    ("changes", "error", "field"),
    [
        ({"workflow_id": "x"}, InvalidInputError, "workflow_id"),
        ({"state": "SLEEPING"}, InvalidInputError, "state"),
        ({"title": ""}, InvalidInputError, "title"),
        ({"assignee_agent_id": "missing"}, NotFoundError, "assignee_agent_id"),
        ({"reviewers": ["missing"]}, NotFoundError, "reviewers"),
        ({"project_id": "missing"}, NotFoundError, "project_id"),
    ],
)
def test_update_task_errors(
    office_store: OfficeStore,
    acme: Tenant,
    now: datetime,
    changes: dict[str, object],
    error: type[Exception],
    field: str,
) -> None:
    task = _task(office_store, acme, now)
    with pytest.raises(error) as err:
        office_store.update_task(task.id, now=now, changes=changes)
    assert getattr(err.value, "field", None) == field
    assert office_store.get_task(task.id) == task


def test_update_task_rejects_agent_of_another_workspace(
    office_store: OfficeStore, acme: Tenant, globex: Tenant, now: datetime
) -> None:
    task = _task(office_store, acme, now)
    with pytest.raises(NotFoundError) as err:
        office_store.update_task(task.id, now=now, changes={"assignee_agent_id": globex.agent.id})
    assert err.value.field == "assignee_agent_id"
    with pytest.raises(NotFoundError) as missing:
        office_store.update_task("missing", now=now, changes={"title": "x"})
    assert missing.value.field == "task_id"


def test_archive_task_is_idempotent(office_store: OfficeStore, acme: Tenant, now: datetime) -> None:
    task = _task(office_store, acme, now)
    archived = office_store.archive_task(task.id, now=now + timedelta(hours=1))
    assert archived.archived_at == now + timedelta(hours=1)
    again = office_store.archive_task(task.id, now=now + timedelta(hours=2))
    assert again.archived_at == now + timedelta(hours=1)
    with pytest.raises(NotFoundError):
        office_store.archive_task("missing", now=now)


def test_blockers(office_store: OfficeStore, acme: Tenant, globex: Tenant, now: datetime) -> None:
    a = _task(office_store, acme, now, title="a")
    b = _task(office_store, acme, now, title="b")
    c = _task(office_store, acme, now, title="c")
    after_add = office_store.add_blocker(a.id, b.id, now=now)
    assert after_add.blocked_by == (b.id,)
    assert office_store.add_blocker(a.id, b.id, now=now) == after_add  # idempotent
    office_store.add_blocker(b.id, c.id, now=now)

    with pytest.raises(InvalidInputError) as itself:
        office_store.add_blocker(a.id, a.id, now=now)
    assert itself.value.field == "blocker_task_id"
    with pytest.raises(InvalidInputError) as cycle:
        office_store.add_blocker(c.id, a.id, now=now)  # a waits on b waits on c
    assert cycle.value.field == "blocker_task_id"
    foreign = _task(office_store, globex, now)
    with pytest.raises(NotFoundError) as other_ws:
        office_store.add_blocker(a.id, foreign.id, now=now)
    assert other_ws.value.field == "blocker_task_id"
    with pytest.raises(NotFoundError) as no_task:
        office_store.add_blocker("missing", a.id, now=now)
    assert no_task.value.field == "task_id"

    office_store.add_blocker(a.id, c.id, now=now)
    assert office_store.get_task(a.id).blocked_by == tuple(sorted([b.id, c.id]))
    assert [t.id for t in office_store.list_blocked_by(c.id)] == sorted([a.id, b.id])
    assert office_store.list_blocked_by(a.id) == []
    assert office_store.open_blocker_ids(a.id) == sorted([b.id, c.id])
    office_store.update_task(c.id, now=now, changes={"state": TaskState.DONE})
    assert office_store.open_blocker_ids(a.id) == [b.id]
    assert office_store.get_task(a.id).blocked_by == tuple(sorted([b.id, c.id]))  # all of them

    assert office_store.remove_blocker(a.id, b.id).blocked_by == (c.id,)
    assert office_store.remove_blocker(a.id, b.id).blocked_by == (c.id,)  # idempotent
    assert office_store.open_blocker_ids(a.id) == []
    with pytest.raises(NotFoundError):
        office_store.open_blocker_ids("missing")


def test_task_listings_tell_an_empty_task_from_a_missing_one(
    office_store: OfficeStore, acme: Tenant, now: datetime
) -> None:
    # The listings check the task only when they find nothing: an existing task with no
    # comments, subtasks or open blockers lists nothing; a missing task is NotFound.
    task = _task(office_store, acme, now)
    assert office_store.list_comments(task.id) == []
    assert office_store.list_children(task.id) == []
    assert office_store.open_blocker_ids(task.id) == []
    listings = (
        office_store.list_comments,
        office_store.list_children,
        office_store.open_blocker_ids,
    )
    for listing in listings:
        with pytest.raises(NotFoundError) as missing:
            listing("missing")
        assert missing.value.field == "task_id"
    # A caller that has just read the task (the prompt's material) skips the check.
    assert office_store.list_comments("missing", require=False) == []
    assert office_store.list_children("missing", require=False) == []


def test_count_actionable_tasks(office_store: OfficeStore, acme: Tenant, now: datetime) -> None:
    agent = acme.agent.id
    assert office_store.count_actionable_tasks(agent) == 0
    for state in TaskState:
        _task(office_store, acme, now, assignee_agent_id=agent, state=state)
    archived = _task(office_store, acme, now, assignee_agent_id=agent)
    office_store.archive_task(archived.id, now=now)
    _task(office_store, acme, now, assignee_agent_id=acme.other_agent.id)
    assert office_store.count_actionable_tasks(agent) == 2  # one TODO, one IN_PROGRESS


def test_comments(office_store: OfficeStore, acme: Tenant, globex: Tenant, now: datetime) -> None:
    task = _task(office_store, acme, now)
    late = office_store.add_comment(
        task_id=task.id,
        body="second",
        author_kind=AuthorKind.USER,
        author_agent_id=None,
        now=now + timedelta(seconds=1),
    )
    early = office_store.add_comment(
        task_id=task.id,
        body="  first\n",
        author_kind=AuthorKind.AGENT,
        author_agent_id=acme.agent.id,
        now=now,
    )
    assert early.body == "  first\n"
    assert early.workspace_id == acme.workspace.id
    assert early.author_kind is AuthorKind.AGENT
    assert office_store.get_comment(early.id) == early
    assert office_store.list_comments(task.id) == [early, late]

    def add(**kwargs: object) -> None:
        args: dict[str, object] = {
            "task_id": task.id,
            "body": "hi",
            "author_kind": AuthorKind.AGENT,
            "author_agent_id": acme.agent.id,
            "now": now,
            **kwargs,
        }
        office_store.add_comment(**args)  # type: ignore[arg-type]

    with pytest.raises(InvalidInputError) as blank:
        add(body=" ")
    assert blank.value.field == "body"
    with pytest.raises(NotFoundError) as foreign:
        add(author_agent_id=globex.agent.id)
    assert foreign.value.field == "author_agent_id"
    with pytest.raises(InvalidInputError) as anonymous_agent:
        add(author_agent_id=None)
    assert anonymous_agent.value.field == "author_agent_id"
    with pytest.raises(NotFoundError) as no_task:
        add(task_id="missing")
    assert no_task.value.field == "task_id"
    with pytest.raises(NotFoundError) as no_comment:
        office_store.get_comment("missing")
    assert no_comment.value.field == "comment_id"
