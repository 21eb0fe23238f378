"""``POST /webhooks/{source}``: read the raw body (bounded), verify its signature before
anything parses it, then record the delivery and enqueue its event task in one transaction.

Answers: 202 a new delivery (``{"task_id", "duplicate": false}``, with ``event_key`` and
``woken`` when the source maps deliveries to events), 200 a repeat (same task id,
``duplicate: true``), 400 a verified body that is not JSON (kept for inspection), 401 a bad,
stale or malformed signature (nothing stored), 404 an unknown source, 413 a body over the
limit, 422 a source whose ``event_key`` mapping fails (nothing stored).
Logs carry the source, delivery id, event type, task id and outcome — never headers, bodies or
secrets.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ..app import App
from .metrics import Metrics
from .schemas import ErrorOut, WebhookOut
from .signatures import BadSignature, Secret, verify

log = logging.getLogger("jobtrail.webhooks")
router = APIRouter()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


@router.post(
    "/webhooks/{source}",
    response_model=WebhookOut,
    status_code=202,
    responses={
        200: {"model": WebhookOut, "description": "a repeat delivery"},
        **{c: {"model": ErrorOut} for c in (400, 401, 404, 413, 422, 503)},
    },
)
async def receive(source: str, request: Request) -> JSONResponse:
    app: App = request.app.state.jobtrail
    secrets: dict[str, list[Secret]] = request.app.state.webhook_secrets
    metrics: Metrics = request.app.state.metrics
    keys = secrets.get(source)
    if not keys or source not in app.webhook_sources():
        return _error(404, f"unknown webhook source {source!r}")
    # bounded while read by the server's BodyLimit (``webhook_max_body``): a body past it is
    # answered 413, and counted as ``too_large``, before this route sees it
    body = await request.body()
    try:
        verified = verify(keys, request.headers, body)
    except BadSignature as exc:
        metrics.webhooks.labels(source, "bad_signature").inc()
        log.info("webhook source=%s outcome=bad_signature (%s)", source, exc)
        return JSONResponse(
            {"error": f"signature refused: {exc}"},
            status_code=401,
        )
    delivery = await run_in_threadpool(
        app.receive_webhook,
        source,
        verified.delivery_id,
        body,
        event_type=verified.event_type,
    )
    outcome = "duplicate" if delivery.duplicate else "bad_body" if delivery.bad_body else "queued"
    metrics.webhooks.labels(source, outcome).inc()
    if delivery.bad_body:
        return _error(400, "the body is not JSON; it was kept for inspection, no task was made")
    answer: dict[str, object] = {"task_id": delivery.task_id, "duplicate": delivery.duplicate}
    if delivery.event_key is not None:
        answer.update(event_key=delivery.event_key, woken=delivery.woken)
    return JSONResponse(answer, status_code=200 if delivery.duplicate else 202)
