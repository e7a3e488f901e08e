"""Prompt sizes, full vs resume delta: ``python bench/bench_prompts.py``.

A realistic task-bound wake: an agent with about 2 KB of standing instructions, a project,
a task with a description, 10 comments, 3 blockers and 2 subtasks. The first run gets the
full prompt; the second run resumes the session after one new comment arrived and one
blocker was resolved, and gets the resume delta. Prints bytes and estimated tokens (UTF-8
bytes / 4, rounded up) of both, and the time to build each. Exits 1 if the delta is not
smaller than the full prompt.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from office_scheduler.domain.models import (
    Agent,
    Comment,
    ContextEntry,
    Project,
    RunWakes,
    Task,
    Workspace,
    WorkspaceSettings,
)
from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    AuthorKind,
    TaskState,
    WakeSource,
)
from office_scheduler.prompts import (
    DeltaInput,
    PromptInput,
    TaskSnapshot,
    build_delta_prompt,
    build_prompt,
    estimate_tokens,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

INSTRUCTIONS = (
    "You are the frontend engineer of Acme. You build and maintain the marketing site, a "
    "static site generated with Astro and deployed to a CDN.\n\n"
    "Working rules:\n"
    "- Read the task, its comments and its blockers before you change anything.\n"
    "- Work in small commits on a branch named after the task id; never push to main.\n"
    "- Run `npm test` and `npm run lint` before you finish; fix what fails.\n"
    "- Keep pages accessible: alt text on images, labelled form fields, contrast AA.\n"
    "- When a task is bigger than a day, split it into subtasks with `office task create "
    "--parent` and order them with `--blocked-by`.\n"
    "- When you are unsure about copy or design, ask on the task with `office comment add` "
    "and end your run; you will be woken when someone answers.\n"
    "- Report what you did as a comment on the task, with links to the commits.\n"
    "- Never store secrets in the repository; the deploy token comes from the environment.\n"
    "- Prefer existing components from src/components over new ones; keep CSS in the "
    "component's <style> block.\n"
    "- Images go to public/img in WebP, at most 200 KB each.\n\n"
    "Style guide summary: sentence case headings, no exclamation marks, US spelling, the "
    "product name is always 'Acme Cloud'. Prices are shown in USD without cents. The footer "
    "carries the legal links (imprint, privacy, terms) and the newsletter form.\n\n"
    "Escalation: if the build or the deploy pipeline is broken for reasons outside your "
    "task, comment on the task, mark it BLOCKED and wake the coordinator with "
    "`office wake self --reason` only when you expect to continue later. Do not retry a "
    "failing deploy more than twice.\n\n"
    "Review: every page change needs a screenshot of mobile and desktop attached to the "
    "task comment, and a note on what you tested. Keep the changelog in CHANGES.md up to "
    "date with one line per user-visible change. When you touch shared components, list "
    "the other pages that use them and check each one in the preview deploy before you "
    "mark the task done. Leave the task IN_PROGRESS while a preview is pending.\n"
)

DESCRIPTION = (
    "Build the new landing page for the Acme Cloud launch.\n\n"
    "Sections, top to bottom:\n"
    "1. Hero: headline, one-sentence subline, primary CTA 'Start free', secondary CTA "
    "'Talk to sales', product screenshot on the right (desktop) or below (mobile).\n"
    "2. Logos of five launch customers (files in the shared drive, folder 'logos/launch').\n"
    "3. Three feature blocks with icons: deploy in seconds, global edge, pay per use.\n"
    "4. Pricing table with three tiers (Hobby, Team, Enterprise); numbers from the pricing "
    "spec task.\n"
    "5. FAQ with eight questions (copy in the marketing doc).\n"
    "6. Footer with legal links and the newsletter form.\n\n"
    "Acceptance: Lighthouse performance ≥ 95 and accessibility 100 on mobile; the page "
    "renders without JavaScript; all copy comes from the content collection so marketing "
    "can edit it without a deploy."
)

COMMENT_TEXTS = (
    "The hero screenshot is in the design file, frame 'Hero v3'. Please export it at 2x.",
    "Marketing asked to swap the second CTA to 'Book a demo'.",
    "Pricing numbers are not final yet; use placeholders and keep the layout.",
    "Legal says the imprint link must be visible without scrolling inside the footer.",
    "Can we lazy-load the customer logos? They are heavy SVGs.",
    "The FAQ copy is final now, see the marketing doc, section 4.",
    "Design review feedback: increase the spacing between feature blocks to 64px.",
    "Please keep the page under 300 KB transferred on first load.",
    "The newsletter form should post to the existing /api/subscribe endpoint.",
    "Reminder: the launch date moved to next Tuesday, 10:00 UTC.",
)


def _agent() -> Agent:
    return Agent(
        id="ag-ann",
        workspace_id="ws1",
        name="ann",
        role=AgentRole.WORKER,
        status=AgentStatus.IDLE,
        instructions=INSTRUCTIONS,
        max_concurrent_sessions=1,
        cooldown=timedelta(seconds=10),
        skip_idle_wakeups=True,
        executor="claude",
        last_wakeup_finished_at=None,
        created_at=T0,
    )


def _task(ident: str, title: str, state: TaskState, **fields: object) -> Task:
    values: dict[str, object] = {
        "id": ident,
        "workspace_id": "ws1",
        "workflow_id": "wf-office",
        "project_id": "pr1",
        "parent_id": None,
        "title": title,
        "description": "",
        "state": state,
        "assignee_agent_id": "ag-bob",
        "checkout_agent_id": None,
        "checkout_run_id": None,
        "checkout_at": None,
        "requires_approval": False,
        "reviewers": (),
        "approvers": (),
        "executor": None,
        "archived_at": None,
        "created_at": T0,
        "updated_at": T0,
        "is_office": True,
    }
    values.update(fields)
    return Task(**values)  # type: ignore[arg-type]


def _comment(n: int, body: str, minutes: int) -> Comment:
    return Comment(
        id=f"c{n:02}",
        task_id="tk-landing",
        workspace_id="ws1",
        author_kind=AuthorKind.USER,
        author_agent_id=None,
        body=body,
        created_at=T0 + timedelta(minutes=minutes),
    )


def main() -> int:
    workspace = Workspace(
        id="ws1",
        name="acme",
        description="Acme Cloud: the marketing site, docs and launch work.",
        office_workflow_id="wf-office",
        routine_workflow_id="wf-routine",
        kanban_workflow_id="wf-kanban",
        settings=WorkspaceSettings(),
        created_at=T0,
    )
    project = Project(
        id="pr1",
        workspace_id="ws1",
        name="site",
        description="The public marketing site (Astro, deployed to the CDN).",
        directory="/srv/acme/site",
        executor=None,
        repos=("git@github.com:acme/site.git",),
        created_at=T0,
    )
    task = _task(
        "tk-landing",
        "Build the launch landing page",
        TaskState.IN_PROGRESS,
        description=DESCRIPTION,
        assignee_agent_id="ag-ann",
        blocked_by=("tk-spec", "tk-copy", "tk-logos"),
    )
    blockers = [
        _task("tk-spec", "Write the pricing spec", TaskState.IN_PROGRESS),
        _task("tk-copy", "Final FAQ copy", TaskState.DONE),
        _task("tk-logos", "Collect customer logos", TaskState.TODO),
    ]
    children = [
        _task("tk-hero", "Hero section", TaskState.DONE, parent_id="tk-landing"),
        _task("tk-footer", "Footer and newsletter", TaskState.TODO, parent_id="tk-landing"),
    ]
    comments = [_comment(n, text, n * 10) for n, text in enumerate(COMMENT_TEXTS)]
    names = {"ag-ann": "ann", "ag-bob": "bob", "ag-boss": "boss"}
    first_wake = ContextEntry(
        request_id=1,
        source=WakeSource.TASK_ASSIGNED,
        payload={"task_id": "tk-landing"},
        requested_at=T0,
    )
    full_input = PromptInput(
        workspace=workspace,
        agent=_agent(),
        wakes=RunWakes.of(1, [first_wake]),
        task=task,
        project=project,
        comments=comments,
        children=children,
        blockers=blockers,
        run_id=1,
        agent_names=names,
    )
    started = time.perf_counter()
    full = build_prompt(full_input)
    full_ms = (time.perf_counter() - started) * 1000

    # The second run: one new comment woke the agent, and the pricing spec is done.
    snapshot = TaskSnapshot.of(task, blockers, children, comments)
    new_comment = _comment(10, "Pricing is final: Hobby $0, Team $20, Enterprise on request.", 200)
    resolved = [replace(blockers[0], state=TaskState.DONE), *blockers[1:]]
    delta_input = DeltaInput(
        agent=_agent(),
        task=task,
        wakes=RunWakes.of(
            2,
            [
                ContextEntry(
                    request_id=2,
                    source=WakeSource.COMMENT,
                    payload={"task_id": "tk-landing", "comment_id": new_comment.id},
                    requested_at=new_comment.created_at,
                )
            ],
        ),
        run_id=2,
        prior_run_id=1,
        since=T0 + timedelta(minutes=100),
        previous=snapshot,
        comments=[*comments, new_comment],
        blockers=resolved,
        children=children,
        agent_names=names,
    )
    started = time.perf_counter()
    delta = build_delta_prompt(delta_input)
    delta_ms = (time.perf_counter() - started) * 1000
    # What the second run would have sent without resuming: the full prompt again.
    full_again = build_prompt(
        replace(
            full_input,
            wakes=delta_input.wakes,
            comments=delta_input.comments,
            blockers=resolved,
            run_id=2,
        )
    )

    rows = (
        ("full (first run)", full, full_ms),
        ("full (second run, not resumed)", full_again, None),
        ("delta (second run, resumed)", delta, delta_ms),
    )
    print(f"instructions: {len(INSTRUCTIONS.encode())} bytes; 10 comments, 3 blockers")
    print(f"{'prompt':34} {'bytes':>7} {'tokens':>7} {'build ms':>9}")
    for label, text, ms in rows:
        timing = f"{ms:9.3f}" if ms is not None else f"{'':9}"
        print(f"{label:34} {len(text.encode()):7d} {estimate_tokens(text):7d} {timing}")
    saved = estimate_tokens(full_again) - estimate_tokens(delta)
    share = saved * 100 // estimate_tokens(full_again)
    print(f"saved per resumed wake: {saved} tokens ({share} %)")
    return 0 if len(delta) < len(full_again) else 1


if __name__ == "__main__":
    sys.exit(main())
