"""The public webhook endpoint of routine triggers: ``POST /api/routine-triggers/{id}/fire``.

It is outside ``/api/v1`` and takes no bearer token: the trigger's signing mode
authenticates the caller (``hmac_sha256``: ``X-Signature-256: sha256=<hex>`` over
``"<timestamp>." + raw body`` with ``X-Signature-Timestamp``; ``bearer``: the trigger's
secret in ``Authorization``; ``github`` and ``slack``: those senders' own signatures;
``none``: the unguessable URL alone). The raw body is read as sent, because the signature
covers its exact bytes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from office_scheduler.api.errors import PayloadTooLargeError
from office_scheduler.api.views import ErrorOut
from office_scheduler.api.views_routines import RoutineRunOut, WebhookFiredOut
from office_scheduler.routines.webhooks import MAX_BODY_BYTES
from office_scheduler.service import Service

router = APIRouter(tags=["routine webhooks"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a GitHub ping ({'pong': true}) or Slack's URL verification "
        "({'challenge': ...}): answered, nothing fired"
    },
    401: {"model": ErrorOut, "description": "missing or wrong signature/secret, stale timestamp"},
    404: {"model": ErrorOut, "description": "no webhook trigger has this public id"},
    409: {
        "model": ErrorOut,
        "description": "a replayed signed delivery, a disabled trigger or an inactive routine",
    },
    413: {"model": ErrorOut, "description": "a body larger than 256 KiB"},
    422: {"model": ErrorOut, "description": "a body that is not a JSON object, or a bad variable"},
    429: {
        "model": ErrorOut,
        "description": "too many requests to this URL; `Retry-After` says when to retry",
    },
}


async def _raw_body(request: Request) -> bytes:
    """The request body exactly as sent, refusing more than the webhook limit (256 KiB)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PayloadTooLargeError("body is larger than 256 KiB", field="body")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PayloadTooLargeError("body is larger than 256 KiB", field="body")
        chunks.append(chunk)
    return b"".join(chunks)


@router.post(
    "/api/routine-triggers/{public_id}/fire",
    status_code=202,
    response_model=WebhookFiredOut,
    responses=_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object"}}},
            "description": "variables: a JSON object, or {'variables': {...}}",
        }
    },
)
async def fire_webhook(public_id: str, request: Request) -> WebhookFiredOut | JSONResponse:
    """Fire the routine of a webhook trigger; the JSON body provides its variables.

    Send ``Idempotency-Key`` to make retries safe (GitHub's ``X-GitHub-Delivery`` serves
    as one): a repeated key returns the first delivery's routine run with
    ``deduplicated: true``. Nothing is stored when authentication fails.
    """
    service: Service = request.app.state.service
    body = await _raw_body(request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    outcome = await service.inbound.receive(public_id, headers, body)
    if outcome.pong:
        return JSONResponse({"pong": True})
    if outcome.challenge is not None:
        return JSONResponse({"challenge": outcome.challenge})
    run = None if outcome.run is None else RoutineRunOut.of(outcome.run)
    return WebhookFiredOut(
        routine_run=run,
        deduplicated=outcome.run is not None and not outcome.created,
        ignored=outcome.ignored,
        comment_id=outcome.comment_id,
    )
