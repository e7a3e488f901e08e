"""Idempotency keys reused with another request, on both databases.

The same key with the same request is a silent duplicate; with another request it is
refused (422 at the API, :class:`IdempotencyKeyReusedError` here), as the IETF
Idempotency-Key draft has it. Concurrent first deliveries of one key with two bodies: one
is written, the other refused.
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from helpers import Office
from office_scheduler.domain.errors import IdempotencyKeyReusedError
from office_scheduler.domain.idempotency import fingerprint
from office_scheduler.domain.models import Wake, WakeRequest
from office_scheduler.domain.routines import Routine, RoutineRunSource
from office_scheduler.domain.status import IntakeOutcome, WakeSource
from office_scheduler.intake.rules import decide_merge
from office_scheduler.store.routine_runs import NewRoutineRun
from office_scheduler.store.schema import routine_runs, runs, wakeup_requests


def _count(office: Office, table: sa.Table) -> int:
    with office.store.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


async def test_a_key_resent_with_the_same_wake_is_a_duplicate(office: Office) -> None:
    wake = office.service.wake
    first = await wake(office.worker.id, payload={"reason": "go"}, idempotency_key="k-1")
    office.clock.advance(timedelta(days=3))
    again = await wake(office.worker.id, payload={"reason": "go"}, idempotency_key="k-1")
    assert (first.outcome, again.outcome) == (IntakeOutcome.CREATED, IntakeOutcome.DEDUPLICATED)
    assert again.request.id == first.request.id


async def test_a_key_resent_with_another_payload_is_refused_naming_the_key(
    office: Office,
) -> None:
    wake = office.service.wake
    await wake(office.worker.id, payload={"reason": "go"}, idempotency_key="deploy-7")
    with pytest.raises(IdempotencyKeyReusedError) as refused:
        await wake(office.worker.id, payload={"reason": "stop"}, idempotency_key="deploy-7")
    assert refused.value.field == "idempotency_key"
    assert "'deploy-7'" in refused.value.message
    assert "user:" not in refused.value.message, "the caller's key, not its stored scope"
    assert _count(office, wakeup_requests) == 1
    assert _count(office, runs) == 1


async def test_a_key_resent_about_another_task_is_refused(office: Office) -> None:
    svc = office.service.office
    tasks = [
        await svc.create_task(
            workspace_id=office.workspace.id,
            title=f"t{n}",
            project_id=office.project.id,
            assignee_agent_id=office.worker.id,
        )
        for n in range(2)
    ]
    await office.service.wake(office.worker.id, task_id=tasks[0].id, idempotency_key="k")
    with pytest.raises(IdempotencyKeyReusedError):
        await office.service.wake(office.worker.id, task_id=tasks[1].id, idempotency_key="k")


async def test_batch_and_single_wakes_share_keys_and_fingerprints(office: Office) -> None:
    single = await office.service.wake(
        office.worker.id, payload={"reason": "r", "payload": {}}, idempotency_key="b-1"
    )
    [same] = await office.service.wake_many(
        office.workspace.id, [Wake(agent_id=office.worker.id, reason="r", idempotency_key="b-1")]
    )
    assert same.outcome is IntakeOutcome.DEDUPLICATED
    assert same.request.id == single.request.id
    with pytest.raises(IdempotencyKeyReusedError) as refused:
        await office.service.wake_many(
            office.workspace.id,
            [
                Wake(agent_id=office.other_worker.id, reason="fine"),
                Wake(agent_id=office.worker.id, reason="other", idempotency_key="b-1"),
            ],
        )
    assert refused.value.field == "wakes.1.idempotency_key"
    assert "b-1" in refused.value.message
    assert _count(office, wakeup_requests) == 1, "the batch wrote nothing"


async def test_internal_wakes_without_a_fingerprint_stay_plain_duplicates(
    office: Office,
) -> None:
    def request(payload: dict[str, object]) -> WakeRequest:
        return WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.worker.id,
            source=WakeSource.COMMENT,
            payload=payload,
            idempotency_key="comment:c-9",
        )

    await office.service.intake.enqueue(request({"comment_id": "c-9"}))
    again = await office.service.intake.enqueue(request({"comment_id": "c-9", "rejection": {}}))
    assert again.outcome is IntakeOutcome.DEDUPLICATED


async def test_concurrent_wakes_of_one_key_in_one_group_one_wins(office: Office) -> None:
    wake = office.service.wake
    outcomes = await asyncio.gather(
        wake(office.worker.id, payload={"n": 1}, idempotency_key="race"),
        wake(office.worker.id, payload={"n": 2}, idempotency_key="race"),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, IdempotencyKeyReusedError)]
    taken = [o for o in outcomes if not isinstance(o, BaseException)]
    assert (len(refused), len(taken)) == (1, 1)
    assert taken[0].outcome is IntakeOutcome.CREATED
    assert _count(office, wakeup_requests) == 1


def test_concurrent_first_deliveries_in_two_transactions_one_wins(office: Office) -> None:
    store, now = office.store, office.clock.now()
    taken: list[IntakeOutcome] = []
    refused: list[BaseException] = []
    barrier = threading.Barrier(2)

    def deliver(body: str) -> None:
        request = WakeRequest(
            workspace_id=office.workspace.id,
            agent_id=office.worker.id,
            source=WakeSource.USER,
            payload={"body": body},
            idempotency_key="user:race",
            hold=False,
            fingerprint=fingerprint({"body": body}),
        )
        barrier.wait()
        try:
            with store.db.transaction():
                result = store.queue.enqueue(
                    request, now=now, hold=timedelta(0), decide=decide_merge
                )
            taken.append(result.outcome)
        except IdempotencyKeyReusedError as exc:
            refused.append(exc)

    threads = [threading.Thread(target=deliver, args=(body,)) for body in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert taken == [IntakeOutcome.CREATED]
    assert len(refused) == 1
    assert _count(office, wakeup_requests) == 1
    assert _count(office, runs) == 1


# -- routine webhooks ----------------------------------------------------------------------


async def _hook(office: Office) -> tuple[Routine, str]:
    routine = await office.service.routines.create_routine(
        office.workspace.id, {"name": "On push", "assignee_agent_id": office.worker.id}
    )
    trigger, _ = await office.service.routines.add_trigger(
        routine.id, {"kind": "webhook", "signing_mode": "none"}
    )
    assert trigger.public_id is not None
    return routine, trigger.public_id


async def test_a_webhook_key_resent_with_the_same_body_is_a_duplicate(office: Office) -> None:
    _, public_id = await _hook(office)
    fire = office.service.routines.fire_webhook
    headers = {"idempotency-key": "push-1"}
    first, created = await fire(public_id, headers, b'{"pr": 101, "repo": "site"}')
    # The same JSON in another layout is the same request.
    again, created_again = await fire(public_id, headers, b'{ "repo": "site", "pr": 101 }')
    assert (created, created_again, again.id) == (True, False, first.id)


async def test_a_webhook_key_resent_with_another_body_is_refused(office: Office) -> None:
    _, public_id = await _hook(office)
    fire = office.service.routines.fire_webhook
    headers = {"idempotency-key": "push-1"}
    await fire(public_id, headers, json.dumps({"pr": 101}).encode())
    with pytest.raises(IdempotencyKeyReusedError) as refused:
        await fire(public_id, headers, json.dumps({"pr": 202}).encode())
    assert refused.value.field == "Idempotency-Key"
    assert "'push-1'" in refused.value.message
    assert _count(office, routine_runs) == 1


async def test_concurrent_first_webhook_deliveries_with_two_bodies_one_wins(
    office: Office,
) -> None:
    routine_id = (await _hook(office))[0].id
    store, now = office.store, office.clock.now()
    created: list[bool] = []
    refused: list[BaseException] = []
    barrier = threading.Barrier(2)

    def deliver(pr: int) -> None:
        new = NewRoutineRun(
            routine_id=routine_id,
            trigger_id=None,
            source=RoutineRunSource.WEBHOOK,
            variables={"pr": pr},
            scheduled_for=None,
            idempotency_key=f"routine:{routine_id}:webhook:race",
            request_fingerprint=fingerprint({"pr": pr}),
        )
        barrier.wait()
        try:
            created.append(store.routines.insert_run(new, now=now)[1])
        except IdempotencyKeyReusedError as exc:
            refused.append(exc)

    threads = [threading.Thread(target=deliver, args=(pr,)) for pr in (101, 202)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert created == [True]
    assert len(refused) == 1
    assert _count(office, routine_runs) == 1
