"""What a held wake leaves for people: its ``wake_held`` activity entry and inbox item.

One open inbox item per agent and limit (DESIGN §15): the first held wake opens it, later
ones add to its count and refresh its chain, so a loop that keeps trying fills no inbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from office_scheduler.domain.models import InboxItem, WakeupRequest
from office_scheduler.domain.status import InboxKind, InboxStatus
from office_scheduler.store.activity import activity_values, insert_activity
from office_scheduler.store.engine import Database
from office_scheduler.store.inbox import inbox_values, insert_inbox_item
from office_scheduler.store.rows import inbox_from_row
from office_scheduler.store.schema import agents, inbox_items
from office_scheduler.store.sql import all_rows, first_row


def _chain_text(chain: Sequence[dict[str, Any]], names: dict[str, str]) -> str:
    return " ← ".join(
        f"run {link['run_id']} ({names.get(link['agent_id'], link['agent_id'])}, "
        f"depth {link['depth']})"
        for link in chain
    )


class HeldWakeNotes:
    """Writes the traces of held wakes, inside the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(
        self,
        request: WakeupRequest,
        *,
        detail: str,
        chain: Sequence[dict[str, Any]],
        now: datetime,
    ) -> InboxItem:
        """Log ``wake_held`` and open (or add to) the agent's inbox item for the limit.

        Args:
            request: the held request (``status_reason`` is the limit).
            detail: why, in words (``depth 13 is past max_causation_depth 12``).
            chain: the runs that led to the wake, newest first (``run_id``, ``agent_id``,
                ``depth``).
            now: aware UTC.

        Returns:
            The open inbox item of the agent and limit.
        """
        reason = request.status_reason or ""
        with self._db.write() as conn:
            ids = {request.agent_id, *(link["agent_id"] for link in chain)}
            names = {
                row["id"]: row["name"]
                for row in all_rows(
                    conn, sa.select(agents.c.id, agents.c.name).where(agents.c.id.in_(sorted(ids)))
                )
            }
            agent_name = names.get(request.agent_id, request.agent_id)
            chain_text = _chain_text(chain, names)
            insert_activity(
                conn,
                activity_values(
                    workspace_id=request.workspace_id,
                    kind="wake_held",
                    message=(
                        f"{request.source.value} wake of {agent_name} held ({reason}): {detail}"
                    ),
                    now=now,
                    agent_id=request.agent_id,
                    task_id=request.task_id,
                    run_id=request.caused_by_run_id,
                    data={
                        "wakeup_id": request.id,
                        "reason": reason,
                        "source": request.source.value,
                        "causation_depth": request.causation_depth,
                        "caused_by_run_id": request.caused_by_run_id,
                        "chain": list(chain),
                    },
                ),
            )
            open_items = all_rows(
                conn,
                sa.select(inbox_items).where(
                    inbox_items.c.workspace_id == request.workspace_id,
                    inbox_items.c.status == InboxStatus.OPEN.value,
                    inbox_items.c.kind == InboxKind.WAKE_HELD.value,
                    inbox_items.c.agent_id == request.agent_id,
                ),
            )
            for row in open_items:
                data = dict(row["data"] or {})
                if data.get("reason") != reason:
                    continue
                data.update(
                    held_count=int(data.get("held_count", 0)) + 1,
                    last_wakeup_id=request.id,
                    chain=list(chain),
                    detail=detail,
                )
                conn.execute(
                    sa.update(inbox_items)
                    .where(inbox_items.c.id == row["id"])
                    .values(data=data, body=self._body(agent_name, reason, detail, chain_text))
                )
                updated = first_row(
                    conn, sa.select(inbox_items).where(inbox_items.c.id == row["id"])
                )
                assert updated is not None
                return inbox_from_row(updated)
            values = inbox_values(
                workspace_id=request.workspace_id,
                kind=InboxKind.WAKE_HELD,
                title=f"Wakes of {agent_name} held: {reason}",
                now=now,
                body=self._body(agent_name, reason, detail, chain_text),
                data={
                    "reason": reason,
                    "held_count": 1,
                    "first_wakeup_id": request.id,
                    "last_wakeup_id": request.id,
                    "chain": list(chain),
                    "detail": detail,
                },
                agent_id=request.agent_id,
                task_id=request.task_id,
                dedupe_key=f"wake_held:{request.agent_id}:{reason}:{request.id}",
            )
            return insert_inbox_item(conn, values)

    @staticmethod
    def _body(agent_name: str, reason: str, detail: str, chain_text: str) -> str:
        lines = [
            f"A runaway limit ({reason}) held wakes of {agent_name}: {detail}.",
            "Nothing was lost: the held wakes wait until a person releases them "
            "(Release here, `office wakeups release ID…`, or "
            "POST /api/v1/inbox/{item_id}/release); a release starts a new chain at depth 0.",
        ]
        if chain_text:
            lines.append(f"Chain that led here (newest first): {chain_text}")
        return "\n\n".join(lines)
