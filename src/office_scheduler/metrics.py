"""Prometheus metrics of one process (``GET /metrics``), on a registry of its own.

Each :class:`~office_scheduler.service.Service` owns one :class:`Metrics` (not the
library's global registry), so many services in one process (tests, the bench) never share
or clash, and each process of a PostgreSQL deployment exports its own figures.

Counters and histograms are fed from few places: :meth:`Metrics.register` subscribes to the
event bus (wakes received, runs started and ended) and the retry step calls
:meth:`Metrics.failure`, :meth:`Metrics.retry_scheduled` and :meth:`Metrics.escalated`.
Gauges are sampled when scraped (:meth:`Metrics.sample`).

Names (all ``office_*``): ``wakeups_total{source,outcome}`` (``created``, ``coalesced``,
``deduplicated``, ``skipped``, ``held``), ``runs_total{status,reason}``,
``run_failures_total{family}``, ``retries_scheduled_total``, ``escalations_total``;
histograms ``event_to_launch_seconds`` and ``run_duration_seconds{executor}``; gauges
``queue_depth``, ``runs_waiting{status}`` (``parked``, ``scheduled_retry``),
``sessions_running``, ``loop_lag_seconds{loop}``, ``maintenance_leader``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from office_scheduler.domain.events import RunEnded, RunStarted, WakeupReceived
from office_scheduler.domain.status import ErrorFamily, RunReason, WakeSource
from office_scheduler.events.bus import EventBus

# The ``*_created`` timestamp series double the output for no alert or dashboard we have.
disable_created_metrics()  # type: ignore[no-untyped-call]

#: Outcomes of ``office_wakeups_total``: intake's, the idle skip, and held wakes.
WAKE_OUTCOMES = ("created", "coalesced", "deduplicated", "skipped", "held")
#: Statuses of ``office_runs_waiting``: runs that wait for something other than a slot.
WAITING_STATUSES = ("parked", "scheduled_retry")
#: Seconds from the wake to the agent's launch.
LAUNCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: Seconds an agent session ran.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
#: The content type of :meth:`Metrics.render` (Prometheus text format 0.0.4).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: ``sampler()`` → the values of the gauges: ``queue_depth``, ``runs_waiting`` (by status),
#: ``sessions_running``, ``loop_lag_seconds`` (by loop) and ``maintenance_leader``.
Sampler = Callable[[], Mapping[str, Any]]


class Metrics:
    """The metric families of one service, on their own :class:`CollectorRegistry`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.wakeups = Counter(
            "office_wakeups",
            "Wake requests by source and outcome.",
            ["source", "outcome"],
            registry=r,
        )
        self.runs = Counter(
            "office_runs",
            "Runs that ended, by status and reason.",
            ["status", "reason"],
            registry=r,
        )
        self.failures = Counter(
            "office_run_failures",
            "Failed agent sessions by error family.",
            ["family"],
            registry=r,
        )
        self.retries = Counter(
            "office_retries_scheduled", "Failed runs parked for a later retry.", registry=r
        )
        self.escalations = Counter(
            "office_escalations", "Runs that gave up and were escalated.", registry=r
        )
        self.event_to_launch = Histogram(
            "office_event_to_launch_seconds",
            "Seconds from a run's first wake to its agent's launch.",
            buckets=LAUNCH_BUCKETS,
            registry=r,
        )
        self.run_duration = Histogram(
            "office_run_duration_seconds",
            "Seconds from a run's launch to its end, by executor.",
            ["executor"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge("office_queue_depth", "Runs queued.", registry=r)
        self.waiting = Gauge(
            "office_runs_waiting",
            "Runs waiting (parked, scheduled_retry).",
            ["status"],
            registry=r,
        )
        self.sessions = Gauge(
            "office_sessions_running", "Agent sessions this process runs.", registry=r
        )
        self.loop_lag = Gauge(
            "office_loop_lag_seconds",
            "Seconds since each loop's last good pass.",
            ["loop"],
            registry=r,
        )
        self.leader = Gauge(
            "office_maintenance_leader", "1 when this process leads maintenance.", registry=r
        )
        # Every label value known in advance is exported from the start (at 0), so alerts
        # and dashboards see the series before the first event.
        for source in WakeSource:
            for outcome in WAKE_OUTCOMES:
                self.wakeups.labels(source=source.value, outcome=outcome)
        for family in ErrorFamily:
            self.failures.labels(family=family.value)
        for status in WAITING_STATUSES:
            self.waiting.labels(status=status)
        self._sampler: Sampler | None = None

    # -- hooks ------------------------------------------------------------------------------

    def register(self, bus: EventBus) -> None:
        """Count wakes and runs from the events the service publishes."""
        bus.subscribe(self._on_wakeup, WakeupReceived)
        bus.subscribe(self._on_started, RunStarted)
        bus.subscribe(self._on_ended, RunEnded)

    async def _on_wakeup(self, event: WakeupReceived) -> None:
        self.wakeups.labels(source=event.request.source.value, outcome=event.outcome.value).inc()

    async def _on_started(self, event: RunStarted) -> None:
        run = event.run
        if run.started_at is not None:
            waited = (run.started_at - run.requested_at).total_seconds()
            self.event_to_launch.observe(max(waited, 0.0))

    async def _on_ended(self, event: RunEnded) -> None:
        run = event.run
        reason = run.reason.value if run.reason is not None else ""
        self.runs.labels(status=run.status.value, reason=reason).inc()
        if run.reason is RunReason.NO_ACTIONABLE_TASKS:
            # The idle skip ends the run before launch: each wake it carried was skipped.
            skipped = self.wakeups.labels(source=run.source.value, outcome="skipped")
            skipped.inc(max(run.coalesced_count, 1))
        if run.started_at is not None and run.finished_at is not None:
            ran = (run.finished_at - run.started_at).total_seconds()
            self.run_duration.labels(executor=run.executor or "").observe(max(ran, 0.0))

    def failure(self, family: ErrorFamily) -> None:
        """An agent session failed (not cancelled) with ``family``."""
        self.failures.labels(family=family.value).inc()

    def retry_scheduled(self) -> None:
        """A failed run was parked in ``scheduled_retry``."""
        self.retries.inc()

    def escalated(self) -> None:
        """A run gave up after its last failure (inbox item, coordinator woken)."""
        self.escalations.inc()

    # -- scraping ---------------------------------------------------------------------------

    def set_sampler(self, sampler: Sampler) -> None:
        """Where :meth:`sample` reads the gauges' values (the service provides it)."""
        self._sampler = sampler

    def sample(self) -> None:
        """Set the gauges from the sampler (blocking: it reads the database)."""
        if self._sampler is None:
            return
        values = self._sampler()
        self.queue_depth.set(values.get("queue_depth", 0))
        waiting = values.get("runs_waiting", {})
        for status in WAITING_STATUSES:
            self.waiting.labels(status=status).set(waiting.get(status, 0))
        self.sessions.set(values.get("sessions_running", 0))
        for loop, lag in values.get("loop_lag_seconds", {}).items():
            self.loop_lag.labels(loop=loop).set(lag)
        self.leader.set(1 if values.get("maintenance_leader") else 0)

    def render(self) -> bytes:
        """Sample the gauges, then every metric in the Prometheus text format."""
        self.sample()
        return generate_latest(self.registry)

    def render_without_sampling(self) -> bytes:
        """Every metric as it stands (the gauges keep their last sampled values)."""
        return generate_latest(self.registry)
