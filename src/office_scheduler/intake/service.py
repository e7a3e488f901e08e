"""``enqueue_wakeup``: the single entry point of every wake (DESIGN §5)."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from office_scheduler.clock import Clock
from office_scheduler.domain.errors import (
    BusyError,
    IdempotencyKeyReusedError,
    InvalidInputError,
    NotFoundError,
    OfficeError,
)
from office_scheduler.domain.events import Event, WakeupReceived
from office_scheduler.domain.models import WakeRequest
from office_scheduler.domain.status import IntakeOutcome
from office_scheduler.intake import causation
from office_scheduler.intake.group import BUSY, GroupCommit, Outcome
from office_scheduler.intake.limits import RunawayLimiter
from office_scheduler.intake.rules import EXPLICIT_SOURCES, decide_merge, not_the_assignee
from office_scheduler.store.engine import is_deadlock
from office_scheduler.store.facade import Store
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.reconnect import retry_if_connection_lost
from office_scheduler.store.shared_writes import SharedWrites

log = structlog.get_logger(__name__)

ZERO = timedelta(0)

MAX_PAYLOAD_BYTES = 256 * 1024
#: Longest stored idempotency key: a caller's key (at most 500 characters at the API) with
#: its scope in front (``user:<agent id>:``, 38 characters).
MAX_KEY_CHARS = 600
#: A batch PostgreSQL rolled back to break a deadlock is sent again, at most this often.
_DEADLOCK_ATTEMPTS = 3
#: Most wakes one batch may carry for one agent. Each merges into the same run, and the
#: agent stays locked until the batch commits.
MAX_BATCH_WAKES_PER_AGENT = 50
#: How long a wake waits for its agent while another transaction holds it (seconds), as
#: long as a statement may run (``OFFICE_DB_STATEMENT_TIMEOUT_S``' default).
BUSY_AGENT_WAIT_S = 30.0
#: Most concurrent wakes :meth:`Intake.enqueue` commits together. The write lock (SQLite)
#: or the agents' row locks (PostgreSQL) are held until the group commits.
GROUP_COMMIT_MAX = 64


def validate_request(request: WakeRequest) -> None:
    """Check a wake request before anything is written.

    Raises:
        InvalidInputError: the payload is not a JSON object, is larger than 256 KiB as
            JSON, or the idempotency key is empty or longer than :data:`MAX_KEY_CHARS`.
    """
    if not isinstance(request.payload, dict):
        raise InvalidInputError("payload must be a JSON object", field="payload")
    try:
        encoded = json.dumps(request.payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"payload is not valid JSON: {exc}", field="payload") from None
    except RecursionError:
        raise InvalidInputError("payload is nested too deeply", field="payload") from None
    if len(encoded.encode()) > MAX_PAYLOAD_BYTES:
        raise InvalidInputError("payload is larger than 256 KiB", field="payload")
    key: object = request.idempotency_key
    if key is not None and (
        not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS
    ):
        raise InvalidInputError(
            f"idempotency_key must be a non-empty string of at most {MAX_KEY_CHARS} characters",
            field="idempotency_key",
        )


def for_wake(exc: OfficeError, index: int) -> OfficeError:
    """``exc`` re-aimed at wake ``index`` of a batch (field ``wakes.<index>.…``)."""
    exc.field = f"wakes.{index}" + (f".{exc.field}" if exc.field else "")
    exc.message = f"wake {index}: {exc.message}"
    exc.args = (exc.message,)
    return exc


Publish = Callable[[Event], Awaitable[None]]


def _agent_stayed_busy(request: WakeRequest) -> BusyError:
    return BusyError(
        f"agent {request.agent_id} stayed locked by other work: nothing was written; "
        "send the wake again"
    )


class Poke(Protocol):
    """The runs loop's ``poke``: look at the queue now (``at=None``) or no later than ``at``."""

    def __call__(self, at: datetime | None = None) -> None:
        """Poke (``at`` aware UTC)."""


class Intake:
    """Persists wakes, merges them into in-flight runs, and pokes the runs loop.

    Args:
        store: the database.
        clock: time source for ``requested_at`` and the coalescing hold.
        poke: called after every wake that created or joined a run, with the instant the
            run may first be claimed (``None``: now), so the runs loop looks at the queue
            then instead of at its next safety tick.
        publish: receives a :class:`WakeupReceived` event per request.
    """

    def __init__(self, store: Store, clock: Clock, *, poke: Poke, publish: Publish) -> None:
        self._store = store
        self._clock = clock
        self._poke = poke
        self._publish = publish
        self._closed = False
        self._limits = RunawayLimiter(store)
        self._group: GroupCommit[WakeRequest, IntakeResult] = GroupCommit(
            self.persist_group,
            key=lambda request: request.agent_id,
            max_batch=GROUP_COMMIT_MAX,
            give_up_after_s=BUSY_AGENT_WAIT_S,
            gave_up=_agent_stayed_busy,
        )

    @retry_if_connection_lost
    async def enqueue(self, request: WakeRequest) -> IntakeResult:
        """Persist ``request`` and create or join a run, then announce it.

        Wakes enqueued concurrently (HTTP requests, event subscribers, retries) are
        committed together, up to :data:`GROUP_COMMIT_MAX` per transaction (see
        :meth:`persist_group`); a lone wake is one transaction of its own. Each wake's
        outcome and errors are its own, as if it had been committed alone.

        A connection lost under the call is retried once on a new one (see
        :mod:`office_scheduler.store.reconnect`).

        A duplicate idempotency key is silently rejected: the original request comes back
        with outcome ``deduplicated`` and nothing changes.

        Raises:
            NotFoundError: the agent or workspace does not exist.
            InvalidInputError: see :func:`validate_request`.
            IdempotencyKeyReusedError: the key came with another request's fingerprint
                (``request.fingerprint``); nothing was written.
            BusyError: another transaction held the agent for :data:`BUSY_AGENT_WAIT_S`,
                or the service is closing; nothing was written.
        """
        if self._closed:
            raise BusyError("the office service is shutting down: nothing was written")
        request = causation.stamp(request)
        result = await self._group.submit(request)
        await self.announce(request, result)
        return result

    def persist_group(self, requests: Sequence[WakeRequest]) -> list[Outcome[IntakeResult]]:
        """Blocking: persist independent wakes in one transaction; outcomes their own.

        Returns, in the order of ``requests``, each wake's result, the error that rejected
        it, or :data:`~office_scheduler.intake.group.BUSY` when another transaction holds
        its agent (the group never waits for a lock: it locks the agents it can, on
        PostgreSQL in id order with ``SKIP LOCKED``; the wake is tried again later).
        Wakes are written in the order given. If the group's transaction fails otherwise
        (a lost connection, a full disk), nothing of it is kept and each wake is written
        again in a transaction of its own, so each gets the outcome it would have had
        alone; once one of an agent's wakes is busy there, its later ones are too.
        """
        outcomes: dict[int, Outcome[IntakeResult]] = {}
        valid: list[int] = []
        for index, request in enumerate(requests):
            try:
                validate_request(request)
                valid.append(index)
            except Exception as exc:
                outcomes[index] = exc
        try:
            with self._store.db.transaction():
                outcomes.update(self._write_group(requests, valid))
        except Exception as exc:
            if len(valid) == 1:
                outcomes[valid[0]] = exc
            else:
                log.info("wake_group_rolled_back", wakes=len(valid), error=str(exc))
                outcomes.update(self._write_one_by_one(requests, valid))
        return [outcomes[index] for index in range(len(requests))]

    def _write_one_by_one(
        self, requests: Sequence[WakeRequest], indexes: Sequence[int]
    ) -> dict[int, Outcome[IntakeResult]]:
        outcomes: dict[int, Outcome[IntakeResult]] = {}
        busy: set[str] = set()
        for index in indexes:
            agent_id = requests[index].agent_id
            if agent_id in busy:  # an agent's wakes keep their order
                outcomes[index] = BUSY
                continue
            try:
                with self._store.db.transaction():
                    outcomes.update(self._write_group(requests, [index]))
            except Exception as exc:
                outcomes[index] = exc
            if outcomes[index] is BUSY:
                busy.add(agent_id)
        return outcomes

    def _write_group(
        self, requests: Sequence[WakeRequest], indexes: Sequence[int]
    ) -> dict[int, Outcome[IntakeResult]]:
        """Inside the caller's transaction: lock what can be locked, write those wakes.

        Their queue-head refreshes, activity entries and notifications are written once for
        the group, at its end (:class:`~office_scheduler.store.shared_writes.SharedWrites`).
        """
        agent_ids = {requests[index].agent_id for index in indexes}
        shared = SharedWrites()
        windows: dict[str, timedelta] = {}
        queue = self._store.queue
        mine = queue.lock_free_agents(agent_ids)
        others = (
            queue.agent_workspaces(agent_ids - mine.keys()) if len(mine) < len(agent_ids) else {}
        )
        written: dict[int, Outcome[IntakeResult]] = {}
        for index in indexes:
            request = requests[index]
            row = mine.get(request.agent_id)
            workspace = row["workspace_id"] if row is not None else others.get(request.agent_id)
            if workspace is None:
                written[index] = NotFoundError(
                    f"agent {request.agent_id} not found", field="agent_id"
                )
            elif workspace != request.workspace_id:
                written[index] = NotFoundError(
                    f"agent {request.agent_id} not found in workspace {request.workspace_id}",
                    field="agent_id",
                )
            elif row is None:
                written[index] = BUSY  # another transaction holds the agent
            else:
                try:
                    written[index] = self._persist_valid(request, windows, row, shared)
                except IdempotencyKeyReusedError as exc:
                    written[index] = exc  # refused before writing: the group goes on
        queue.write_shared(shared)
        return written

    async def close(self) -> None:
        """Finish the wakes being written before the database is closed; refuse new ones.

        Wakes still waiting for a busy agent, and wakes enqueued afterwards, fail with
        :class:`BusyError`.
        """
        self._closed = True
        await self._group.close()

    def persist(self, request: WakeRequest, *, window: timedelta | None = None) -> IntakeResult:
        """The database half of :meth:`enqueue`, blocking; call it from a worker thread.

        Inside :meth:`~office_scheduler.store.engine.Database.transaction` it joins the
        caller's transaction, so a caller can make a wake part of a larger write (a cron
        tick's claim and dispatch). Pass the result to :meth:`announce` once committed.
        ``window``: the workspace's coalescing hold, when the caller read it in that
        transaction (else it is read here).

        Raises:
            NotFoundError: the agent or workspace does not exist.
            InvalidInputError: see :func:`validate_request`.
        """
        validate_request(request)
        windows = {} if window is None else {request.workspace_id: window}
        return self._persist_valid(causation.stamp(request), windows)

    def _persist_valid(
        self,
        request: WakeRequest,
        windows: dict[str, timedelta] | None = None,
        locked: Mapping[Any, Any] | None = None,
        shared: SharedWrites | None = None,
    ) -> IntakeResult:
        # One transaction for the settings read and the writes (one pooled connection); a
        # wake without a hold (user wakes, fire now) needs no settings read. ``windows``
        # keeps the coalescing windows read within one enclosing transaction; ``locked``
        # is the agent's row when the enclosing transaction already locked it.
        with self._store.db.transaction():
            hold = self._hold(request, {} if windows is None else windows)
            now = self._clock.now()
            verdict = self._limits.judge(request, now=now)  # runaway limits (DESIGN §15)
            result = self._store.queue.enqueue(
                request,
                now=now,
                hold=hold,
                decide=decide_merge,
                locked=locked,
                shared=shared,
                causation=verdict.causation,
                held=verdict.reason,
            )
            self._limits.after(request, verdict, result, now=now)
            return result

    def _hold(self, request: WakeRequest, windows: dict[str, timedelta]) -> timedelta:
        if not request.hold:
            return ZERO
        window = windows.get(request.workspace_id)
        if window is None:
            window = windows[request.workspace_id] = self._store.office.coalesce_window(
                request.workspace_id
            )
        return window

    @retry_if_connection_lost
    async def enqueue_many(self, requests: Sequence[WakeRequest]) -> list[IntakeResult]:
        """Persist several wakes in one transaction (all or nothing), then announce each.

        One commit for the batch instead of one per wake. Results come back in the order
        of ``requests``; within the batch, later wakes for an agent merge into the run an
        earlier one created, exactly as separate calls would.

        A batch PostgreSQL rolls back to break a deadlock (it holds many agents' locks at
        once) is run again after a short pause, up to three times in all.

        Raises:
            InvalidInputError, NotFoundError: see :meth:`check_batch` (checked before
                anything is written); nothing of the batch is written.
            BusyError: PostgreSQL broke a deadlock three times; nothing was written.
        """
        requests = [causation.stamp(request) for request in requests]
        await asyncio.to_thread(self.check_batch, requests)
        results = await self._persist_many_retrying_deadlocks(requests)
        for request, result in zip(requests, results, strict=True):
            await self.announce(request, result)
        return results

    async def _persist_many_retrying_deadlocks(
        self, requests: Sequence[WakeRequest]
    ) -> list[IntakeResult]:
        attempt = 1
        while True:
            try:
                return await asyncio.to_thread(self.persist_many, requests)
            except Exception as exc:
                if not is_deadlock(exc):
                    raise
                if attempt == _DEADLOCK_ATTEMPTS:
                    raise BusyError(
                        "the batch met concurrent work three times and nothing was written: "
                        "send it again"
                    ) from exc
            log.warning("wake_batch_deadlock_retrying", attempt=attempt, wakes=len(requests))
            await asyncio.sleep(0.05 * attempt * random.uniform(0.5, 1.5))
            attempt += 1

    def check_batch(self, requests: Sequence[WakeRequest]) -> None:
        """Check a batch before anything is written; blocking (two reads per workspace).

        Wake by wake, in the order sent, so an error names the first bad wake.

        Raises:
            InvalidInputError: more than :data:`MAX_BATCH_WAKES_PER_AGENT` wakes for one
                agent (field ``wakes``), or a wake failing :func:`validate_request`
                (field ``wakes.<i>.<field>``).
            NotFoundError: a wake's agent or task is not in its workspace (field
                ``wakes.<i>.agent_id`` or ``wakes.<i>.task_id``).
            InvalidInputError: a user or self wake about a task names an agent that is not
                the task's assignee (field ``wakes.<i>.task_id``; see
                :func:`~office_scheduler.intake.rules.not_the_assignee`).
        """
        if not requests:
            return
        agent_id, most = Counter(r.agent_id for r in requests).most_common(1)[0]
        if most > MAX_BATCH_WAKES_PER_AGENT:
            raise InvalidInputError(
                f"at most {MAX_BATCH_WAKES_PER_AGENT} wakes per agent in one batch "
                f"({most} for agent {agent_id}): send them in several batches",
                field="wakes",
            )
        office = self._store.office
        present: set[tuple[str, str, str]] = set()  # (workspace, kind, id)
        assignees: dict[tuple[str, str], str | None] = {}  # (workspace, task) → agent
        with self._store.db.snapshot():
            for workspace_id in {r.workspace_id for r in requests}:
                mine = [r for r in requests if r.workspace_id == workspace_id]
                agents = office.agent_ids_in(workspace_id, {r.agent_id for r in mine})
                tasks = office.task_assignees_in(
                    workspace_id, {r.task_id for r in mine if r.task_id}
                )
                assignees |= {(workspace_id, task): agent for task, agent in tasks.items()}
                present |= {(workspace_id, "agent", agent) for agent in agents}
                present |= {(workspace_id, "task", task) for task in tasks}
        for index, request in enumerate(requests):
            try:
                validate_request(request)
            except InvalidInputError as exc:
                raise for_wake(exc, index) from None
            for kind, entity_id in (("agent", request.agent_id), ("task", request.task_id)):
                if entity_id is not None and (request.workspace_id, kind, entity_id) not in present:
                    raise NotFoundError(
                        f"wake {index}: {kind} {entity_id} not found",
                        field=f"wakes.{index}.{kind}_id",
                    )
            if request.task_id is not None and request.source in EXPLICIT_SOURCES:
                assignee = assignees[(request.workspace_id, request.task_id)]
                if assignee != request.agent_id:
                    raise InvalidInputError(
                        f"wake {index}: "
                        + not_the_assignee(
                            request.task_id,
                            None if assignee is None else f"agent {assignee}",
                            f"agent {request.agent_id}",
                        ),
                        field=f"wakes.{index}.task_id",
                    )

    def persist_many(self, requests: Sequence[WakeRequest]) -> list[IntakeResult]:
        """The database half of :meth:`enqueue_many`, blocking; call it from a worker thread.

        ``requests`` must have passed :meth:`check_batch`.

        Agents are locked in the order of their ids, whatever the order of ``requests``, so
        two batches over the same agents cannot deadlock on PostgreSQL. Their queue-head
        refreshes, activity entries and notifications are written once for the batch
        (:class:`~office_scheduler.store.shared_writes.SharedWrites`).
        """
        by_agent = sorted(range(len(requests)), key=lambda index: requests[index].agent_id)
        results: dict[int, IntakeResult] = {}
        windows: dict[str, timedelta] = {}
        shared = SharedWrites()
        with self._store.db.transaction():
            for index in by_agent:
                try:
                    results[index] = self._persist_valid(requests[index], windows, shared=shared)
                except OfficeError as exc:
                    raise for_wake(exc, index) from None
            self._store.queue.write_shared(shared)
        return [results[index] for index in range(len(requests))]

    async def announce(self, request: WakeRequest, result: IntakeResult) -> None:
        """After :meth:`persist` committed: log the outcome, poke the runs loop, publish.

        Never call it for a transaction that rolled back: subscribers would hear of a wake
        that does not exist.
        """
        log.info(
            "wakeup_" + result.outcome.value,
            wakeup_id=result.request.id,
            agent_id=request.agent_id,
            source=request.source.value,
            task_id=request.task_id,
            run_id=result.run.id if result.run else None,
            idempotency_key=request.idempotency_key,
        )
        if result.outcome not in (IntakeOutcome.DEDUPLICATED, IntakeOutcome.HELD):
            self._poke(result.due)
        await self._publish(
            WakeupReceived(request=result.request, run=result.run, outcome=result.outcome)
        )
