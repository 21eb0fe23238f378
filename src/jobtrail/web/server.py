"""``create_app``: the FastAPI application over one ``jobtrail.App``, with the error mapping
(§15): 404 unknown id, 409 idempotency conflict or illegal transition (naming the current
state), 413 too large, 422 invalid, 503 + ``Retry-After`` when the store cannot be reached."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import PoolTimeout

from ..app import App
from ..dashboard.headers import SecurityHeaders
from ..dashboard.origin import OriginGuard
from ..errors import (
    IdempotencyConflict,
    IllegalTransition,
    StoreUnavailable,
    TaskNotFound,
    UnknownKind,
)
from . import api, webhooks
from .auth import Token, parse_tokens
from .limits import BodyLimit
from .metrics import Metrics
from .session import COOKIE, mount_dashboard
from .signatures import Secret, parse_secrets
from .throttle import AuthThrottle

log = logging.getLogger("jobtrail.web")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_REQUEST = 2 * 1024 * 1024  # any request body; payloads have their own (App) limit
WEBHOOK_MAX_BODY = 1024 * 1024
RETRY_AFTER = "5"


def check_bind(host: str, tokens: Sequence[Token]) -> None:
    """No tokens configured → only loopback; raises ``ValueError`` saying so."""
    if not tokens and host not in LOOPBACK:
        raise ValueError(
            f"refusing to listen on {host}: no JOBTRAIL_TOKENS configured, so the API would be "
            "open to anyone; set JOBTRAIL_TOKENS or bind to 127.0.0.1 / ::1 / localhost"
        )


def _tokens(value: str | Sequence[Token] | None) -> list[Token]:
    if value is None:
        value = os.environ.get("JOBTRAIL_TOKENS")
    return parse_tokens(value) if value is None or isinstance(value, str) else list(value)


def _secrets(value: str | dict[str, list[Secret]] | None) -> dict[str, list[Secret]]:
    if value is None:
        value = os.environ.get("JOBTRAIL_WEBHOOK_SECRETS")
    return parse_secrets(value) if value is None or isinstance(value, str) else dict(value)


def is_unreachable(exc: BaseException) -> bool:
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text or "unable to open" in text or "i/o" in text
    return isinstance(exc, psycopg.OperationalError | PoolTimeout)


def _json(status: int, body: dict[str, Any], **headers: str) -> JSONResponse:
    return JSONResponse(jsonable_encoder(body), status_code=status, headers=headers or None)


def create_app(
    app: App,
    tokens: str | Sequence[Token] | None = None,
    webhook_secrets: str | dict[str, list[Secret]] | None = None,
    *,
    webhook_max_body: int = WEBHOOK_MAX_BODY,
    secure_cookies: bool | None = None,
) -> FastAPI:
    """The HTTP API over ``app``. ``tokens`` / ``webhook_secrets`` take the env-variable
    syntax (or parsed values); ``None`` reads ``JOBTRAIL_TOKENS`` / ``JOBTRAIL_WEBHOOK_SECRETS``.
    ``secure_cookies``: mark the session cookie ``Secure`` always (``True``), never
    (``False``), or when the request came over HTTPS (``None``).

    Every request passes, outermost first: the security headers, the throttle on failed
    tokens, the dashboard's origin rule and the body limit (§16.7) — all before a route reads
    a byte of the body or looks at a token."""
    web = FastAPI(
        title="jobtrail",
        summary="Durable background tasks whose every state can be explained.",
        version="0.1.0",
    )
    web.state.jobtrail = app
    web.state.tokens = _tokens(tokens)
    web.state.webhook_secrets = _secrets(webhook_secrets)
    web.state.webhook_max_body = webhook_max_body
    web.state.metrics = Metrics(app)
    web.include_router(api.router)
    web.include_router(webhooks.router)
    mount_dashboard(web, app, secure_cookies=secure_cookies)
    _errors(web)

    def body_limit(path: str) -> int:
        return webhook_max_body if path.startswith("/webhooks/") else MAX_REQUEST

    def refused(path: str) -> None:
        source = path.removeprefix("/webhooks/")
        if source != path and source in web.state.webhook_secrets:  # known sources only
            web.state.metrics.webhooks.labels(source, "too_large").inc()

    # the last added runs first
    web.add_middleware(BodyLimit, limit_for=body_limit, on_refused=refused)
    web.add_middleware(OriginGuard, session_cookie=COOKIE)
    web.add_middleware(AuthThrottle, session_cookie=COOKIE)
    web.add_middleware(SecurityHeaders)

    @web.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    def metrics(who: api.Reader) -> Response:
        """Prometheus text exposition (names in the README, "## HTTP")."""
        api.untenanted(who)
        body = generate_latest(web.state.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return web


def _errors(web: FastAPI) -> None:
    @web.exception_handler(TaskNotFound)
    async def not_found(_: Request, exc: TaskNotFound) -> JSONResponse:
        return _json(404, {"error": str(exc)})

    @web.exception_handler(IdempotencyConflict)
    async def conflict(_: Request, exc: IdempotencyConflict) -> JSONResponse:
        return _json(409, {"error": str(exc), "task_id": exc.task_id})

    @web.exception_handler(IllegalTransition)
    async def illegal(_: Request, exc: IllegalTransition) -> JSONResponse:
        body = {"error": str(exc), "task_id": exc.task_id, "current_state": exc.current_state}
        return _json(409, body)

    @web.exception_handler(UnknownKind)
    async def unknown_kind(_: Request, exc: UnknownKind) -> JSONResponse:
        return _json(422, {"error": str(exc)})

    @web.exception_handler(ValueError)
    async def bad_value(_: Request, exc: ValueError) -> JSONResponse:
        text = str(exc)
        return _json(413 if "the limit is" in text else 422, {"error": text})

    @web.exception_handler(TypeError)
    async def bad_type(_: Request, exc: TypeError) -> JSONResponse:
        return _json(422, {"error": str(exc)})

    @web.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return _json(exc.status_code, {"error": str(exc.detail)}, **(exc.headers or {}))

    async def store_error(_: Request, exc: Exception) -> JSONResponse:
        if is_unreachable(exc):
            log.warning("store unavailable: %s", type(exc).__name__)
            return _json(
                503,
                {"error": "the task store cannot be reached; nothing was stored, try again"},
                **{"Retry-After": RETRY_AFTER},
            )
        log.error("store error: %s", type(exc).__name__)
        return _json(500, {"error": f"store error: {type(exc).__name__}"})

    web.add_exception_handler(StoreUnavailable, store_error)
    web.add_exception_handler(sqlite3.OperationalError, store_error)
    web.add_exception_handler(psycopg.OperationalError, store_error)
    web.add_exception_handler(PoolTimeout, store_error)
