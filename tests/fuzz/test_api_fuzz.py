"""Schemathesis fuzz of the whole HTTP API, in process, deterministic.

Every operation of the OpenAPI schema gets generated requests (valid and invalid data;
path ids either generated or those of a seeded office, so requests reach real records),
sent with an admin token through a TestClient over a Service with a FakeClock. Checks: no
5xx and every response conforms to the documented schema; afterwards the database must
hold no orphan rows and consistent request/run statuses (:mod:`integrity`).

Hypothesis is derandomized (the seed derives from each operation), so CI sees the same
requests every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from api_harness import EXECUTORS
from fuzz.integrity import integrity_problems
from office_scheduler.api import create_app
from office_scheduler.config import Settings
from office_scheduler.service import Service
from office_scheduler.store import migrate
from office_scheduler.store.facade import Store
from office_scheduler.testing import FakeClock, ScriptedExecutor

#: Generated requests per operation and generation mode (valid, invalid data).
EXAMPLES_PER_MODE = 6
#: The acceptance floor of generated requests across all operations.
MIN_REQUESTS = 500


class Office:
    """An app over a fresh database with a seeded office, and the ids of its records."""

    def __init__(self, client: TestClient, admin_token: str, service: Service) -> None:
        self.client = client
        self.service = service
        self.headers = {"Authorization": f"Bearer {admin_token}"}
        self.ids: dict[str, str | int] = {}

    def post(self, path: str, body: dict[str, Any], status: int = 201) -> dict[str, Any]:
        response = self.client.post(path, json=body, headers=self.headers)
        assert response.status_code == status, response.text
        result: dict[str, Any] = response.json()
        return result

    def seed(self) -> None:
        """Create one of everything the API has ids for."""
        ws = self.post("/api/v1/workspaces", {"name": "acme", "settings": {
            "coalesce_window_s": 0, "default_executor": "cli", "executors": EXECUTORS,
        }})["id"]  # fmt: skip
        agent = self.post(f"/api/v1/workspaces/{ws}/agents", {"name": "worker"})["id"]
        task = self.post(
            f"/api/v1/workspaces/{ws}/tasks", {"title": "t", "assignee_agent_id": agent}
        )["id"]
        blocker = self.post(f"/api/v1/workspaces/{ws}/tasks", {"title": "b"})["id"]
        self.post(f"/api/v1/tasks/{task}/blockers", {"blocker_task_id": blocker}, status=200)
        project = self.post(f"/api/v1/workspaces/{ws}/projects", {"name": "p"})["id"]
        routine = self.post(
            f"/api/v1/workspaces/{ws}/routines", {"name": "r", "assignee_agent_id": agent}
        )["id"]
        trigger = self.post(
            f"/api/v1/routines/{routine}/triggers", {"kind": "webhook", "signing_mode": "none"}
        )
        approval = self.post(f"/api/v1/workspaces/{ws}/approvals", {"title": "ok?"})["id"]
        budget = self.post(
            f"/api/v1/workspaces/{ws}/budgets", {"scope_kind": "workspace", "limit_cents": 500}
        )["id"]
        wake = self.post(f"/api/v1/agents/{agent}/wake", {}, status=202)
        token = self.post("/api/v1/tokens", {"name": "spare"})["id"]
        inbox = self.client.get(f"/api/v1/workspaces/{ws}/inbox", headers=self.headers).json()
        self.ids = {
            "workspace_id": ws,
            "agent_id": agent,
            "task_id": task,
            "blocker_id": blocker,
            "project_id": project,
            "routine_id": routine,
            "trigger_id": trigger["id"],
            "public_id": trigger["url_path"].split("/")[-2],
            "approval_id": approval,
            "budget_id": budget,
            "run_id": wake["run_id"],
            "wakeup_id": wake["wakeup"]["id"],
            "token_id": token,
        }
        if inbox["items"]:
            self.ids["item_id"] = inbox["items"][0]["id"]


@pytest.fixture
def office(tmp_path: Path, db_url: str, db_schema: str | None) -> Iterator[Office]:
    store = Store.open(db_url, schema=db_schema)
    migrate.upgrade(store.db)
    clock = FakeClock()
    service = Service(
        Settings(home=tmp_path), clock=clock, executors={"command": ScriptedExecutor()}, store=store
    )
    admin_token, _ = service.tokens.mint_admin(name="fuzz", now=clock.now())
    app = create_app(service)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            seeded = Office(client, admin_token, service)
            seeded.seed()
            try:
                yield seeded
            finally:
                assert client.portal is not None
                client.portal.call(service.close)
    finally:
        store.close()


def _cases(operation: Any, ids: dict[str, str | int]) -> st.SearchStrategy[Any]:
    """Valid and invalid cases, half of them aimed at the seeded records' ids."""
    names = {param.name for param in operation.path_parameters}
    seeded = {name: ids[name] for name in names if name in ids}
    strategies = [operation.as_strategy(mode) for mode in GenerationMode]
    if seeded and len(seeded) == len(names):
        strategies += [
            operation.as_strategy(mode, path_parameters=seeded) for mode in GenerationMode
        ]
    return st.one_of(strategies)


def _httpx_kwargs(case: Any, headers: dict[str, str]) -> dict[str, Any]:
    """The case as TestClient (httpx) arguments: a raw ``data`` body becomes ``content``."""
    kwargs = case.as_transport_kwargs(base_url="http://testserver", headers=headers)
    sent = {"method": kwargs["method"], "url": kwargs["url"], "headers": dict(kwargs["headers"])}
    # The generated security-scheme header would replace the admin token: put it back.
    sent["headers"].update(headers)
    if kwargs.get("params"):
        sent["params"] = kwargs["params"]
    if kwargs.get("cookies"):
        sent["cookies"] = kwargs["cookies"]
    if "json" in kwargs:
        sent["json"] = kwargs["json"]
    data = kwargs.get("data")
    if isinstance(data, bytes | str):
        sent["content"] = data
    elif data is not None:
        sent["data"] = data
    unknown = set(kwargs) - {"method", "url", "headers", "params", "cookies", "json", "data"}
    assert not unknown, unknown
    return sent


def _fuzz(office: Office, operation: Any) -> int:
    """Send one operation's generated cases and check each response; returns how many."""
    sent = 0

    @settings(
        max_examples=EXAMPLES_PER_MODE * 2,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_cases(operation, office.ids))
    def fuzz(case: Any) -> None:
        nonlocal sent
        response = office.client.request(**_httpx_kwargs(case, office.headers))
        sent += 1
        case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])

    fuzz()
    return sent


@pytest.mark.timeout(300)
def test_fuzzed_api_never_fails_and_keeps_the_data_sound(office: Office) -> None:
    schema = schemathesis.openapi.from_dict(office.client.app.openapi())  # type: ignore[attr-defined]
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert len(operations) > 40, "every route is in the schema"
    sent: dict[str, int] = {}
    failures: list[str] = []
    for operation in operations:
        try:
            sent[operation.label] = _fuzz(office, operation)
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert sum(sent.values()) >= MIN_REQUESTS, sent
    assert integrity_problems(office.service.store.db) == []
