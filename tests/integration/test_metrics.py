"""``/metrics``, ``/livez`` and ``/readyz``: live figures of one process, per-service registries."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from helpers import Office
from office_scheduler.api import create_app
from office_scheduler.domain.execution import Launch, Outcome
from office_scheduler.domain.models import Task
from office_scheduler.domain.status import ErrorFamily, OutcomeStatus, RunStatus
from office_scheduler.metrics import Metrics

PAST_ANY_BACKOFF = timedelta(hours=3)  # the longest retry delay, 2 h, plus its 25 % jitter

METRIC_NAMES = (
    "office_wakeups_total",
    "office_runs_total",
    "office_run_failures_total",
    "office_retries_scheduled_total",
    "office_escalations_total",
    "office_event_to_launch_seconds_bucket",
    "office_run_duration_seconds_bucket",
    "office_queue_depth",
    "office_runs_waiting",
    "office_sessions_running",
    "office_loop_lag_seconds",
    "office_maintenance_leader",
)


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` → value for every sample line."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


def value(text: str, name: str, **labels: str) -> float:
    wanted = {f'{k}="{v}"' for k, v in labels.items()}
    total = 0.0
    for key, number in samples(text).items():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})?", key)
        assert match is not None, key
        if match.group(1) != name:
            continue
        have = set(filter(None, (match.group(2) or "").split(",")))
        if wanted <= have:
            total += number
    return total


async def assigned(office: Office, title: str = "Write the page") -> Task:
    return await office.service.office.create_task(
        workspace_id=office.workspace.id,
        title=title,
        project_id=office.project.id,
        assignee_agent_id=office.worker.id,
    )


def worker_fails_auth(office: Office) -> None:
    worker_id = office.worker.id

    def outcome(launch: Launch) -> Outcome:
        if launch.agent_id == worker_id:
            return Outcome(
                status=OutcomeStatus.FAILED,
                message="Invalid API key · Please run /login",
                error_family=ErrorFamily.AUTH,
            )
        return Outcome(status=OutcomeStatus.SUCCEEDED)

    office.executor._default = outcome


def get(office: Office, path: str) -> Any:
    with TestClient(create_app(office.service)) as client:
        return client.get(path)


async def test_metrics_show_live_values_after_runs_succeed_fail_retry_and_escalate(
    office: Office,
) -> None:
    await assigned(office, "Works")
    office.clock.advance(timedelta(seconds=15))
    await office.service.run_until_idle()
    worker_fails_auth(office)
    await assigned(office, "Fails")
    office.clock.advance(timedelta(seconds=15))
    await office.service.run_until_idle()
    for _ in range(4):  # four retries; the fifth failure escalates
        office.clock.advance(PAST_ANY_BACKOFF)
        await office.service.run_until_idle()

    response = get(office, "/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for name in METRIC_NAMES:
        if name == "office_loop_lag_seconds":
            continue  # drain mode runs no loop (see the sampler test)
        assert re.search(rf"^{name}(\{{| )", text, re.M), name
    assert value(text, "office_wakeups_total", source="task_assigned", outcome="created") >= 2
    assert value(text, "office_wakeups_total", outcome="held") == 0  # exported at 0
    assert value(text, "office_runs_total", status="finished") >= 1
    assert value(text, "office_runs_total", status="failed", reason="retries_exhausted") == 1
    assert value(text, "office_run_failures_total", family="auth") == 5
    assert value(text, "office_retries_scheduled_total") == 4
    assert value(text, "office_escalations_total") == 1
    assert value(text, "office_event_to_launch_seconds_count") >= 6
    assert value(text, "office_run_duration_seconds_count", executor="fake") >= 2
    assert value(text, "office_runs_waiting", status="scheduled_retry") == 0
    assert value(text, "office_runs_waiting", status="parked") == 0
    assert value(text, "office_maintenance_leader") == 0  # drain mode runs no loops
    assert value(text, "office_sessions_running") == 0


async def test_queue_depth_and_waiting_runs_are_counted_when_scraped(office: Office) -> None:
    worker_fails_auth(office)
    await assigned(office, "Fails")
    office.clock.advance(timedelta(seconds=15))
    await office.service.run_until_idle()
    await assigned(office, "Waits")  # queued behind the coalescing hold

    text = get(office, "/metrics").text

    runs = office.store.listing.list_runs(agent_id=office.worker.id).items
    assert sorted(run.status for run in runs) == sorted(
        [RunStatus.SCHEDULED_RETRY, RunStatus.QUEUED]
    )
    assert value(text, "office_runs_waiting", status="scheduled_retry") == 1
    assert value(text, "office_queue_depth") == 1


def test_each_service_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.retry_scheduled()

    assert value(first.render().decode(), "office_retries_scheduled_total") == 1
    assert value(second.render().decode(), "office_retries_scheduled_total") == 0


def test_gauges_come_from_the_sampler_when_scraped() -> None:
    metrics = Metrics()
    metrics.set_sampler(
        lambda: {
            "queue_depth": 7,
            "runs_waiting": {"scheduled_retry": 2},
            "sessions_running": 3,
            "loop_lag_seconds": {"runs": 0.5, "cron": 1.25},
            "maintenance_leader": True,
        }
    )

    text = metrics.render().decode()

    assert value(text, "office_queue_depth") == 7
    assert value(text, "office_runs_waiting", status="scheduled_retry") == 2
    assert value(text, "office_runs_waiting", status="parked") == 0
    assert value(text, "office_sessions_running") == 3
    assert value(text, "office_loop_lag_seconds", loop="runs") == 0.5
    assert value(text, "office_loop_lag_seconds", loop="cron") == 1.25
    assert value(text, "office_maintenance_leader") == 1


async def test_livez_and_readyz_answer_without_a_token(office: Office) -> None:
    live = get(office, "/livez")
    ready = get(office, "/readyz")

    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    assert ready.status_code == 200
    assert ready.json()["database"] == "ok"


async def test_readyz_is_503_when_the_database_is_unreachable(
    office: Office, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def unreachable() -> bool:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(office.service.store.listing, "ping", unreachable)

    ready = get(office, "/readyz")
    live = get(office, "/livez")

    assert ready.status_code == 503
    assert ready.json() == {"status": "error", "database": "error", "scheduler": "not_started"}
    assert live.status_code == 200
