"""Releasing held wakes: a person's action that enqueues each held wake once (DESIGN §15).

A release turns each named wake ``held`` → ``released`` (a compare-and-set) and, in the
same transaction, enqueues a new wake with the same agent, task, source and payload,
caused by a person (depth 0, so no runaway limit holds it) and keyed
``release:<wakeup id>``: a second release of the same wake, or two racing ones, enqueue
nothing more. The released request keeps its limit as ``status_reason`` and records the
run its successor made or joined.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import InvalidInputError, NotFoundError
from office_scheduler.domain.models import InboxItem, WakeRequest, WakeupRequest
from office_scheduler.domain.status import InboxKind, InboxStatus
from office_scheduler.intake.service import Intake
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult

#: Most wakes one release names.
MAX_RELEASE = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class Released:
    """What releasing one held wake did.

    Attributes:
        wakeup: the named request as it is now (``released``, or unchanged when it was
            not held).
        result: the intake result of its successor; ``None`` when it was not held (a
            wake already released, or never held), so nothing was enqueued.
    """

    wakeup: WakeupRequest
    result: IntakeResult | None


def _successor(request: WakeupRequest) -> WakeRequest:
    return WakeRequest(
        workspace_id=request.workspace_id,
        agent_id=request.agent_id,
        source=request.source,
        payload={**request.payload, "released_wakeup_id": request.id},
        task_id=request.task_id,
        classification=request.classification,
        idempotency_key=f"release:{request.id}",
        hold=False,
        by_person=True,
    )


class Releaser:
    """Releases held wakes, by id or by the inbox item that reported them."""

    def __init__(self, store: Store, intake: Intake, clock: Clock) -> None:
        self._store = store
        self._intake = intake
        self._clock = clock

    async def release(
        self, wakeup_ids: Sequence[int], *, workspace_id: str | None = None
    ) -> list[Released]:
        """Release the held wakes ``wakeup_ids``, in the order given.

        Args:
            wakeup_ids: 1 to :data:`MAX_RELEASE` wakeup request ids.
            workspace_id: when set, every wake must be of this workspace.

        Returns:
            One :class:`Released` per id (duplicates in ``wakeup_ids`` once).

        Raises:
            InvalidInputError: no id, or more than :data:`MAX_RELEASE` (field ``wakeup_ids``).
            NotFoundError: an id that is no wakeup request (of ``workspace_id``), field
                ``wakeup_ids``; nothing is released.
        """
        ids = list(dict.fromkeys(wakeup_ids))
        if not ids or len(ids) > MAX_RELEASE:
            raise InvalidInputError(f"name 1 to {MAX_RELEASE} wakeup ids", field="wakeup_ids")
        done = await asyncio.to_thread(self._release_blocking, ids, workspace_id)
        for released in done:
            if released.result is not None:
                await self._intake.announce(_successor(released.wakeup), released.result)
        return done

    def _release_blocking(self, ids: list[int], workspace_id: str | None) -> list[Released]:
        queue, runaway = self._store.queue, self._store.runaway
        with self._store.db.transaction():
            current = {}
            for wakeup_id in ids:
                try:
                    found = queue.get_wakeup(wakeup_id)
                except NotFoundError:
                    found = None
                if found is None or (
                    workspace_id is not None and found.workspace_id != workspace_id
                ):
                    raise NotFoundError(f"wakeup {wakeup_id} not found", field="wakeup_ids")
                current[wakeup_id] = found
            taken = {request.id: request for request in runaway.take_held(ids)}
            done: list[Released] = []
            for wakeup_id in ids:
                request = taken.get(wakeup_id)
                if request is None:
                    done.append(Released(wakeup=current[wakeup_id], result=None))
                    continue
                result = self._intake.persist(_successor(request))
                run_id = result.run.id if result.run is not None else None
                runaway.link_released(wakeup_id, run_id)
                request = queue.get_wakeup(wakeup_id)
                done.append(Released(wakeup=request, result=result))
            return done

    async def release_item(self, item_id: int) -> tuple[InboxItem, list[Released]]:
        """Release every wake still held for the agent and limit of a ``wake.held`` item.

        The item is resolved. Releasing it again enqueues nothing more (the wakes held
        since then are reported by a new item).

        Raises:
            NotFoundError: no such item (field ``item_id``).
            InvalidInputError: the item is not of kind ``wake.held`` (field ``item_id``).
        """
        store = self._store
        item = await asyncio.to_thread(store.runlog.get_inbox_item, item_id)
        if item.kind is not InboxKind.WAKE_HELD or item.agent_id is None:
            raise InvalidInputError(
                f"inbox item {item_id} reports no held wakes (kind {item.kind.value})",
                field="item_id",
            )
        held = await asyncio.to_thread(
            store.runaway.held_wakes,
            workspace_id=item.workspace_id,
            agent_id=item.agent_id,
            reason=str(item.data.get("reason", "")),
        )
        done = (
            await self.release([r.id for r in held], workspace_id=item.workspace_id) if held else []
        )
        if item.status is InboxStatus.OPEN:
            item = await asyncio.to_thread(
                store.runlog.resolve_inbox_item, item_id, now=self._clock.now()
            )
        return item, done
