"""``create_app``: the FastAPI application over one ``jobtrail.App``, with the error mapping
(docs/http.md): 404 unknown id, 409 idempotency conflict or illegal transition (naming the current
state), 413 too large, 422 invalid, 503 + ``Retry-After`` when the store cannot be reached."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import PoolTimeout

from ..app import App
from ..model.errors import (
    IdempotencyConflict,
    IllegalTransition,
    SchemaMissing,
    StoreUnavailable,
    TaskFailed,
    TaskNotFound,
    UnknownKind,
)
from . import api, webhooks
from .auth import Token, parse_tokens
from .dashboard.headers import SecurityHeaders
from .dashboard.origin import OriginGuard
from .hosts import HostGuard
from .hosts import allowed_hosts as allowed_hosts_for
from .limits import BodyLimit
from .metrics import Metrics
from .session import COOKIE, mount_dashboard
from .signatures import Secret, parse_secrets
from .throttle import AuthThrottle
from .waits import PER_TOKEN, ResultWaits

log = logging.getLogger("jobtrail.web")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_REQUEST = 2 * 1024 * 1024  # any request body; payloads have their own (App) limit
WEBHOOK_MAX_BODY = 1024 * 1024
RETRY_AFTER = "5"
#: The answer on a store without the schema (its URL stays in the server's log).
NO_SCHEMA = "the task store has no jobtrail schema; nothing was stored (run `jobtrail migrate`)"


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
    """Whether ``exc`` means the store could not be reached (or was busy): a 503."""
    from ..store import failures

    return failures.unreachable(exc)


def _json(status: int, body: dict[str, Any], **headers: str) -> JSONResponse:
    return JSONResponse(jsonable_encoder(body), status_code=status, headers=headers or None)


def create_app(
    app: App,
    tokens: str | Sequence[Token] | None = None,
    webhook_secrets: str | dict[str, list[Secret]] | None = None,
    *,
    webhook_max_body: int = WEBHOOK_MAX_BODY,
    secure_cookies: bool | None = None,
    allowed_hosts: str | Sequence[str] | None = None,
    result_waits_per_token: int = PER_TOKEN,
) -> FastAPI:
    """The HTTP API over ``app``. ``tokens`` / ``webhook_secrets`` take the env-variable
    syntax (or parsed values); ``None`` reads ``JOBTRAIL_TOKENS`` / ``JOBTRAIL_WEBHOOK_SECRETS``.
    ``secure_cookies``: mark the session cookie ``Secure`` always (``True``), never
    (``False``), or when the request came over HTTPS (``None``). ``allowed_hosts``: the
    ``Host`` names answered (``hosts.allowed_hosts``: ``None`` reads ``JOBTRAIL_ALLOWED_HOSTS``;
    unset, only loopback names without tokens and any name with them).
    ``result_waits_per_token``: result waits (``/result?timeout=``) one token may have at once.

    Every request passes, outermost first: the security headers, the ``Host`` check (DNS rebinding),
    the throttle on failed tokens, the dashboard's origin rule and the body limit —
    all before a route reads a byte of the body or looks at a token."""
    web = FastAPI(
        title="jobtrail",
        summary="Durable background tasks whose every state can be explained.",
        version="0.1.0",
    )
    web.state.jobtrail = app
    web.state.tokens = _tokens(tokens)
    hosts = allowed_hosts_for(allowed_hosts, has_tokens=bool(web.state.tokens))
    web.state.webhook_secrets = _secrets(webhook_secrets)
    web.state.webhook_max_body = webhook_max_body
    web.state.result_waits = ResultWaits(app, per_token=result_waits_per_token)
    web.state.metrics = Metrics(app, waits=web.state.result_waits.__len__)
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
    web.add_middleware(HostGuard, hosts=hosts)
    web.add_middleware(SecurityHeaders)

    @web.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    def metrics(who: api.Reader) -> Response:
        """Prometheus text exposition (names in the README, "## HTTP")."""
        api.untenanted(who)
        body = generate_latest(web.state.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return web


def _errors(web: FastAPI) -> None:
    """One error shape for every 4xx/5xx answer: ``{"error": "<message naming the field>"}``
    (with ``fields`` for a request that failed validation, ``task_id`` / ``current_state``
    where they apply), described so in the OpenAPI document. Bad input is a 4xx; a store
    that cannot be reached or cannot write is a 503 with ``Retry-After``; nothing is a bare
    500 page."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from ..store import failures

    @web.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [_field_error(e) for e in exc.errors()]
        text = "; ".join(f["message"] for f in fields[:5]) or "invalid request"
        if len(fields) > 5:
            text += f"; and {len(fields) - 5} more"
        return _json(422, {"error": text, "fields": fields})

    @web.exception_handler(TaskNotFound)
    async def not_found(_: Request, exc: TaskNotFound) -> JSONResponse:
        return _json(404, {"error": _text(exc)})

    @web.exception_handler(IdempotencyConflict)
    async def conflict(_: Request, exc: IdempotencyConflict) -> JSONResponse:
        return _json(409, {"error": _text(exc), "task_id": exc.task_id})

    @web.exception_handler(IllegalTransition)
    async def illegal(_: Request, exc: IllegalTransition) -> JSONResponse:
        body = {"error": _text(exc), "task_id": exc.task_id, "current_state": exc.current_state}
        return _json(409, body)

    @web.exception_handler(TaskFailed)
    async def task_failed(_: Request, exc: TaskFailed) -> JSONResponse:
        # a dead or cancelled task has no result and never will
        body = {
            "error": _text(exc),
            "task_id": exc.task.id,
            "current_state": exc.state.value,
            "reason": exc.reason,
            "category": exc.category,
        }
        return _json(409, body)

    @web.exception_handler(UnknownKind)
    async def unknown_kind(_: Request, exc: UnknownKind) -> JSONResponse:
        return _json(422, {"error": _text(exc)})

    @web.exception_handler(ValueError)
    async def bad_value(_: Request, exc: ValueError) -> JSONResponse:
        text = _text(exc)
        return _json(413 if "the limit is" in text else 422, {"error": text})

    @web.exception_handler(TypeError)
    async def bad_type(_: Request, exc: TypeError) -> JSONResponse:
        return _json(422, {"error": _text(exc)})

    @web.exception_handler(OverflowError)
    async def overflow(_: Request, exc: OverflowError) -> JSONResponse:
        # the checks before the store bound every number; this is the net under them
        log.warning("number out of range: %s", exc)
        return _json(422, {"error": "a number or time in the request is out of range"})

    @web.exception_handler(psycopg.DataError)
    async def bad_data(_: Request, exc: psycopg.DataError) -> JSONResponse:
        # the same net for a value PostgreSQL refuses (out of range, untranslatable text)
        log.warning("store refused a value: %s", type(exc).__name__)
        first = (_text(exc).strip().splitlines() or [type(exc).__name__])[0]
        return _json(422, {"error": f"the store refused a value in the request: {first}"})

    @web.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _json(exc.status_code, {"error": _text(exc.detail)}, **(exc.headers or {}))

    async def store_error(_: Request, exc: Exception) -> JSONResponse:
        if failures.cannot_write(exc):
            log.error("store cannot write: %s", _first_line(exc))
            return _json(503, {"error": failures.CANNOT_WRITE}, **{"Retry-After": WRITE_RETRY})
        if isinstance(exc, SchemaMissing):  # the store answers but was never migrated
            log.error("store unusable: %s", exc)
            return _json(503, {"error": NO_SCHEMA}, **{"Retry-After": RETRY_AFTER})
        if is_unreachable(exc):
            # the outage itself is logged once by the store's notice (store/outage.py)
            log.debug("store unavailable: %s", type(exc).__name__)
            return _json(503, {"error": failures.UNREACHABLE}, **{"Retry-After": RETRY_AFTER})
        log.error("store error: %s", type(exc).__name__)
        return _json(500, {"error": f"store error: {type(exc).__name__}"})

    for kind in (
        StoreUnavailable,
        sqlite3.OperationalError,
        psycopg.OperationalError,
        psycopg.errors.ReadOnlySqlTransaction,
        PoolTimeout,
    ):
        web.add_exception_handler(kind, store_error)

    @web.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        # Starlette still re-raises it after this answer, so the server log has the traceback
        return _json(500, {"error": f"internal error: {type(exc).__name__}"})

    plain_openapi = web.openapi

    def openapi() -> dict[str, Any]:
        if web.openapi_schema is None:
            _one_error_shape(plain_openapi())
        return web.openapi_schema or {}

    web.openapi = openapi  # type: ignore[method-assign]


#: A full or read-only store is not back in a few seconds
WRITE_RETRY = "30"
_WHERE = {"query": "query parameter ", "path": "path parameter ", "header": "header "}
_FASTAPI_422 = "#/components/schemas/HTTPValidationError"


def _field_error(error: Any) -> dict[str, str]:
    """One of pydantic's validation errors as ``{"field", "in", "message"}``, the message
    naming the field and never repeating the input (it may be huge or hostile)."""
    loc = [_text(part) for part in error.get("loc", ())]
    where = loc[0] if loc else "body"
    path = loc[1:] if where in ("body", "query", "path", "header", "cookie") else loc
    kind = str(error.get("type", ""))
    if kind == "json_invalid":
        at = f" at character {path[0]}" if path else ""
        detail = (error.get("ctx") or {}).get("error") or "JSON decode error"
        message = f"the body is not valid JSON: {detail}{at}"
        return {"field": "body", "in": "body", "message": message}
    field = ".".join(path) or where
    message = _text(error.get("msg", "invalid"))
    if kind == "string_unicode":  # a lone surrogate, which no store can encode
        message = "is not valid Unicode text (a lone surrogate)"
        return {"field": field, "in": where, "message": f"{field} {message}"}
    if kind == "value_error":  # our own checks, which name the field already
        message = message.removeprefix("Value error, ")
        if path and message.startswith(path[-1] + " "):
            return {"field": field, "in": where, "message": message}
    return {"field": field, "in": where, "message": f"{_WHERE.get(where, '')}{field}: {message}"}


def _one_error_shape(schema: dict[str, Any]) -> None:
    """Point FastAPI's default 422 answers (``HTTPValidationError``) at ``ErrorOut``, which
    is what ``_errors`` sends."""
    from .schemas import ErrorOut

    error_ref = "#/components/schemas/ErrorOut"
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                media = response.get("content", {}).get("application/json", {})
                if media.get("schema", {}).get("$ref") == _FASTAPI_422:
                    media["schema"] = {"$ref": error_ref}
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    if "ErrorOut" not in components:  # pragma: no cover - the API routes always name it
        extra = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(extra.pop("$defs", {}))
        components["ErrorOut"] = extra
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)


def _text(value: object) -> str:
    """``str(value)`` that JSON can always carry: a lone surrogate (from a hostile body that
    an error message repeats) becomes its ``\\udXXX`` escape instead of failing the answer."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _first_line(exc: BaseException) -> str:
    text = _text(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
