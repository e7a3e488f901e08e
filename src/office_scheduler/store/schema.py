"""Tables of the whole data model (DESIGN §3). Indexes follow the queries that use them."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from office_scheduler.store.types import UTCDateTime, id_type, json_type

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _ts(name: str, *, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, UTCDateTime(), nullable=nullable)


def _id(name: str = "id") -> sa.Column[object]:
    return sa.Column(name, sa.String(40), primary_key=True)


def _ref(
    name: str, target: str, *, nullable: bool = False, cascade: bool = True
) -> sa.Column[object]:
    ondelete = "CASCADE" if cascade else "SET NULL"
    return sa.Column(name, sa.ForeignKey(target, ondelete=ondelete), nullable=nullable)


workspaces = sa.Table(
    "workspaces",
    metadata,
    _id(),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("description", sa.Text(), nullable=False, server_default=""),
    sa.Column("office_workflow_id", sa.String(40), nullable=False),
    sa.Column("routine_workflow_id", sa.String(40), nullable=False),
    sa.Column("kanban_workflow_id", sa.String(40), nullable=False),
    _ts("created_at", nullable=False),
)

workspace_settings = sa.Table(
    "workspace_settings",
    metadata,
    sa.Column("workspace_id", sa.ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("coalesce_window_s", sa.Float(), nullable=False, server_default="5"),
    sa.Column("recovery_lookback_hours", sa.Integer(), nullable=False, server_default="24"),
    sa.Column("prompt_max_wakes", sa.Integer(), nullable=False, server_default="20"),
    sa.Column("prompt_max_wake_bytes", sa.Integer(), nullable=False, server_default="12000"),
    sa.Column("default_executor", sa.String(200)),
    sa.Column("executors", json_type(), nullable=False),
    # Runaway limits set for the workspace ({"max_causation_depth": 12, ...}); NULL: defaults.
    sa.Column("runaway_limits", json_type()),
    _ts("updated_at", nullable=False),
)

workflows = sa.Table(
    "workflows",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    _ts("created_at", nullable=False),
)

projects = sa.Table(
    "projects",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text(), nullable=False, server_default=""),
    sa.Column("directory", sa.Text()),
    sa.Column("executor", sa.String(200)),
    sa.Column("repos", json_type(), nullable=False),
    _ts("created_at", nullable=False),
    sa.UniqueConstraint("workspace_id", "name"),
)

agents = sa.Table(
    "agents",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(40), nullable=False),
    sa.Column("status", sa.String(40), nullable=False),
    sa.Column("instructions", sa.Text(), nullable=False, server_default=""),
    sa.Column("max_concurrent_sessions", sa.Integer(), nullable=False, server_default="1"),
    sa.Column("cooldown_s", sa.Float(), nullable=False, server_default="10"),
    sa.Column("skip_idle_wakeups", sa.Boolean(), nullable=False),
    sa.Column("executor", sa.String(200)),
    # The agent this one reports to (its coordinator): budget alerts and errors go there.
    _ref("reports_to", "agents.id", nullable=True, cascade=False),
    # Why the agent is paused (``budget_exceeded``, ``escalations``, ``manual``), if it is.
    sa.Column("paused_reason", sa.String(60)),
    # ACP permission policy: {"mode": "allow_all"|"deny"|"allow_listed", "tools": [...]}.
    sa.Column("permission_policy", json_type()),
    # The status the last config import set (NULL: none did): an import leaves a paused or
    # stopped status alone unless it set that status itself.
    sa.Column("imported_status", sa.String(40)),
    # Expected cost of one run in cents, for the budget pre-launch check (NULL: the median
    # of the agent's recent priced runs).
    sa.Column("expected_run_cents", sa.Integer()),
    # The agent's overrides of its workspace's runaway limits (NULL: none).
    sa.Column("runaway_limits", json_type()),
    _ts("last_wakeup_finished_at"),
    # last_wakeup_finished_at + cooldown_s, kept so the claim filters agents in SQL.
    _ts("cooldown_until"),
    # The earliest not_before of the agent's queued runs (NULL: none): the claim walks
    # agents in this order through its index instead of probing every agent's runs.
    _ts("next_queued_at"),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    sa.UniqueConstraint("workspace_id", "name"),
)

#: When an agent may next start one of its queued runs, as far as its own row tells: its
#: queue head, or the end of its cooldown when that is later (NULL: nothing queued). The
#: claim walks agents in this order through ``ix_agents_claimable_at``, so an agent cooling
#: down is not visited at all until its cooldown ends (an index range, not a filter).
AGENT_CLAIMABLE_AT: sa.ColumnElement[Any] = sa.case(
    (agents.c.cooldown_until > agents.c.next_queued_at, agents.c.cooldown_until),
    else_=agents.c.next_queued_at,
)
sa.Index("ix_agents_claimable_at", AGENT_CLAIMABLE_AT, agents.c.id)

tasks = sa.Table(
    "tasks",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    _ref("workflow_id", "workflows.id"),
    _ref("project_id", "projects.id", nullable=True, cascade=False),
    _ref("parent_id", "tasks.id", nullable=True, cascade=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("description", sa.Text(), nullable=False, server_default=""),
    sa.Column("state", sa.String(20), nullable=False),
    _ref("assignee_agent_id", "agents.id", nullable=True, cascade=False),
    _ref("checkout_agent_id", "agents.id", nullable=True, cascade=False),
    sa.Column("checkout_run_id", sa.BigInteger()),
    _ts("checkout_at"),
    sa.Column("requires_approval", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("reviewers", json_type(), nullable=False),
    sa.Column("approvers", json_type(), nullable=False),
    sa.Column("executor", sa.String(200)),
    _ts("archived_at"),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    sa.Index("ix_tasks_assignee_state", "assignee_agent_id", "state"),
    sa.Index("ix_tasks_state_created", "state", "created_at"),
    sa.Index("ix_tasks_parent", "parent_id"),
    sa.Index("ix_tasks_workspace_state", "workspace_id", "state"),
)

task_blockers = sa.Table(
    "task_blockers",
    metadata,
    sa.Column("task_id", sa.ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("blocker_task_id", sa.ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    _ts("created_at", nullable=False),
    sa.Index("ix_task_blockers_blocker", "blocker_task_id"),
)

comments = sa.Table(
    "comments",
    metadata,
    _id(),
    _ref("task_id", "tasks.id"),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("author_kind", sa.String(20), nullable=False),
    _ref("author_agent_id", "agents.id", nullable=True, cascade=False),
    sa.Column("body", sa.Text(), nullable=False),
    # Set when the comment came in from a chat integration (channel message).
    sa.Column("channel", sa.String(60)),
    sa.Column("external_author", sa.String(200)),
    _ts("created_at", nullable=False),
    sa.Index("ix_comments_task_created", "task_id", "created_at"),
)

approvals = sa.Table(
    "approvals",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    _ref("task_id", "tasks.id", nullable=True, cascade=False),
    _ref("requested_by_agent_id", "agents.id", nullable=True, cascade=False),
    sa.Column("kind", sa.String(40), nullable=False, server_default="generic"),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("body", sa.Text(), nullable=False, server_default=""),
    sa.Column("decision_note", sa.Text()),
    sa.Column("decided_by", sa.String(200)),
    _ts("created_at", nullable=False),
    _ts("resolved_at"),
    sa.Index("ix_approvals_workspace_id_status", "workspace_id", "status"),
    sa.Index("ix_approvals_task_id", "task_id"),
)

#: What caused a wake or a run (DESIGN §15): ``(name, type args, keyword args)``.
CAUSATION_COLUMNS: tuple[tuple[str, tuple[Any, ...], dict[str, Any]], ...] = (
    ("caused_by_run_id", (sa.BigInteger(),), {}),
    ("causation_depth", (sa.Integer(),), {"nullable": False, "server_default": "0"}),
    ("human_rooted", (sa.Boolean(),), {"nullable": False, "server_default": sa.false()}),
)
#: ``status = 'held'`` as a literal, for the partial index (see LIVE_RUNS_PREDICATE).
HELD_PREDICATE = sa.text("status = 'held'")

wakeup_requests = sa.Table(
    "wakeup_requests",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    _ref("workspace_id", "workspaces.id"),
    _ref("agent_id", "agents.id"),
    sa.Column("task_id", sa.String(40)),
    sa.Column("source", sa.String(40), nullable=False),
    sa.Column("classification", sa.String(20), nullable=False),
    sa.Column("payload", json_type(), nullable=False),
    sa.Column("idempotency_key", sa.String(600), unique=True),  # scope + 500 (0006)
    # SHA-256 of the caller's request the key came with (explicit wakes): the key reused
    # with another request is refused instead of deduplicated.
    sa.Column("request_fingerprint", sa.String(64)),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("status_reason", sa.String(200)),
    sa.Column("run_id", sa.BigInteger()),
    _ts("requested_at", nullable=False),
    *[sa.Column(name, *args, **kwargs) for name, args, kwargs in CAUSATION_COLUMNS],
    sa.Index("ix_wakeup_requests_agent_requested", "agent_id", "requested_at"),
    # A run's merged wakes, newest first (its bounded view and the paged listing).
    sa.Index("ix_wakeup_requests_run_id_id", "run_id", "id"),
    # The self-wakes-per-hour limit counts one agent's wakes of one source.
    sa.Index("ix_wakeup_requests_agent_source_requested", "agent_id", "source", "requested_at"),
    # Held wakes only (few rows): the overview's counts and a release's lookup.
    sa.Index(
        "ix_wakeup_requests_held",
        "workspace_id",
        "agent_id",
        sqlite_where=HELD_PREDICATE,
        postgresql_where=HELD_PREDICATE,
    ),
)

#: ``status IN ('claimed', 'running')`` with literal values: SQLite uses a partial index
#: only for queries that repeat its predicate literally (not with bound parameters).
LIVE_RUNS_PREDICATE = sa.text("status IN ('claimed', 'running')")

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    _ref("workspace_id", "workspaces.id"),
    _ref("agent_id", "agents.id"),
    sa.Column("task_id", sa.String(40)),
    sa.Column("source", sa.String(40), nullable=False),
    sa.Column("classification", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("reason", sa.String(60)),
    sa.Column("error", sa.Text()),
    sa.Column("idempotency_key", sa.String(600), unique=True),  # scope + 500 (0006)
    sa.Column("context_version", sa.Integer(), nullable=False, server_default="1"),
    sa.Column("coalesced_count", sa.Integer(), nullable=False, server_default="1"),
    _ts("requested_at", nullable=False),
    _ts("not_before", nullable=False),
    _ts("claimed_at"),
    sa.Column("claimed_by", sa.String(200)),
    _ts("lease_expires_at"),
    _ts("started_at"),
    _ts("finished_at"),
    sa.Column("retry_count", sa.Integer(), nullable=False, server_default="0"),
    # Launches so far (0 before the first): each launch is an attempt with its own token.
    sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("executor", sa.String(200)),
    sa.Column("prompt", sa.Text()),
    sa.Column("result", json_type()),
    sa.Column("usage", json_type()),
    sa.Column("pid", sa.Integer()),
    sa.Column("exit_code", sa.Integer()),
    sa.Column("session_id", sa.String(40)),
    # ``full`` (whole wake prompt) or ``delta`` (resume delta for a resumed session).
    sa.Column("prompt_kind", sa.String(20)),
    *[sa.Column(name, *args, **kwargs) for name, args, kwargs in CAUSATION_COLUMNS],
    sa.Index("ix_runs_status_not_before", "status", "not_before", "id"),
    # The runs-per-hour limit of one agent.
    sa.Index("ix_runs_agent_requested", "agent_id", "requested_at"),
    sa.Index("ix_runs_agent_status", "agent_id", "status", "not_before", "id"),
    sa.Index("ix_runs_task_status", "task_id", "status"),
    sa.Index("ix_runs_workspace_requested", "workspace_id", "requested_at"),
    # Live runs only (a few rows however long the history): the claim's per-agent count.
    sa.Index(
        "ix_runs_live_agent",
        "agent_id",
        sqlite_where=LIVE_RUNS_PREDICATE,
        postgresql_where=LIVE_RUNS_PREDICATE,
    ),
)

run_events = sa.Table(
    "run_events",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    _ts("at", nullable=False),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("message", sa.Text(), nullable=False, server_default=""),
    sa.Column("data", json_type(), nullable=False),
    sa.Index("ix_run_events_run", "run_id", "id"),
)

sessions = sa.Table(
    "sessions",
    metadata,
    _id(),
    sa.Column("run_id", sa.BigInteger(), nullable=False),
    _ref("agent_id", "agents.id"),
    sa.Column("task_id", sa.String(40)),
    sa.Column("executor", sa.String(200), nullable=False),
    sa.Column("external_session_id", sa.String(500)),
    sa.Column("cwd", sa.Text()),
    sa.Column("resumed_from", sa.String(40)),
    _ts("created_at", nullable=False),
    sa.Index("ix_sessions_task_agent", "task_id", "agent_id", "created_at"),
)

routines = sa.Table(
    "routines",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("description", sa.Text(), nullable=False, server_default=""),
    _ref("assignee_agent_id", "agents.id", nullable=True, cascade=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("concurrency_policy", sa.String(40), nullable=False),
    sa.Column("catch_up_policy", sa.String(40), nullable=False),
    sa.Column("catch_up_max", sa.Integer(), nullable=False, server_default="25"),
    sa.Column("task_template", json_type()),
    sa.Column("variables", json_type(), nullable=False),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
)

routine_triggers = sa.Table(
    "routine_triggers",
    metadata,
    _id(),
    _ref("routine_id", "routines.id"),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
    sa.Column("cron_expression", sa.String(200)),
    sa.Column("timezone", sa.String(100), nullable=False, server_default=""),
    _ts("next_run_at"),
    _ts("last_fired_at"),
    sa.Column("public_id", sa.String(100), unique=True),
    sa.Column("signing_mode", sa.String(20)),
    sa.Column("secret", sa.Text()),
    _ts("created_at", nullable=False),
    # Signing-mode options: {"events": {name: [actions]}} (github), {"task_id": ...} (slack).
    sa.Column("options", json_type()),
    sa.Index("ix_routine_triggers_due", "enabled", "next_run_at"),
)

routine_runs = sa.Table(
    "routine_runs",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    _ref("routine_id", "routines.id"),
    sa.Column("trigger_id", sa.String(40)),
    sa.Column("source", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("status_reason", sa.Text()),
    sa.Column("trigger_payload", json_type(), nullable=False),
    sa.Column("linked_task_id", sa.String(40)),
    sa.Column("linked_run_id", sa.BigInteger()),
    sa.Column("coalesced_into_run_id", sa.BigInteger()),
    sa.Column("dispatch_fingerprint", sa.String(128)),
    _ts("scheduled_for"),
    _ts("created_at", nullable=False),
    _ts("completed_at"),
    # routine:<id>:<trigger_id>:<unix_minute>, routine:<id>:webhook:<key>, ... (specification).
    sa.Column("idempotency_key", sa.String(600), unique=True),
    # HMAC signature of a signed webhook delivery; a replay of it is rejected.
    sa.Column("delivery_signature", sa.String(128)),
    # SHA-256 of the webhook body a caller's Idempotency-Key came with.
    sa.Column("request_fingerprint", sa.String(64)),
    sa.Index("ix_routine_runs_routine_fingerprint", "routine_id", "dispatch_fingerprint"),
    sa.Index("ix_routine_runs_linked_task_id", "linked_task_id"),
    sa.Index("ix_routine_runs_linked_run_id", "linked_run_id"),
    sa.Index("ix_routine_runs_status_created_at", "status", "created_at"),
    # The routine-runs-per-day limit of one routine.
    sa.Index("ix_routine_runs_routine_created", "routine_id", "created_at"),
    sa.UniqueConstraint("trigger_id", "delivery_signature"),
)

continuation_summaries = sa.Table(
    "continuation_summaries",
    metadata,
    sa.Column("agent_id", sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("scope", sa.String(200), primary_key=True),
    sa.Column("content", sa.Text(), nullable=False, server_default=""),
    sa.Column("content_tokens", sa.Integer(), nullable=False, server_default="0"),
    _ts("updated_at", nullable=False),
    sa.Column("updated_by_run_id", sa.BigInteger()),
)

activity_log = sa.Table(
    "activity_log",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    _ref("workspace_id", "workspaces.id"),
    _ts("at", nullable=False),
    sa.Column("kind", sa.String(60), nullable=False),
    # Who did it: ``user``, ``agent:<id>`` or ``system``.
    sa.Column("actor", sa.String(200), nullable=False, server_default="system"),
    sa.Column("agent_id", sa.String(40)),
    sa.Column("task_id", sa.String(40)),
    sa.Column("run_id", sa.BigInteger()),
    sa.Column("message", sa.Text(), nullable=False, server_default=""),
    sa.Column("data", json_type(), nullable=False),
    sa.Index("ix_activity_log_workspace_at", "workspace_id", "at"),
    sa.Index("ix_activity_log_workspace_id_kind_at", "workspace_id", "kind", "at"),
)

inbox_items = sa.Table(
    "inbox_items",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("kind", sa.String(60), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("body", sa.Text(), nullable=False, server_default=""),
    sa.Column("data", json_type(), nullable=False),
    sa.Column("agent_id", sa.String(40)),
    sa.Column("task_id", sa.String(40)),
    sa.Column("approval_id", sa.String(40)),
    # One open item per cause (``budget_alert:<policy>:<period>``, ...); NULL = no dedupe.
    sa.Column("dedupe_key", sa.String(300), unique=True),
    _ts("created_at", nullable=False),
    _ts("resolved_at"),
    sa.Index("ix_inbox_items_workspace_status", "workspace_id", "status"),
)

budget_policies = sa.Table(
    "budget_policies",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("scope_kind", sa.String(20), nullable=False),
    sa.Column("scope_id", sa.String(40), nullable=False),
    sa.Column("limit_subcents", sa.BigInteger(), nullable=False),
    sa.Column("period", sa.String(20), nullable=False),
    sa.Column("alert_threshold_pct", sa.Integer(), nullable=False, server_default="80"),
    sa.Column("action_on_exceed", sa.String(40), nullable=False),
    # Period key (``2026-11`` or ``lifetime``) whose warn alert / exceed action already fired:
    # a compare-and-set on these keeps it to one per period across processes.
    sa.Column("alerted_period", sa.String(20)),
    sa.Column("exceeded_period", sa.String(20)),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    sa.UniqueConstraint("workspace_id", "scope_kind", "scope_id"),
)

cost_events = sa.Table(
    "cost_events",
    metadata,
    sa.Column("id", id_type(), primary_key=True, autoincrement=True),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("agent_id", sa.String(40), nullable=False),
    sa.Column("project_id", sa.String(40)),
    sa.Column("task_id", sa.String(40)),
    sa.Column("run_id", sa.BigInteger()),
    sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("cost_subcents", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("model", sa.String(200)),
    # False when the run reported tokens but no price: not counted as zero cost.
    sa.Column("priced", sa.Boolean(), nullable=False, server_default=sa.true()),
    _ts("at", nullable=False),
    sa.Index("ix_cost_events_agent_at", "agent_id", "at"),
    sa.Index("ix_cost_events_workspace_id_at", "workspace_id", "at"),
    sa.Index("ix_cost_events_project_id_at", "project_id", "at"),
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    _id(),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("token_hash", sa.String(128), nullable=False, unique=True),
    sa.Column("workspace_id", sa.String(40)),
    sa.Column("agent_id", sa.String(40)),
    sa.Column("run_id", sa.BigInteger()),
    # The run attempt a run token was minted for (fencing: a later attempt refuses it).
    sa.Column("attempt", sa.Integer()),
    _ts("created_at", nullable=False),
    _ts("expires_at"),
    _ts("revoked_at"),
    sa.Index("ix_api_tokens_run", "run_id"),
)

#: Dashboard sign-ins: the browser's cookie holds a random session id, stored here only as
#: its SHA-256; a session ends at ``expires_at``, on sign-out (``revoked_at``) and as soon
#: as its admin token stops being active.
dashboard_sessions = sa.Table(
    "dashboard_sessions",
    metadata,
    sa.Column("session_hash", sa.String(128), primary_key=True),
    _ref("token_id", "api_tokens.id"),
    _ts("created_at", nullable=False),
    _ts("expires_at", nullable=False),
    _ts("revoked_at"),
    sa.Index("ix_dashboard_sessions_token", "token_id"),
)

scheduler_leases = sa.Table(
    "scheduler_leases",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    _ts("expires_at", nullable=False),
)

notification_channels = sa.Table(
    "notification_channels",
    metadata,
    _id(),
    _ref("workspace_id", "workspaces.id"),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("url", sa.Text(), nullable=False),
    sa.Column("secret", sa.Text()),
    # Event names the channel receives; an empty list means every event.
    sa.Column("events", json_type(), nullable=False),
    sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
    _ts("created_at", nullable=False),
    _ts("updated_at", nullable=False),
    sa.UniqueConstraint("workspace_id", "name"),
)

# The outbox: one row per event and channel, written with the event's own transaction.
notification_deliveries = sa.Table(
    "notification_deliveries",
    metadata,
    # msg_<32 hex>: the stable id receivers dedupe on (the webhook-id header).
    sa.Column("id", sa.String(40), primary_key=True),
    _ref("workspace_id", "workspaces.id"),
    _ref("channel_id", "notification_channels.id"),
    sa.Column("event", sa.String(60), nullable=False),
    sa.Column("payload", json_type(), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    _ts("next_attempt_at"),
    # A sender's claim on the row while it posts (lease); another node takes it after.
    _ts("claimed_until"),
    sa.Column("claimed_by", sa.String(200)),
    _ts("give_up_at", nullable=False),
    sa.Column("last_error", sa.Text()),
    sa.Column("last_status_code", sa.Integer()),
    _ts("created_at", nullable=False),
    _ts("delivered_at"),
    sa.Index("ix_notification_deliveries_due", "status", "next_attempt_at"),
    sa.Index("ix_notification_deliveries_channel_id", "channel_id"),
)

# Maintenance leadership (store/leader_lease.py): one row, taken and renewed by
# compare-and-set; ``epoch`` grows on every take-over and fences a stale leader's writes.
leader_lease = sa.Table(
    "leader_lease",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("holder", sa.String(200), nullable=False),
    sa.Column("epoch", sa.BigInteger(), nullable=False),
    _ts("expires_at", nullable=False),
    _ts("acquired_at", nullable=False),
    _ts("renewed_at", nullable=False),
    sa.CheckConstraint("id = 1", name="single_row"),
)
