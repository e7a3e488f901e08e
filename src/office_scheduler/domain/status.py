"""Every status and reason vocabulary of the product, each declared exactly once."""

from __future__ import annotations

from enum import StrEnum


class AgentRole(StrEnum):
    """What an agent does in the office; decides defaults such as ``skip_idle_wakeups``."""

    CEO = "ceo"
    COORDINATOR = "coordinator"
    WORKER = "worker"
    SPECIALIST = "specialist"
    ASSISTANT = "assistant"
    REVIEWER = "reviewer"

    @property
    def is_coordinator(self) -> bool:
        """True for the roles that coordinate the office (``ceo``, ``coordinator``)."""
        return self in (AgentRole.CEO, AgentRole.COORDINATOR)

    @property
    def default_skip_idle_wakeups(self) -> bool:
        """The specification's per-role default: coordinators are woken even when idle."""
        return not self.is_coordinator


class AgentStatus(StrEnum):
    """Lifecycle of an agent; only ``idle`` and ``working`` agents are claimed for."""

    IDLE = "idle"
    WORKING = "working"
    PAUSED = "paused"
    STOPPED = "stopped"
    PENDING_APPROVAL = "pending_approval"


CLAIMABLE_AGENT_STATUSES = (AgentStatus.IDLE, AgentStatus.WORKING)


class TaskState(StrEnum):
    """Kanban state of a task."""

    TODO = "TODO"
    IN_PROGRESS = "IN_PROGRESS"
    IN_REVIEW = "IN_REVIEW"
    BLOCKED = "BLOCKED"
    DONE = "DONE"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        """True for ``DONE`` and ``CANCELLED``."""
        return self in TERMINAL_TASK_STATES


TERMINAL_TASK_STATES = frozenset({TaskState.DONE, TaskState.CANCELLED})
#: States that count as work for the idle-skip check (specification "Idle wakeup skip").
ACTIONABLE_TASK_STATES = (TaskState.TODO, TaskState.IN_PROGRESS)


class WorkflowKind(StrEnum):
    """Kind of a workflow; each workspace has one ``office`` and one hidden ``routine`` one."""

    KANBAN = "kanban"
    OFFICE = "office"
    ROUTINE = "routine"


class WakeSource(StrEnum):
    """Why an agent is woken (specification "Wakeup sources") or queued explicitly queue-run."""

    ROUTINE = "routine"
    COMMENT = "comment"
    AGENT_ERROR = "agent_error"
    SELF = "self"
    USER = "user"
    TASK_ASSIGNED = "task_assigned"
    TASK_BLOCKERS_RESOLVED = "task_blockers_resolved"
    TASK_CHILDREN_COMPLETED = "task_children_completed"
    APPROVAL_RESOLVED = "approval_resolved"
    BUDGET_ALERT = "budget_alert"
    QUEUE_RUN = "queue_run"


class Classification(StrEnum):
    """``periodic`` wakes (a cron fire of a lightweight routine) may be idle-skipped; others not."""

    PERIODIC = "periodic"
    EVENT = "event"


class WakeupStatus(StrEnum):
    """Wakeup request states (DESIGN §4). A request never stays ``queued`` after intake commits."""

    QUEUED = "queued"
    COALESCED = "coalesced"
    CLAIMED = "claimed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    #: Past a runaway limit (DESIGN §15): no run made; ``status_reason`` is the
    #: :class:`HoldReason`. A person's release turns it ``released``.
    HELD = "held"
    #: A held request a person released: a new request carries it on.
    RELEASED = "released"


class HoldReason(StrEnum):
    """Why a wake was held instead of making or joining a run (DESIGN §15)."""

    DEPTH_LIMIT = "depth_limit"
    SELF_WAKE_LIMIT = "self_wake_limit"
    RUN_RATE_LIMIT = "run_rate_limit"
    ROUTINE_DAILY_LIMIT = "routine_daily_limit"
    NO_PROGRESS = "no_progress"


class RunStatus(StrEnum):
    """Run states (DESIGN §4)."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SCHEDULED_RETRY = "scheduled_retry"

    @property
    def is_terminal(self) -> bool:
        """True for ``finished``, ``failed`` and ``cancelled``."""
        return self in TERMINAL_RUN_STATUSES


TERMINAL_RUN_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED})
#: Runs a new wake may coalesce into (DESIGN §5).
IN_FLIGHT_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.CLAIMED)
#: Runs that occupy one of the agent's ``max_concurrent_sessions`` slots.
LIVE_RUN_STATUSES = (RunStatus.CLAIMED, RunStatus.RUNNING)
#: Runs of a (task, assignee) that show its ``task_assigned`` wake was not lost: the recovery
#: sweep leaves the task alone (failed and cancelled runs do not count).
RECOVERY_BLOCKING_RUN_STATUSES = (
    RunStatus.QUEUED,
    RunStatus.CLAIMED,
    RunStatus.RUNNING,
    RunStatus.SCHEDULED_RETRY,
    RunStatus.FINISHED,
)


class RunReason(StrEnum):
    """Why a run ended the way it did (or went back to the queue)."""

    COMPLETED = "completed"
    NO_ACTIONABLE_TASKS = "no_actionable_tasks"
    AGENT_PAUSED = "agent_paused"
    TASK_NOT_FOUND = "task_not_found"
    ASSIGNEE_CHANGED = "assignee_changed"
    TASK_TERMINAL = "task_terminal"
    REVIEW_PARTICIPANT_CHANGED = "review_participant_changed"
    BLOCKED = "blocked"
    CHECKOUT_CONFLICT = "checkout_conflict"
    BUDGET_EXCEEDED = "budget_exceeded"
    EXECUTOR_MISSING = "executor_missing"
    AGENT_FAILED = "agent_failed"
    TIMEOUT = "timeout"
    INACTIVITY_TIMEOUT = "inactivity_timeout"
    INTERRUPTED = "interrupted"
    CANCELLED_BY_USER = "cancelled_by_user"
    INTERNAL_ERROR = "internal_error"
    #: The executor failed in a way retrying cannot fix (error family ``config``).
    CONFIG_ERROR = "config_error"
    #: The run failed ``max_run_failures`` times; escalated to people and the coordinator.
    RETRIES_EXHAUSTED = "retries_exhausted"
    #: A scheduled retry whose task moved to another agent before it was promoted.
    RETRY_STALE_ASSIGNEE = "retry_stale_assignee"
    #: A scheduled retry whose task ended (done, cancelled, archived) or vanished.
    RETRY_TASK_CANCELLED = "retry_task_cancelled"
    #: A run carrying only ``task_children_completed`` wakes while some child is still open.
    CHILDREN_PENDING = "children_pending"


#: Reasons a run ends without launching because a guard or a cancellation stopped it; each
#: such end is written to the activity log (``run_skipped`` / ``run_cancelled``). The idle
#: skip (``no_actionable_tasks``) logs its own ``wakeup_idle_skipped`` instead.
SKIP_OR_CANCEL_REASONS = frozenset(
    {
        RunReason.AGENT_PAUSED,
        RunReason.TASK_NOT_FOUND,
        RunReason.ASSIGNEE_CHANGED,
        RunReason.TASK_TERMINAL,
        RunReason.REVIEW_PARTICIPANT_CHANGED,
        RunReason.BLOCKED,
        RunReason.CHILDREN_PENDING,
        RunReason.CHECKOUT_CONFLICT,
        RunReason.BUDGET_EXCEEDED,
        RunReason.CANCELLED_BY_USER,
        RunReason.RETRY_STALE_ASSIGNEE,
        RunReason.RETRY_TASK_CANCELLED,
    }
)


class PermissionMode(StrEnum):
    """An agent's tool permission policy (``permission_policy.mode``, used by ``acp``)."""

    ALLOW_ALL = "allow_all"
    DENY = "deny"
    ALLOW_LISTED = "allow_listed"


class ErrorFamily(StrEnum):
    """Family of an executor failure (DESIGN §9), used by retry classification."""

    RATE_LIMIT = "rate_limit"
    TRANSIENT = "transient"
    AUTH = "auth"
    CONFIG = "config"
    CRASH = "crash"
    TIMEOUT = "timeout"
    REFUSAL = "refusal"


class OutcomeStatus(StrEnum):
    """Result of one executor session."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AuthorKind(StrEnum):
    """Who wrote a comment or made a change."""

    USER = "user"
    AGENT = "agent"


class TokenKind(StrEnum):
    """API token kinds: admin tokens for people, run tokens for launched agents."""

    ADMIN = "admin"
    RUN = "run"


class InboxKind(StrEnum):
    """Inbox item kinds shown to people."""

    AGENT_ERROR = "agent.error"
    AGENT_PAUSED = "agent.paused"
    EXECUTOR_MISSING = "executor.missing"
    APPROVAL_REQUESTED = "approval.requested"
    #: A task finished by its agent waits for a person's review (``requires_approval``).
    TASK_REVIEW = "task.review"
    #: A budget crossed its warn threshold (one per policy and period).
    BUDGET_ALERT = "budget.alert"
    #: A budget was exceeded and its ``action_on_exceed`` was applied.
    BUDGET_EXCEEDED = "budget.exceeded"
    #: Wakes of one agent held by one runaway limit (one open item per agent and limit).
    WAKE_HELD = "wake.held"


class InboxStatus(StrEnum):
    """Inbox item lifecycle: ``open`` until a person resolves or dismisses it."""

    OPEN = "open"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class ApprovalStatus(StrEnum):
    """Approval lifecycle: ``pending`` until a person approves or rejects it."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ApprovalKind(StrEnum):
    """``task_review`` gates a ``requires_approval`` task; ``generic`` is any agent request."""

    GENERIC = "generic"
    TASK_REVIEW = "task_review"


class MergeDecision(StrEnum):
    """What intake does with a new wake request (decided by ``intake.rules``)."""

    CREATE = "create"
    COALESCE = "coalesce"
    COALESCE_AND_PROMOTE = "coalesce_and_promote"


class IntakeOutcome(StrEnum):
    """What happened to a wake request in its intake transaction."""

    CREATED = "created"
    COALESCED = "coalesced"
    DEDUPLICATED = "deduplicated"
    #: Past a runaway limit: the request is ``held`` and no run was made or joined.
    HELD = "held"
