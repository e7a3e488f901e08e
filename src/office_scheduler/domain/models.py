"""Frozen, keyword-only domain records. Instants are aware UTC datetimes.

Rows become these records only in ``store/rows.py``; change a record with
:func:`dataclasses.replace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from office_scheduler.domain.status import (
    AgentRole,
    AgentStatus,
    ApprovalKind,
    ApprovalStatus,
    AuthorKind,
    Classification,
    InboxKind,
    InboxStatus,
    RunReason,
    RunStatus,
    TaskState,
    TokenKind,
    WakeSource,
    WakeupStatus,
    WorkflowKind,
)

JSON = dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorConfig:
    """How to launch an agent session.

    Attributes:
        name: the name tasks, agents, projects and workspaces refer to.
        kind: ``command`` (a CLI subprocess) or ``acp``.
        argv: the command and its arguments; ``{prompt_file}``, ``{run_id}``, ``{task_id}``,
            ``{agent_id}`` and ``{workspace_id}`` are substituted.
        env: extra environment variables for the agent process (values may be secrets).
        cwd: working directory; relative paths are taken from the project's directory.
        timeout_s: wall-clock limit of one session, seconds.
        inactivity_timeout_s: limit on silence (no output) of one session, seconds.
        stall_timeout_s: limit on a session whose output is only the agent CLI's own
            retry/reconnect lines (``executors/stall.py``), seconds; it then ends as
            ``transient``.
        pass_env: names of variables copied from the scheduler's own environment.
        preset: a known agent CLI (``claude``, ``codex``, ``gemini``) whose command line,
            resume argument and MCP wiring the ``command`` executor builds when ``argv`` is
            empty (see ``executors/presets.py``); an explicit ``argv`` wins.
        preset_args: extra arguments the preset places before its own (model, permissions).
    """

    name: str
    kind: str = "command"
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout_s: float = 3600.0
    inactivity_timeout_s: float = 600.0
    stall_timeout_s: float = 300.0
    pass_env: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER")
    preset: str | None = None
    preset_args: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkspaceSettings:
    """Per-workspace scheduling settings.

    Attributes:
        coalesce_window: hold before a run made by intake can be claimed (0 disables).
        recovery_lookback_hours: how far back the recovery sweep looks (1..720).
        prompt_max_wakes: most merged wakes a prompt shows in full, decision-carrying
            ones included (1..500; the rest are summarised one line per source).
        prompt_max_wake_bytes: budget of the prompt's "Why you were woken" section in
            UTF-8 bytes (1,000..200,000); the newest wake and the decision-carrying ones
            are shown even past it.
        default_executor: executor name used when task, agent and project name none.
        executors: executor definitions by name.
    """

    coalesce_window: timedelta = timedelta(seconds=5)
    recovery_lookback_hours: int = 24
    prompt_max_wakes: int = 20
    prompt_max_wake_bytes: int = 12_000
    default_executor: str | None = None
    executors: dict[str, ExecutorConfig] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Workspace:
    """A tenant with its agents, projects, tasks and settings."""

    id: str
    name: str
    description: str
    office_workflow_id: str
    routine_workflow_id: str
    kanban_workflow_id: str
    settings: WorkspaceSettings
    created_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Workflow:
    """A board: ``kanban`` (ordinary), ``office`` (autonomous) or ``routine`` (hidden)."""

    id: str
    workspace_id: str
    kind: WorkflowKind
    name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Project:
    """A body of work with its own directory, repositories and executor preference."""

    id: str
    workspace_id: str
    name: str
    description: str
    directory: str | None
    executor: str | None
    repos: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Agent:
    """A named AI worker of a workspace.

    Attributes:
        cooldown: minimum pause between the end of one run and the next claim.
        last_wakeup_finished_at: when the agent's last run ended (UTC), for the cooldown.
        imported_status: the status the last config import set (``None``: no import set
            one); a paused or stopped status that differs was set by the system or a person.
    """

    id: str
    workspace_id: str
    name: str
    role: AgentRole
    status: AgentStatus
    instructions: str
    max_concurrent_sessions: int
    cooldown: timedelta
    skip_idle_wakeups: bool
    executor: str | None
    last_wakeup_finished_at: datetime | None
    created_at: datetime
    reports_to: str | None = None
    paused_reason: str | None = None
    permission_policy: JSON | None = None
    imported_status: AgentStatus | None = None
    expected_run_cents: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    """A unit of work on a workflow; Office tasks get autonomous wakes.

    ``is_office`` is the authoritative Office predicate (project-linked, or on the
    workspace's office workflow), computed by the store.
    """

    id: str
    workspace_id: str
    workflow_id: str
    project_id: str | None
    parent_id: str | None
    title: str
    description: str
    state: TaskState
    assignee_agent_id: str | None
    checkout_agent_id: str | None
    checkout_run_id: int | None
    checkout_at: datetime | None
    requires_approval: bool
    reviewers: tuple[str, ...]
    approvers: tuple[str, ...]
    executor: str | None
    archived_at: datetime | None
    created_at: datetime
    updated_at: datetime
    is_office: bool
    blocked_by: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Comment:
    """A comment on a task by a person or an agent.

    ``channel`` and ``external_author`` are set when it came in from a chat integration
    (``POST /api/v1/channels/{task_id}/messages``).
    """

    id: str
    task_id: str
    workspace_id: str
    author_kind: AuthorKind
    author_agent_id: str | None
    body: str
    created_at: datetime
    channel: str | None = None
    external_author: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeRequest:
    """Input to intake: wake ``agent_id`` because of ``source``.

    Attributes:
        task_id: the task the wake is about; ``None`` for taskless wakes.
        classification: ``periodic`` only for cron fires of lightweight routines.
        idempotency_key: duplicates of a key are silently rejected at any age.
        hold: whether the coalescing hold applies (user wakes and manual fires have none).
        fingerprint: for a caller's key, the fingerprint of the caller's request
            (:func:`office_scheduler.domain.idempotency.fingerprint`): the key coming back
            with another fingerprint is refused
            (:class:`~office_scheduler.domain.errors.IdempotencyKeyReusedError`).
        caused_by_run_id: the run whose action (a comment, a task update, a subtask, a
            self-wake, an approval request) produced this wake; intake takes it from the
            run token of the API call when the caller leaves it ``None`` (DESIGN §15).
        by_person: whether a person's action produced it; ``None``: intake judges by the
            caller (an admin token is a person) and else by the source.
    """

    workspace_id: str
    agent_id: str
    source: WakeSource
    payload: JSON = field(default_factory=dict)
    task_id: str | None = None
    classification: Classification = Classification.EVENT
    idempotency_key: str | None = None
    hold: bool = True
    fingerprint: str | None = None
    caused_by_run_id: int | None = None
    by_person: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Wake:
    """One explicit wake of a batch (``Service.wake_many``); the batch names the workspace.

    Attributes:
        reason: free text shown to the agent.
        payload: any JSON object (at most 256 KiB as JSON).
        task_id: the task the wake is about, in the batch's workspace.
        idempotency_key: scoped to the agent like a single wake's key.
    """

    agent_id: str
    reason: str | None = None
    payload: JSON | None = None
    task_id: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextEntry:
    """One wake merged into a run: a wakeup request whose ``run_id`` is the run."""

    request_id: int
    source: WakeSource
    payload: JSON
    requested_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceTally:
    """How many of a run's merged wakes came from one source, and when.

    Attributes:
        count: wakes of this source merged into the run.
        first_at: the oldest one's ``requested_at`` (aware UTC).
        last_at: the newest one's ``requested_at`` (aware UTC).
    """

    source: WakeSource
    count: int
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class RunWakes:
    """A bounded view of the wakes merged into one run (read in one statement).

    A run may absorb thousands of wakes; this is what the pipeline and the prompt need of
    them without loading them all (``office wakeups list --run N`` lists every one).

    Attributes:
        run_id: the run.
        total: how many wakes the run carries.
        tallies: per source, how many and when, in the order of each source's first wake.
        entries: oldest first, the newest wakes (as many as asked for), every
            decision-carrying wake (up to a cap, newest first) and the oldest wake of each
            source.
        decisions: request ids of the decision-carrying wakes among ``entries`` (approval
            results, rejections, agent errors, budget alerts, missed-tick summaries).
        reviewer: whether any merged wake is a review-stage wake (payload ``role``
            ``reviewer``).
    """

    run_id: int
    total: int
    tallies: tuple[SourceTally, ...] = ()
    entries: tuple[ContextEntry, ...] = ()
    decisions: frozenset[int] = frozenset()
    reviewer: bool = False

    @property
    def sources(self) -> frozenset[WakeSource]:
        """Every source among the merged wakes."""
        return frozenset(tally.source for tally in self.tallies)

    def first_of(self, source: WakeSource) -> ContextEntry | None:
        """The oldest merged wake of ``source`` (always among ``entries``), if any."""
        return next((entry for entry in self.entries if entry.source is source), None)

    @classmethod
    def of(cls, run_id: int, entries: Sequence[ContextEntry]) -> RunWakes:
        """The view of a run whose every merged wake is ``entries`` (oldest first).

        What ``QueueStore.run_wakes`` returns for a run with few wakes; for tests and
        benchmarks that build prompts without a database.
        """
        tallies: dict[WakeSource, SourceTally] = {}
        for entry in entries:
            seen = tallies.get(entry.source)
            tallies[entry.source] = SourceTally(
                source=entry.source,
                count=1 if seen is None else seen.count + 1,
                first_at=entry.requested_at if seen is None else seen.first_at,
                last_at=entry.requested_at,
            )
        return cls(
            run_id=run_id,
            total=len(entries),
            tallies=tuple(tallies.values()),
            entries=tuple(entries),
            decisions=frozenset(entry.request_id for entry in entries if carries_decision(entry)),
            reviewer=any(entry.payload.get("role") == "reviewer" for entry in entries),
        )


#: Sources whose every wake carries a decision (approval results, agent errors, budget
#: alerts); rejections and missed-tick summaries are recognised by their payload.
DECISION_SOURCES = frozenset(
    {WakeSource.APPROVAL_RESOLVED, WakeSource.AGENT_ERROR, WakeSource.BUDGET_ALERT}
)


def carries_decision(entry: ContextEntry) -> bool:
    """Whether a merged wake carries a decision the agent must not miss.

    Approval results, agent errors and budget alerts (by source), rejections (a payload
    with a non-null ``rejection``) and missed-tick summaries (a routine payload with a
    non-null ``missed_ticks``). The store's bounded read applies the same rule in SQL.
    """
    payload = entry.payload
    return (
        entry.source in DECISION_SOURCES
        or payload.get("rejection") is not None
        or (entry.source is WakeSource.ROUTINE and payload.get("missed_ticks") is not None)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupRequest:
    """The persisted dispatch record of one wake."""

    id: int
    workspace_id: str
    agent_id: str
    task_id: str | None
    source: WakeSource
    classification: Classification
    payload: JSON
    idempotency_key: str | None
    status: WakeupStatus
    status_reason: str | None
    run_id: int | None
    requested_at: datetime
    #: The run whose action produced this wake (DESIGN §15); ``None`` at a chain's root.
    caused_by_run_id: int | None = None
    #: 0 for a person, a routine's trigger or a webhook; the causing run's depth + 1.
    causation_depth: int = 0
    #: Whether a person's action is at the root of the chain.
    human_rooted: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """The execution record: what the scheduler claims and an executor runs once.

    The wakes merged into a run are the wakeup requests whose ``run_id`` is the run (read
    them bounded with ``QueueStore.run_wakes``, or paged with ``list_wakeups``).

    Attributes:
        context_version: grows by one with each merged wake (it equals the number of wakes
            the run was given), so a prompt built from an older version is rebuilt before
            launch.
        coalesced_count: how many wake requests this run carries (1 when none merged).
        not_before: earliest claim instant (coalescing hold, scheduled retry).
    """

    id: int
    workspace_id: str
    agent_id: str
    task_id: str | None
    source: WakeSource
    classification: Classification
    status: RunStatus
    reason: RunReason | None
    error: str | None
    idempotency_key: str | None
    context_version: int
    coalesced_count: int
    requested_at: datetime
    not_before: datetime
    claimed_at: datetime | None
    claimed_by: str | None
    lease_expires_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    retry_count: int
    executor: str | None
    prompt: str | None
    result: JSON | None
    usage: JSON | None
    pid: int | None
    exit_code: int | None
    session_id: str | None
    #: ``full`` (whole wake prompt) or ``delta`` (resume delta); ``None`` before launch.
    prompt_kind: str | None = None
    #: Launches so far (0 before the first). Each launch is an attempt with its own run
    #: token; requeue, lease expiry, cancel and end make the attempt over (DESIGN §4).
    attempt: int = 0
    #: The run whose action produced this run's first wake (or a shallower merged one).
    caused_by_run_id: int | None = None
    #: Causation depth of the wake that made it (a merged shallower wake lowers it).
    causation_depth: int = 0
    #: Whether a person's action is at the root of its chain.
    human_rooted: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEvent:
    """One line of a run's event log (claimed, step decisions, launch, output, finish)."""

    id: int
    run_id: int
    at: datetime
    kind: str
    message: str
    data: JSON


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSession:
    """One agent session launched for a run; task-bound sessions may be resumed."""

    id: str
    run_id: int
    agent_id: str
    task_id: str | None
    executor: str
    external_session_id: str | None
    cwd: str | None
    resumed_from: str | None
    created_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class InboxItem:
    """Something a person must look at (agent errors, configuration problems, approvals)."""

    id: int
    workspace_id: str
    kind: InboxKind
    status: InboxStatus
    title: str
    body: str
    data: JSON
    created_at: datetime
    resolved_at: datetime | None = None
    agent_id: str | None = None
    task_id: str | None = None
    approval_id: str | None = None
    dedupe_key: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ActivityEntry:
    """An entry of the workspace's activity log."""

    id: int
    workspace_id: str
    at: datetime
    kind: str
    agent_id: str | None
    task_id: str | None
    run_id: int | None
    message: str
    data: JSON
    actor: str = "system"


@dataclass(frozen=True, kw_only=True, slots=True)
class Approval:
    """A decision a person makes for an agent (``generic``) or on a finished task (``task_review``).

    Attributes:
        requested_by_agent_id: the agent that asked (woken with ``approval_resolved``).
        decided_by: who decided (``user:<token name>``), once resolved.
        resolved_at: when it was approved or rejected (UTC), else ``None``.
    """

    id: str
    workspace_id: str
    kind: ApprovalKind
    status: ApprovalStatus
    title: str
    body: str
    task_id: str | None
    requested_by_agent_id: str | None
    decision_note: str | None
    decided_by: str | None
    created_at: datetime
    resolved_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiToken:
    """A bearer token's stored record (only the hash of the secret is kept)."""

    id: str
    kind: TokenKind
    name: str
    workspace_id: str | None
    agent_id: str | None
    run_id: int | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    #: The run attempt a run token was minted for (``None`` for admin tokens).
    attempt: int | None = None
