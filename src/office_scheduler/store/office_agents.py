"""Agents of the office store."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from office_scheduler.domain.errors import ConflictError, InvalidInputError, NotFoundError
from office_scheduler.domain.models import Agent, Run
from office_scheduler.domain.status import AgentRole, AgentStatus
from office_scheduler.store.agent_rules import (
    MANUAL_PAUSE,
    check_reports_to,
    end_pending_runs,
)
from office_scheduler.store.agent_rules import expected_run_cents as expected_cents
from office_scheduler.store.agent_rules import paused_reason as _paused_reason
from office_scheduler.store.agent_rules import permission_policy as _policy
from office_scheduler.store.engine import Database
from office_scheduler.store.ids import new_id
from office_scheduler.store.notify import notify_wake
from office_scheduler.store.office_common import ids_in_workspace, workspace_row
from office_scheduler.store.queue_common import lock_agent
from office_scheduler.store.routines import heartbeat_follows_role, install_heartbeat
from office_scheduler.store.rows import agent_from_row
from office_scheduler.store.schema import agents
from office_scheduler.store.sql import Row, all_rows, first_row, unique_conflict
from office_scheduler.store.validation import clean_text, enum_value, flag, optional_text

_AGENT_CHANGES = frozenset(
    {
        "name",
        "role",
        "status",
        "instructions",
        "max_concurrent_sessions",
        "cooldown",
        "skip_idle_wakeups",
        "executor",
        "reports_to",
        "permission_policy",
        "paused_reason",
        "imported_status",
        "expected_run_cents",
    }
)
#: Statuses that mean "not paused": entering one clears ``paused_reason``.
_RUNNING_STATUSES = frozenset({AgentStatus.IDLE, AgentStatus.WORKING})


def _role(value: object) -> AgentRole:
    return enum_value(AgentRole, value, field="role")


def _status(value: object) -> AgentStatus:
    return enum_value(AgentStatus, value, field="status")


#: Most sessions one agent may run at once (the API, CLI and config files share the range).
MAX_SESSIONS = 100


def _max_sessions(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SESSIONS:
        raise InvalidInputError(
            f"max_concurrent_sessions must be an integer in 1..{MAX_SESSIONS}",
            field="max_concurrent_sessions",
        )
    return value


def _cooldown_s(value: object) -> float:
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise InvalidInputError("cooldown must be a non-negative duration", field="cooldown_s")
    return value.total_seconds()


_AGENT_BY_ID = sa.select(agents).where(agents.c.id == sa.bindparam("agent_id"))
_AGENT_NAMES = sa.select(agents.c.id, agents.c.name).where(
    agents.c.workspace_id == sa.bindparam("workspace_id")
)


def _agent_row(conn: Connection, agent_id: str) -> Row:
    row = first_row(conn, _AGENT_BY_ID, {"agent_id": agent_id})
    if row is None:
        raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
    return row


def _name_taken(conn: Connection, workspace_id: str, name: str, *, other_than: str = "") -> bool:
    query = sa.select(agents.c.id).where(
        agents.c.workspace_id == workspace_id, agents.c.name == name, agents.c.id != other_than
    )
    return conn.execute(query).first() is not None


def _conflict_message(name: str) -> str:
    return f"an agent named {name!r} already exists in this workspace"


class AgentMethods:
    """Agent methods of :class:`~office_scheduler.store.office.OfficeStore`."""

    _db: Database

    def create_agent(
        self,
        *,
        workspace_id: str,
        name: str,
        role: AgentRole,
        now: datetime,
        instructions: str = "",
        max_concurrent_sessions: int = 1,
        cooldown: timedelta = timedelta(seconds=10),
        skip_idle_wakeups: bool | None = None,
        executor: str | None = None,
        status: AgentStatus = AgentStatus.IDLE,
        reports_to: str | None = None,
        permission_policy: dict[str, Any] | None = None,
        expected_run_cents: int | None = None,
    ) -> Agent:
        """Create an agent in a workspace.

        Args:
            workspace_id: the agent's workspace.
            name: unique within the workspace.
            role: decides the default of ``skip_idle_wakeups``.
            now: creation instant.
            instructions: standing instructions added to every prompt.
            max_concurrent_sessions: live sessions allowed at once (>= 1).
            cooldown: pause between the end of one run and the next claim (>= 0).
            skip_idle_wakeups: ``None`` takes the role's default.
            executor: preferred executor name.
            status: initial status.
            reports_to: the agent it reports to (same workspace).
            permission_policy: ``{"mode": ..., "tools": [...]}`` or ``None``.
            expected_run_cents: what one run is expected to cost, in cents, for the budget
                pre-launch check (``None``: the median of its recent priced runs).

        Returns:
            The new agent.

        Raises:
            NotFoundError: no such workspace (field ``workspace_id``).
            InvalidInputError: ``name``, ``role``, ``status``, ``max_concurrent_sessions``,
                ``cooldown_s``, ``reports_to`` or ``permission_policy`` is invalid (named in
                ``field``).
            ConflictError: the workspace has an agent of that name (field ``name``).
        """
        agent_role = _role(role)
        policy = _policy(permission_policy)
        values: dict[str, Any] = {
            "name": clean_text(name, field="name"),
            "role": agent_role.value,
            "status": _status(status).value,
            "instructions": clean_text(instructions, field="instructions", required=False),
            "max_concurrent_sessions": _max_sessions(max_concurrent_sessions),
            "cooldown_s": _cooldown_s(cooldown),
            "skip_idle_wakeups": (
                agent_role.default_skip_idle_wakeups
                if skip_idle_wakeups is None
                else flag(skip_idle_wakeups, field="skip_idle_wakeups")
            ),
            "executor": optional_text(executor, field="executor"),
            "expected_run_cents": expected_cents(expected_run_cents),
        }
        agent_id = new_id()
        message = _conflict_message(values["name"])
        with unique_conflict(field="name", message=message), self._db.write() as conn:
            workspace_row(conn, workspace_id)
            if _name_taken(conn, workspace_id, values["name"]):
                raise ConflictError(message, field="name")
            values["reports_to"] = check_reports_to(
                conn, agent_id=None, workspace_id=workspace_id, reports_to=reports_to
            )
            conn.execute(
                sa.insert(agents).values(
                    id=agent_id,
                    workspace_id=workspace_id,
                    created_at=now,
                    updated_at=now,
                    permission_policy=policy,
                    **values,
                )
            )
            if agent_role.is_coordinator:
                install_heartbeat(conn, workspace_id=workspace_id, agent_id=agent_id, now=now)
            return agent_from_row(_agent_row(conn, agent_id))

    def get_agent(self, agent_id: str) -> Agent:
        """Return the agent ``agent_id``.

        Raises:
            NotFoundError: no such agent (field ``agent_id``).
        """
        with self._db.read() as conn:
            return agent_from_row(_agent_row(conn, agent_id))

    def agent_ids_in(self, workspace_id: str, agent_ids: Collection[str]) -> set[str]:
        """Which of ``agent_ids`` are agents of ``workspace_id`` (one query)."""
        with self._db.read() as conn:
            return ids_in_workspace(conn, agents, workspace_id, agent_ids)

    def find_agent(self, agent_id: str) -> Agent | None:
        """Return the agent ``agent_id``, or ``None``."""
        with self._db.read() as conn:
            row = first_row(conn, _AGENT_BY_ID, {"agent_id": agent_id})
            return None if row is None else agent_from_row(row)

    def find_agent_by_name(self, workspace_id: str, name: str) -> Agent | None:
        """Return the agent called ``name`` in ``workspace_id``, or ``None``."""
        query = sa.select(agents).where(
            agents.c.workspace_id == workspace_id, agents.c.name == name
        )
        with self._db.read() as conn:
            row = first_row(conn, query)
            return None if row is None else agent_from_row(row)

    def list_agents(self, workspace_id: str) -> list[Agent]:
        """Return the agents of ``workspace_id``, ordered by name (empty for no workspace)."""
        query = (
            sa.select(agents).where(agents.c.workspace_id == workspace_id).order_by(agents.c.name)
        )
        with self._db.read() as conn:
            return [agent_from_row(row) for row in all_rows(conn, query)]

    def agent_names(self, workspace_id: str, only: Collection[str] | None = None) -> dict[str, str]:
        """Agent id → name for ``workspace_id`` (two columns: prompts name agents by it).

        ``only``: the ids wanted (others, and ids of no agent, are left out); ``None`` for
        every agent of the workspace.
        """
        query = _AGENT_NAMES
        if only is not None:
            if not only:
                return {}
            query = query.where(agents.c.id.in_(sorted(only)))
        with self._db.read() as conn:
            found = conn.execute(query, {"workspace_id": workspace_id})
            return {agent_id: name for agent_id, name in found}

    def update_agent(self, agent_id: str, *, now: datetime, **changes: object) -> Agent:
        """Change an agent.

        Allowed keys: ``name``, ``role``, ``status``, ``instructions``,
        ``max_concurrent_sessions``, ``cooldown`` (a timedelta), ``skip_idle_wakeups``
        (``None`` resets it to the role's default), ``executor``, ``reports_to`` (``None``
        clears it), ``permission_policy`` (``None`` clears it), ``expected_run_cents``
        (``None`` clears it), ``paused_reason`` and ``imported_status`` (the status a config
        import set, see :func:`~office_scheduler.files.sync.plan_import`). A new
        cooldown also moves the agent's ``cooldown_until`` to ``last_wakeup_finished_at +
        cooldown``; a status of ``idle`` or ``working`` clears ``paused_reason`` unless one
        is given. A role change into or out of the coordinator roles installs, resumes or
        pauses the agent's heartbeat (see
        :func:`~office_scheduler.store.routines.heartbeat_follows_role`).

        Returns:
            The agent after the change.

        Raises:
            NotFoundError: no such agent (field ``agent_id``).
            InvalidInputError: an unknown key or invalid value (``field`` names it; a bad
                cooldown is reported as ``cooldown_s``), including a ``reports_to`` that is
                the agent itself, outside its workspace or closes a cycle.
            ConflictError: another agent of the workspace has the new name (field ``name``).
        """
        values = _checked_changes(changes)
        message = _conflict_message(str(values.get("name", "")))
        with unique_conflict(field="name", message=message), self._db.write() as conn:
            # Locked: two role changes at once must see each other's role (the heartbeat).
            row = lock_agent(conn, agent_id)
            _apply_changes(conn, row, changes, values, now=now)
            return agent_from_row(_agent_row(conn, agent_id))

    def change_agent_status(
        self,
        agent_id: str,
        status: AgentStatus,
        *,
        now: datetime,
        paused_reason: str | None = None,
        settings: dict[str, object] | None = None,
    ) -> tuple[Agent, list[Run]]:
        """Pause, resume or stop an agent (one transaction, the agent row locked).

        ``settings`` (the keys of :meth:`update_agent` but ``status`` and
        ``paused_reason``) are applied in the same transaction, before the status change.

        * ``paused``: ``paused_reason`` is set (default ``manual``; an agent already paused
          keeps its reason, so a budget pause is not turned into a manual one); queued runs
          wait in the queue (they are not claimed) and a run already claimed finishes with
          reason ``agent_paused`` in the pipeline's agent guard.
        * ``idle`` (resume): ``paused_reason`` is cleared; waiting runs become claimable.
        * ``stopped``: queued runs and scheduled retries are cancelled with reason
          ``agent_paused`` (returned, so the caller can publish their ends);
          ``paused_reason`` is kept (a budget pause still needs the budget check).

        Returns:
            The agent after the change and the runs the change ended.

        Raises:
            NotFoundError: no such agent (field ``agent_id``).
            InvalidInputError: a status other than ``paused``, ``idle`` or ``stopped``, or a
                bad ``paused_reason``.
        """
        wanted = _status(status)
        if wanted not in (AgentStatus.PAUSED, AgentStatus.IDLE, AgentStatus.STOPPED):
            raise InvalidInputError(
                "status must be paused, idle (resume) or stopped", field="status"
            )
        given = _paused_reason(paused_reason)
        settings = dict(settings or {})
        for key in ("status", "paused_reason"):
            if key in settings:
                raise InvalidInputError(f"{key} is set by the status change", field=key)
        values = _checked_changes(settings)
        message = _conflict_message(str(values.get("name", "")))
        with unique_conflict(field="name", message=message), self._db.write() as conn:
            row = lock_agent(conn, agent_id)
            if settings:
                _apply_changes(conn, row, settings, values, now=now)
            kept = row["paused_reason"]
            reason: str | None = None
            if wanted is AgentStatus.PAUSED:
                reason = kept if row["status"] == AgentStatus.PAUSED.value and kept else None
                reason = reason or given or MANUAL_PAUSE
            elif wanted is AgentStatus.STOPPED:
                reason = kept
            conn.execute(
                sa.update(agents)
                .where(agents.c.id == agent_id)
                .values(status=wanted.value, paused_reason=reason, updated_at=now)
            )
            ended = (
                end_pending_runs(conn, agent_id, now=now) if wanted is AgentStatus.STOPPED else []
            )
            if wanted is AgentStatus.IDLE:
                notify_wake(conn, self._db.schema)  # its waiting runs are claimable again
            return agent_from_row(_agent_row(conn, agent_id)), ended


def _checked_changes(changes: dict[str, object]) -> dict[str, Any]:
    """Refuse unknown keys, then validate what needs no database (:func:`_changed_values`)."""
    unknown = sorted(set(changes) - _AGENT_CHANGES)
    if unknown:
        raise InvalidInputError(f"unknown agent field {unknown[0]!r}", field=unknown[0])
    return _changed_values(changes)


def _apply_changes(
    conn: Connection,
    row: Row,
    changes: dict[str, object],
    values: dict[str, Any],
    *,
    now: datetime,
) -> None:
    """Write checked agent ``values`` (from ``changes``) inside the caller's transaction.

    Raises:
        ConflictError: the new name is taken in the workspace (field ``name``).
        InvalidInputError: a bad ``reports_to``.
    """
    agent_id = row["id"]
    if "name" in values and _name_taken(
        conn, row["workspace_id"], values["name"], other_than=agent_id
    ):
        raise ConflictError(_conflict_message(values["name"]), field="name")
    if "reports_to" in changes:
        values["reports_to"] = check_reports_to(
            conn,
            agent_id=agent_id,
            workspace_id=row["workspace_id"],
            reports_to=changes["reports_to"],
        )
    if "skip_idle_wakeups" in changes and changes["skip_idle_wakeups"] is None:
        role = AgentRole(str(values.get("role", row["role"])))
        values["skip_idle_wakeups"] = role.default_skip_idle_wakeups
    if "cooldown_s" in values:
        finished = row["last_wakeup_finished_at"]
        values["cooldown_until"] = (
            None if finished is None else finished + timedelta(seconds=values["cooldown_s"])
        )
    conn.execute(sa.update(agents).where(agents.c.id == agent_id).values(updated_at=now, **values))
    if "role" in values:
        was, becomes = AgentRole(row["role"]), AgentRole(values["role"])
        if was.is_coordinator != becomes.is_coordinator:
            heartbeat_follows_role(
                conn,
                workspace_id=row["workspace_id"],
                agent_id=agent_id,
                coordinator=becomes.is_coordinator,
                now=now,
            )


def _changed_values(changes: dict[str, object]) -> dict[str, Any]:
    """Validate the changes that need no database (all but ``reports_to``)."""
    values: dict[str, Any] = {}
    if "name" in changes:
        values["name"] = clean_text(changes["name"], field="name")
    if "role" in changes:
        values["role"] = _role(changes["role"]).value
    if "status" in changes:
        status = _status(changes["status"])
        values["status"] = status.value
        if status in _RUNNING_STATUSES:
            values["paused_reason"] = None
    if "paused_reason" in changes:
        values["paused_reason"] = _paused_reason(changes["paused_reason"])
    if "imported_status" in changes:
        values["imported_status"] = _status(changes["imported_status"]).value
    if "instructions" in changes:
        values["instructions"] = clean_text(
            changes["instructions"], field="instructions", required=False
        )
    if "max_concurrent_sessions" in changes:
        values["max_concurrent_sessions"] = _max_sessions(changes["max_concurrent_sessions"])
    if "cooldown" in changes:
        values["cooldown_s"] = _cooldown_s(changes["cooldown"])
    if "executor" in changes:
        values["executor"] = optional_text(changes["executor"], field="executor")
    if "permission_policy" in changes:
        values["permission_policy"] = _policy(changes["permission_policy"])
    if "expected_run_cents" in changes:
        values["expected_run_cents"] = expected_cents(changes["expected_run_cents"])
    skip = changes.get("skip_idle_wakeups")
    if skip is not None:
        values["skip_idle_wakeups"] = flag(skip, field="skip_idle_wakeups")
    return values
