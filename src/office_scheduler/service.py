"""Composition root: builds every part from :class:`Settings` and owns the loops' lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx
import sqlalchemy as sa
import structlog

from office_scheduler.agent_control import AgentControl
from office_scheduler.auth import TokenService
from office_scheduler.budgets import BudgetService
from office_scheduler.clock import Clock, SystemClock
from office_scheduler.config import Settings
from office_scheduler.domain.errors import (
    ConflictError,
    DatabaseLockedError,
    IdempotencyKeyReusedError,
    InvalidInputError,
    NotFoundError,
)
from office_scheduler.domain.events import RunEnded
from office_scheduler.domain.idempotency import fingerprint
from office_scheduler.domain.models import Agent, Run, Wake, WakeRequest
from office_scheduler.domain.status import LIVE_RUN_STATUSES, RunReason, RunStatus, WakeSource
from office_scheduler.events.activity import ActivitySubscribers
from office_scheduler.events.bus import EventBus
from office_scheduler.events.office import OfficeSubscribers
from office_scheduler.executors.base import Executor
from office_scheduler.intake.release import Releaser
from office_scheduler.intake.rules import not_the_assignee
from office_scheduler.intake.service import Intake, for_wake
from office_scheduler.metrics import WAITING_STATUSES, Metrics
from office_scheduler.notifications.service import NotificationService
from office_scheduler.office.service import OfficeService
from office_scheduler.pipeline.context import PipelineDeps, RunContext, Step, compose
from office_scheduler.pipeline.steps import DEFAULT_STEPS
from office_scheduler.routines.firing import CronFirer
from office_scheduler.routines.inbound import InboundWebhooks
from office_scheduler.routines.service import RoutineService
from office_scheduler.routines.subscribers import RoutineRunSubscribers
from office_scheduler.scheduler.cron import CronLoop
from office_scheduler.scheduler.leader import LeaderLoop
from office_scheduler.scheduler.listener import WakeListenerLoop
from office_scheduler.scheduler.maintenance import MaintenanceLoop
from office_scheduler.scheduler.notifications import NotificationLoop
from office_scheduler.scheduler.orphans import kill_orphans
from office_scheduler.scheduler.runs import RunsLoop, abandoned_attempt
from office_scheduler.store.engine import is_connection_lost, open_database
from office_scheduler.store.facade import Store
from office_scheduler.store.leadership import Leadership
from office_scheduler.store.notify import WakeListener, listens
from office_scheduler.store.queue import IntakeResult
from office_scheduler.store.reconnect import retry_if_connection_lost

log = structlog.get_logger(__name__)


def default_executors() -> dict[str, Executor]:
    """The executor implementations by kind (``command``, ``acp``)."""
    from office_scheduler.executors.acp import AcpExecutor
    from office_scheduler.executors.command import CommandExecutor

    return {"command": CommandExecutor(), "acp": AcpExecutor()}


#: Longest idempotency key a caller may choose (the API's limit too); the stored key has its
#: scope in front.
MAX_CALLER_KEY_CHARS = 500


def _wake_fingerprint(task_id: str | None, payload: Mapping[str, Any]) -> str:
    """Fingerprint of an explicit wake as its caller sent it (task and payload).

    Single and batch wakes share one key space and send the same shape, so a key sent
    through both with the same wake stays a duplicate.
    """
    return fingerprint({"task_id": task_id, "payload": payload})


def _with_user(payload: Mapping[str, Any], user_id: str | None) -> dict[str, Any]:
    """A user wake's payload: what the caller sent plus ``user_id``.

    Specification "Wakeup sources": a ``user`` wake carries ``{user_id, context?}``.
    """
    return {**payload, "user_id": user_id} if user_id is not None else dict(payload)


def _scoped_key(scope: str, key: str | None) -> str | None:
    """Prefix a caller-chosen idempotency key with its scope.

    Keys of different agents or workspaces then never collide, and a duplicate never
    returns another tenant's request.
    """
    if key is None:
        return None
    text: object = key
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_CALLER_KEY_CHARS:
        raise InvalidInputError(
            "idempotency_key must be a non-empty string of at most "
            f"{MAX_CALLER_KEY_CHARS} characters",
            field="idempotency_key",
        )
    return f"{scope}:{key}"


class Service:
    """The scheduler service: store, bus, intake, office operations, pipeline and loops.

    Use ``async with Service(settings) as svc`` (or ``start()``/``stop()``) to run the loops
    in the background, or call :meth:`run_until_idle` to process everything due now.

    Args:
        settings: process settings.
        clock: time source (a ``FakeClock`` in tests).
        executors: executor implementations by kind; default: :func:`default_executors`.
        store: an open store; default: opened from ``settings``.
        steps: pipeline steps; default: :data:`DEFAULT_STEPS`.
        notification_transport: the httpx transport outbound notifications use (tests pass
            a mock); default: the network.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        executors: Mapping[str, Executor] | None = None,
        store: Store | None = None,
        steps: tuple[Step, ...] = DEFAULT_STEPS,
        notification_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.store = store or Store.from_database(
            open_database(
                settings.resolved_database_url,
                pool_size=settings.db_pool_size,
                statement_timeout_ms=int(settings.db_statement_timeout.total_seconds() * 1000),
            )
        )
        self.leadership = Leadership(
            self.store.db, node_id=settings.node_id, clock=self.clock, ttl=settings.leader_ttl
        )
        self.bus = EventBus()
        # Metrics: the bus feeds the counters, the retry step (deps) the failure counters.
        self.metrics = Metrics()
        self.metrics.register(self.bus)
        self.metrics.set_sampler(self._metric_values)
        self.tokens = TokenService(self.store)
        self.runs = RunsLoop(
            store=self.store,
            clock=self.clock,
            settings=settings,
            process=self._process,
            shared=self.leadership.uses_lease,
        )
        self.intake = Intake(self.store, self.clock, poke=self.runs.poke, publish=self.bus.publish)
        self.releases = Releaser(self.store, self.intake, self.clock)
        self.office = OfficeService(self.store, self.clock, self.bus)
        self.agents = AgentControl(
            self.store, self.clock, publish=self.bus.publish, poke=self.runs.poke
        )
        self.approvals = self.office.approvals
        self.approvals.register(self.bus)
        OfficeSubscribers(self.store, self.intake).register(self.bus)
        ActivitySubscribers(self.store, self.clock).register(self.bus)
        self.routines = RoutineService(
            self.store, self.clock, intake=self.intake, publish=self.bus.publish
        )
        self.inbound = InboundWebhooks(
            self.store, self.clock, routines=self.routines, post_comment=self.office.add_comment
        )
        RoutineRunSubscribers(self.store, self.clock).register(self.bus)
        self.budgets = BudgetService(
            self.store, self.clock, enqueue=self.intake.enqueue, publish=self.bus.publish
        )
        self.cron_firer = CronFirer(self.store, self.clock, self.routines.dispatcher)
        self.cron = CronLoop(
            fire_due=self.cron_firer.fire_due,
            next_due_at=lambda: asyncio.to_thread(self.store.routines.next_due_at),
            clock=self.clock,
        )
        self.maintenance = MaintenanceLoop(
            store=self.store,
            clock=self.clock,
            settings=settings,
            alive=lambda: self.runs.inflight_run_ids,
            enqueue=self.intake.enqueue,
            publish=self.bus.publish,
            poke=self.runs.poke,
            leadership=self.leadership,
        )
        self.notifications = NotificationService(
            self.store,
            self.clock,
            node_id=settings.node_id,
            dashboard_url=settings.api_url,
            transport=notification_transport,
        )
        self.notifier = NotificationLoop(
            deliver_due=self.notifications.deliver_due,
            next_due_at=self.notifications.next_due_at,
            clock=self.clock,
        )
        self.leader: LeaderLoop | None = None
        if self.leadership.uses_lease:
            self.leader = LeaderLoop(
                leadership=self.leadership, settings=settings, on_taken=self.maintenance.poke
            )
        self.listener: WakeListenerLoop | None = None
        if listens(self.store.db):
            self.listener = WakeListenerLoop(
                listener=WakeListener(self.store.db), poke=self.runs.poke
            )
        self._deps = PipelineDeps(
            store=self.store,
            clock=self.clock,
            settings=settings,
            publish=self.bus.publish,
            executors=dict(executors if executors is not None else default_executors()),
            tokens=self.tokens,
            enqueue=self.intake.enqueue,
            metrics=self.metrics,
        )
        self._pipeline = compose(steps)
        self._lock_file: IO[str] | None = None
        self._started = False
        self.failed: asyncio.Future[None] | None = None

    async def _process(self, run: Run) -> None:
        ctx = RunContext(run=run, deps=self._deps)
        structlog.contextvars.bind_contextvars(run_id=run.id, agent_id=run.agent_id)
        try:
            await self._pipeline(ctx)
            if ctx.ended is None:
                # Every way through the pipeline ends or parks the run; a refused end or
                # start means this attempt's claim was taken away (the run was requeued).
                await self._abandon(ctx, "claim_lost")
        except asyncio.CancelledError:
            lost = self.runs.lost_reason(run.id)
            if lost is not None:
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                await self._abandon(ctx, lost)
                return
            if not self.runs.cancel_requested(run.id):
                raise  # shutdown: stop() requeues the run
            # Cancelled on purpose (RunsLoop.cancel): the executor has stopped the agent.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # handled here: timeouts awaited while ending still work
            await ctx.end(
                RunStatus.CANCELLED, RunReason.CANCELLED_BY_USER, error="cancelled by a user"
            )
        except Exception as exc:
            log.exception("pipeline_failed", run_id=run.id)
            if is_connection_lost(exc):
                # Not the run's fault: back to the queue (a failed requeue leaves the run
                # to lease recovery, which does the same once the database is back).
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(
                        self.store.queue.requeue,
                        [run.id],
                        reason=RunReason.INTERRUPTED,
                        now=self.clock.now(),
                    )
                return
            with contextlib.suppress(Exception):
                await ctx.end(
                    RunStatus.FAILED,
                    RunReason.INTERNAL_ERROR,
                    error=f"internal error ({type(exc).__name__}): {exc}",
                )
        finally:
            with contextlib.suppress(Exception):
                await ctx.flush_events()  # decisions of a run that ended without end()

    async def _abandon(self, ctx: RunContext, reason: str) -> None:
        """Give up an attempt whose run is no longer this node's (see :class:`RunsLoop`).

        Nothing more is written for the attempt (its buffered decisions are dropped) but
        the run event ``attempt_abandoned``; agent processes of its session still running
        on this machine are killed with their process group. If the attempt's own end
        committed just before it was abandoned, the run is left as that end made it.
        """
        ctx.pending_events.clear()
        run = ctx.run
        try:
            if ctx.session is not None:
                await asyncio.to_thread(kill_orphans, [replace(run, session_id=ctx.session.id)])
            current = await asyncio.to_thread(self.store.queue.get_run, run.id)
        except Exception:  # the database is away: the leader requeues the run anyway
            log.exception("attempt_abandon_failed", run_id=run.id, reason=reason)
            return
        event = abandoned_attempt(run, current, node_id=self.settings.node_id, reason=reason)
        if event is None:
            if ctx.ended is None and current.status.is_terminal:
                ctx.ended = current  # our end committed while the pipeline was cancelled
                await self.bus.publish(RunEnded(run=current))
            return
        log.warning("attempt_abandoned", run_id=run.id, **event["data"])
        with contextlib.suppress(Exception):  # logged above; the run itself is unaffected
            await asyncio.to_thread(
                self.store.runlog.add_run_event,
                run.id,
                kind="attempt_abandoned",
                message=event["message"],
                data=event["data"],
                now=self.clock.now(),
            )

    def _lock_sqlite(self) -> bool:
        """Take the one-scheduler lock of a SQLite file; false on other databases."""
        url = sa.engine.make_url(self.store.db.url)
        if url.get_backend_name() != "sqlite" or not url.database:
            return False
        path = Path(url.database).with_suffix(".scheduler.lock")
        handle = path.open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise DatabaseLockedError(
                f"another scheduler already runs against {url.database}; "
                "SQLite allows one scheduler process (use PostgreSQL to scale out)"
            ) from None
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle
        return True

    async def start(self) -> None:
        """Start the runs, cron and maintenance loops (idempotent).

        Raises:
            DatabaseLockedError: another process already runs the loops on this SQLite file.
        """
        if self._started:
            return
        if self._lock_file is None and self._lock_sqlite():
            await self.recover_previous_process()
        await self.approvals.redrive(self.clock.now())
        await self.budgets.redrive(self.clock.now())
        self._started = True
        self.failed = asyncio.get_running_loop().create_future()
        tasks = [
            self.runs.start(),
            self.cron.start(),
            self.maintenance.start(),
            self.notifier.start(),
        ]
        if self.leader is not None:
            tasks.append(self.leader.start())
        if self.listener is not None:
            tasks.append(self.listener.start())
        for task in tasks:
            task.add_done_callback(self._on_loop_done)

    async def recover_previous_process(self) -> list[int]:
        """Kill the agents of a dead previous scheduler process, then requeue their runs.

        Called on start while this process holds the SQLite scheduler lock, so every
        ``claimed`` or ``running`` run belongs to a process that is gone. (On PostgreSQL
        the maintenance loop recovers runs whose lease expired instead.)

        Returns:
            The ids of the runs put back to the queue (reason ``interrupted``).
        """
        live = await asyncio.to_thread(self.store.listing.live_runs)
        if not live:
            return []
        killed = kill_orphans(live)
        run_ids = [run.id for run in live]
        await asyncio.to_thread(
            self.store.queue.requeue,
            run_ids,
            reason=RunReason.INTERRUPTED,
            now=self.clock.now(),
            orphans_killed=killed,
        )
        log.warning("previous_process_runs_requeued", run_ids=run_ids)
        return run_ids

    def _on_loop_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self.failed is None or self.failed.done():
            return
        exc = task.exception()
        if exc is not None:
            log.critical("loop_crashed", loop=task.get_name(), error=repr(exc))
            self.failed.set_exception(exc)

    async def stop(self) -> None:
        """Stop the loops: no new claims, sessions get the grace period, then requeue."""
        if not self._started:
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None
            return
        if self.listener is not None:
            await self.listener.stop()
        await self.cron.stop()
        await self.runs.stop()
        await self.maintenance.stop()
        await self.notifier.stop()
        if self.leader is not None:
            await self.leader.stop()  # releases the lease: another node takes it at once
        self._started = False
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    @property
    def scheduler_running(self) -> bool:
        """Whether this process runs the scheduler loops (started and not stopped)."""
        return self._started

    def node_status(self) -> dict[str, Any]:
        """This process's part in the deployment, for ``/healthz``.

        Returns:
            ``node_id``; ``scheduler`` (whether the loops run here); ``maintenance_leader``
            (whether this process runs maintenance); ``leader``: the maintenance leader as
            this node last read the lease (:meth:`Leadership.status`: ``node_id``,
            ``epoch``, ``expires_at``, ``this_node``); ``inflight_runs``; and ``loops``:
            per loop its ``state`` and ``lag_s`` (seconds since its last good pass).
        """
        loops = {
            "runs": self.runs.health.snapshot(),
            "cron": self.cron.health.snapshot(),
            "maintenance": self.maintenance.health.snapshot(),
            "notifications": self.notifier.health.snapshot(),
        }
        if self.leader is not None:
            loops["leader"] = self.leader.health.snapshot()
        if self.listener is not None:
            loops["wake_listener"] = self.listener.health.snapshot()
        return {
            "node_id": self.settings.node_id,
            "scheduler": self._started,
            "maintenance_leader": self._started and self.maintenance.leader,
            "leader": self.leadership_status(),
            "inflight_runs": self.runs.inflight,
            "loops": loops,
        }

    def leadership_status(self) -> dict[str, Any]:
        """The maintenance leader as this node sees it, for ``/healthz`` and metrics.

        Returns:
            ``{"node_id", "epoch", "expires_at", "this_node"}`` (see
            :meth:`~office_scheduler.store.leadership.Leadership.status`); ``this_node``
            is false while this process does not run its scheduler loops. On SQLite the
            leader is the scheduler process holding the file lock: this node when it runs
            the loops, else unknown here (``node_id`` ``None``).
        """
        status = self.leadership.status()
        status["this_node"] = bool(status["this_node"]) and self._started
        if not self.leadership.uses_lease and not self._started:
            status["node_id"] = None
        return status

    def _metric_values(self) -> dict[str, Any]:
        """The gauges of ``/metrics`` (blocking: counts runs in the database)."""
        counts = self.store.listing.run_status_counts(("queued", *WAITING_STATUSES))
        node = self.node_status()
        lags = {
            name: loop["lag_s"]
            for name, loop in node["loops"].items()
            if self._started and loop.get("lag_s") is not None
        }
        return {
            "queue_depth": counts.get("queued", 0),
            "runs_waiting": {status: counts.get(status, 0) for status in WAITING_STATUSES},
            "sessions_running": node["inflight_runs"],
            "loop_lag_seconds": lags,
            "maintenance_leader": node["maintenance_leader"],
        }

    async def close(self) -> None:
        """Stop the loops and dispose the database; nothing touches it afterwards."""
        await self.stop()
        await self.intake.close()
        self.store.close()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def run_until_idle(self) -> None:
        """Fire the routine ticks and process every run due at the clock's time (drain mode).

        Scheduled retries that are due are promoted first (the rest of maintenance, such as
        the recovery sweep, runs only in the maintenance loop or through its ``tick``).

        Raises:
            DatabaseLockedError: another process runs the loops on this SQLite file.
        """
        if self._lock_file is None:
            self._lock_sqlite()
        await self.cron_firer.fire_due()
        await self.maintenance.promote_due_retries()
        await self.runs.drain()

    @retry_if_connection_lost
    async def wake(
        self,
        agent_id: str,
        *,
        source: WakeSource = WakeSource.USER,
        payload: Mapping[str, Any] | None = None,
        task_id: str | None = None,
        idempotency_key: str | None = None,
        agent: Agent | None = None,
        user_id: str | None = None,
    ) -> IntakeResult:
        """Wake an agent explicitly (``user`` from people, ``self`` from the agent itself).

        User wakes have no coalescing hold. ``agent``, when the caller has just loaded
        ``agent_id``'s record, saves reading it again. ``user_id`` (the person waking, e.g.
        the admin token's name) goes into a user wake's payload as ``user_id``; it is not
        part of the request an idempotency key names.

        Raises:
            NotFoundError: no such agent (or task).
            InvalidInputError: a source other than ``user``/``self``, or a ``task_id``
                the agent is not the assignee of (field ``task_id``: such a run would
                only be cancelled as ``assignee_changed``).
            IdempotencyKeyReusedError: ``idempotency_key`` was used before with another
                task or payload (field ``idempotency_key``); nothing was written.
        """
        try:
            source = WakeSource(source)
        except ValueError:
            raise InvalidInputError(f"unknown source {source!r}", field="source") from None
        if source not in (WakeSource.USER, WakeSource.SELF):
            raise InvalidInputError("only user and self wakes can be sent", field="source")
        if agent is None or agent.id != agent_id:
            agent = await asyncio.to_thread(self.store.office.get_agent, agent_id)
        if task_id is not None:
            task = await asyncio.to_thread(self.store.office.get_task, task_id)
            if task.workspace_id != agent.workspace_id:
                raise NotFoundError(f"task {task_id} not found", field="task_id")
            if task.assignee_agent_id != agent.id:
                raise InvalidInputError(
                    not_the_assignee(
                        task_id, await self._agent_name(task.assignee_agent_id), agent.name
                    ),
                    field="task_id",
                )
        body = dict(payload or {})
        request = WakeRequest(
            workspace_id=agent.workspace_id,
            agent_id=agent.id,
            source=source,
            payload=_with_user(body, user_id) if source is WakeSource.USER else body,
            task_id=task_id,
            idempotency_key=_scoped_key(f"{source.value}:{agent.id}", idempotency_key),
            hold=source is not WakeSource.USER,
            fingerprint=_wake_fingerprint(task_id, body) if idempotency_key else None,
        )
        try:
            return await self.intake.enqueue(request)
        except IdempotencyKeyReusedError:
            assert idempotency_key is not None
            raise IdempotencyKeyReusedError(idempotency_key) from None

    async def _agent_name(self, agent_id: str | None) -> str | None:
        """``agent_id``'s name for a message (its id if it vanished; ``None`` for none)."""
        if agent_id is None:
            return None
        try:
            return (await asyncio.to_thread(self.store.office.get_agent, agent_id)).name
        except NotFoundError:
            return agent_id

    async def wake_many(
        self, workspace_id: str, wakes: Sequence[Wake], *, user_id: str | None = None
    ) -> list[IntakeResult]:
        """Wake several agents of one workspace at once (source ``user``), all or nothing.

        ``user_id`` (the person waking) goes into each wake's payload, as with :meth:`wake`.

        One transaction and one commit for the batch: what an integration sending bursts
        of wakes uses instead of one request each. Each wake is exactly what :meth:`wake`
        with source ``user`` would make (its idempotency key deduplicates against single
        wakes too). Results come back in the order of ``wakes``.

        Raises:
            NotFoundError: an agent or task is not in the workspace (field
                ``wakes.<i>.agent_id`` or ``wakes.<i>.task_id``, the first in the order
                sent); nothing is written.
            InvalidInputError: a bad payload or idempotency key (field ``wakes.<i>....``),
                a task the wake's agent is not the assignee of (``wakes.<i>.task_id``), or
                more than 50 wakes for one agent.
            BusyError: concurrent work kept the batch from being written; send it again.
        """
        requests = []
        for index, wake in enumerate(wakes):
            try:
                key = _scoped_key(f"{WakeSource.USER.value}:{wake.agent_id}", wake.idempotency_key)
            except InvalidInputError as exc:
                raise for_wake(exc, index) from None
            body = {"reason": wake.reason, "payload": dict(wake.payload or {})}
            requests.append(
                WakeRequest(
                    workspace_id=workspace_id,
                    agent_id=wake.agent_id,
                    source=WakeSource.USER,
                    payload=_with_user(body, user_id),
                    task_id=wake.task_id,
                    idempotency_key=key,
                    hold=False,
                    fingerprint=_wake_fingerprint(wake.task_id, body) if key else None,
                )
            )
        return await self.intake.enqueue_many(requests)

    @retry_if_connection_lost
    async def queue_run(
        self, task_id: str, *, agent_id: str | None = None, idempotency_key: str | None = None
    ) -> IntakeResult:
        """Explicitly queue a run for any task (ordinary kanban tasks included).

        Args:
            task_id: the task to work on.
            agent_id: who runs it; default the task's assignee.
            idempotency_key: makes a retried call safe; a repeated key queues nothing.

        Raises:
            NotFoundError: no such task or agent.
            InvalidInputError: no agent given and the task has no assignee.
        """
        task = await asyncio.to_thread(self.store.office.get_task, task_id)
        agent_id = agent_id or task.assignee_agent_id
        if agent_id is None:
            raise InvalidInputError("the task has no assignee; name an agent", field="agent_id")
        agent = await asyncio.to_thread(self.store.office.get_agent, agent_id)
        if agent.workspace_id != task.workspace_id:
            raise NotFoundError(f"agent {agent_id} not found", field="agent_id")
        return await self.intake.enqueue(
            WakeRequest(
                workspace_id=task.workspace_id,
                agent_id=agent.id,
                source=WakeSource.QUEUE_RUN,
                payload={"task_id": task.id},
                task_id=task.id,
                idempotency_key=_scoped_key(f"queue_run:{task.workspace_id}", idempotency_key),
                hold=False,
            )
        )

    async def cancel_run(self, run_id: int) -> Run:
        """Cancel a run that has not ended; it ends ``cancelled`` (``cancelled_by_user``).

        * ``queued``: ended at once.
        * ``scheduled_retry``: the retry is cancelled (the agent's stale checkout cleared).
        * ``claimed``/``running`` in this process: its pipeline is stopped
          (:meth:`RunsLoop.cancel`): the executor kills the agent's process group and the
          pipeline ends the run (checkout released, run token revoked).

        :class:`~office_scheduler.domain.events.RunEnded` is published in every case.

        Returns:
            The ended run.

        Raises:
            NotFoundError: no such run.
            ConflictError: the run has already ended (or ended another way meanwhile), or it
                is claimed by another scheduler process (cancel it there).
        """
        run = await asyncio.to_thread(self.store.queue.get_run, run_id)
        now = self.clock.now()
        reason = RunReason.CANCELLED_BY_USER
        ended: Run | None = None
        if run.status is RunStatus.QUEUED:
            ended = await asyncio.to_thread(
                self.store.queue.cancel_queued, run_id, reason=reason, now=now
            )
        elif run.status is RunStatus.SCHEDULED_RETRY:
            ended = await asyncio.to_thread(
                self.store.queue.cancel_retry, run_id, reason=reason, now=now
            )
        elif run.status in LIVE_RUN_STATUSES and await self.runs.cancel(run_id):
            current = await asyncio.to_thread(self.store.queue.get_run, run_id)
            if current.status is RunStatus.CANCELLED:
                return current  # the pipeline ended it and published RunEnded
            raise ConflictError(
                f"run {run_id} ended {current.status.value} before it could be cancelled",
                field="run_id",
            )
        if ended is None:
            current = await asyncio.to_thread(self.store.queue.get_run, run_id)
            if current.status in LIVE_RUN_STATUSES:
                raise ConflictError(
                    f"run {run_id} is {current.status.value} in another scheduler process "
                    f"({current.claimed_by or 'unknown node'}); cancel it there",
                    field="run_id",
                )
            raise ConflictError(
                f"run {run_id} is {current.status.value}; only queued, retrying or running "
                "runs can be cancelled",
                field="run_id",
            )
        await asyncio.to_thread(
            self.store.runlog.add_run_event,
            run_id,
            kind="run_cancelled",
            message="cancelled by a user",
            data={"reason": reason.value, "was": run.status.value},
            now=now,
        )
        await self.bus.publish(RunEnded(run=ended))
        return ended
