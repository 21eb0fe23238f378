"""The JSON API routes (docs/http.md). Endpoints are plain ``def``: FastAPI runs them in its
threadpool, so jobtrail's synchronous store calls never block the event loop. The one exception
is the result route, whose wait is a future on the loop (``waits.py``) and whose reads go to
the threadpool.

Tenant rule: a tenant-bound token sees only its tenant — another tenant's task answers 404
exactly like an unknown id, lists are filtered to its tenant, an enqueue is forced into its
tenant (naming another tenant in the body is 403), and the cross-tenant queue views
(``/api/queues``, pause, resume, ``/metrics``) answer 403. ``/api/workers`` lists every live
worker to any token, with only the token's tenant's tasks in each worker's ``tasks``.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from ..app import App
from ..model.errors import TaskNotFound
from ..model.machine import TERMINAL, State
from ..model.models import Task, iso
from ..model.validate import MAX_LIMIT
from . import schemas as s
from .auth import Principal, Token, authenticate
from .waits import RETRY_AFTER, ResultWaits, TooManyWaits, token_key

bearer = HTTPBearer(auto_error=False, description="JOBTRAIL_TOKENS token")
router = APIRouter()
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorOut} for code in (401, 403, 404, 409, 413, 422, 503)
}


def the_app(request: Request) -> App:
    app: App = request.app.state.jobtrail
    return app


def principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    tokens: list[Token] = request.app.state.tokens
    header = f"Bearer {creds.credentials}" if creds else None
    found = authenticate(tokens, header)
    if found is None:
        raise HTTPException(
            401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
        )
    return found


def actor(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.admin:
        raise HTTPException(403, "this token may read only; acting needs an admin token")
    return who


def untenanted(who: Principal) -> None:
    if who.tenant is not None:
        raise HTTPException(403, "queue views span tenants; a tenant-bound token may not use them")


Reader = Annotated[Principal, Depends(principal)]
Actor = Annotated[Principal, Depends(actor)]
Jobtrail = Annotated[App, Depends(the_app)]
TaskId = Annotated[str, Path(description="the task id", examples=["1"])]
Queue = Annotated[str, Path(description="a queue name", examples=["default"])]


def plain(value: Any) -> Any:
    """Times in the one output form (``models.iso``) inside dicts and lists."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def visible(app: App, who: Principal, task_id: str) -> Task:
    task = app.get(task_id)
    if who.tenant is not None and task.tenant != who.tenant:
        raise TaskNotFound(task_id)  # never say that it exists
    return task


@router.post(
    "/api/tasks",
    status_code=201,
    response_model=s.AcceptedTaskOut,
    responses={200: {"model": s.AcceptedTaskOut, "description": "existing task"}, **ERRORS},
)
def enqueue(
    body: s.EnqueueBody,
    response: Response,
    app: Jobtrail,
    who: Actor,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> dict[str, Any]:
    """Store a task (201 new, 200 an existing task under the same Idempotency-Key)."""
    tenant = body.tenant or ""
    if who.tenant is not None:
        if body.tenant not in (None, who.tenant):
            raise HTTPException(403, "this token may only enqueue for its own tenant")
        tenant = who.tenant
    task = app.enqueue(
        body.kind,
        body.payload,
        idempotency_key=idempotency_key,
        tenant=tenant,
        queue=body.queue,
        priority=body.priority,
        delay=body.delay,
        run_at=body.run_at,
        debounce_key=body.debounce_key,
        debounce=body.debounce,
        debounce_max=body.debounce_max,
        unique_for=body.unique_for,
        unique_while=body.unique_while,
        expires_in=body.expires_in,
        expires_at=body.expires_at,
        wait_for_disk=body.wait_for_disk,
    )
    response.status_code = 201 if task.created else 200
    response.headers["Location"] = f"/api/tasks/{task.id}"
    wait = poll_after(task, task.updated_at if task.created else app.db_now())
    response.headers["Retry-After"] = str(wait)
    return {**task.to_dict(), "poll_after": wait}


def poll_after(task: Task, now: datetime) -> int:
    """Whole seconds until a look at the task can show progress: 0 for a finished task, the
    time until it is due for a delayed one, else 1 (by the database clock)."""
    if State(task.state) in TERMINAL:
        return 0
    due = (task.run_at - now).total_seconds() if task.run_at is not None else 0.0
    return max(1, math.ceil(due))


@router.get("/api/tasks", response_model=s.TaskList, responses=ERRORS)
def list_tasks(
    app: Jobtrail,
    who: Reader,
    state: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    tenant: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$")] = None,
) -> dict[str, Any]:
    """Tasks newest first; page with ``before`` = the last id seen (``next_before``)."""
    if who.tenant is not None:
        if tenant not in (None, who.tenant):
            return {"tasks": [], "next_before": None}
        tenant = who.tenant
    tasks = list(
        app.list(state=state, kind=kind, queue=queue, tenant=tenant, limit=limit, before=before)
    )
    more = tasks[-1].id if len(tasks) == limit else None
    return {"tasks": [t.to_dict() for t in tasks], "next_before": more}


@router.get("/api/tasks/{task_id}", response_model=s.TaskOut, responses=ERRORS)
def get_task(task_id: TaskId, app: Jobtrail, who: Reader) -> dict[str, Any]:
    return visible(app, who, task_id).to_dict()


@router.get(
    "/api/tasks/{task_id}/transitions", response_model=list[s.TransitionOut], responses=ERRORS
)
def transitions(task_id: TaskId, app: Jobtrail, who: Reader) -> list[dict[str, Any]]:
    visible(app, who, task_id)
    return [t.to_dict() for t in app.transitions(task_id)]


#: The longest a result request waits (``timeout``). A waiting request holds no request
#: thread and no connection of its own (``waits.py``).
MAX_RESULT_WAIT = 30.0


@router.get(
    "/api/tasks/{task_id}/result",
    response_model=s.ResultOut,
    responses={
        202: {"model": s.ResultOut, "description": "not finished yet"},
        429: {"model": s.ErrorOut, "description": "this token has its waits already"},
        **ERRORS,
    },
)
async def result(
    task_id: TaskId,
    request: Request,
    response: Response,
    app: Jobtrail,
    who: Reader,
    timeout: Annotated[
        float,
        Query(ge=0, le=MAX_RESULT_WAIT, description="seconds to wait for the task to finish"),
    ] = 0.0,
) -> dict[str, Any]:
    """The return value of a succeeded task (200), waiting up to ``timeout`` seconds (at most
    30) for it to finish; 202 with ``Retry-After`` when it has not; 409 (``current_state``,
    ``reason``, ``category``) for a dead or cancelled task; 429 with ``Retry-After`` when
    the token already has its waits (10 at once by default)."""
    task_id = (await run_in_threadpool(visible, app, who, task_id)).id
    if timeout > 0:
        waits: ResultWaits = request.app.state.result_waits
        key = token_key(request.headers.get("authorization"))
        try:
            await waits.wait(key, task_id, timeout)
        except TooManyWaits:
            raise HTTPException(
                429,
                f"this token already waits for {waits.per_token} results; ask again later "
                "(or without timeout)",
                headers={"Retry-After": str(RETRY_AFTER)},
            ) from None
    return await run_in_threadpool(_result_now, app, task_id, response)


def _result_now(app: App, task_id: str, response: Response) -> dict[str, Any]:
    try:
        value = app.result(task_id)
    except TimeoutError:
        task = app.get(task_id)
        if not task.terminal:
            wait = poll_after(task, app.db_now())
            response.status_code = 202
            response.headers["Retry-After"] = str(wait)
            return {
                "task_id": task.id,
                "state": task.state.value,
                "finished": False,
                "poll_after": wait,
            }
        value = app.result(task_id)  # it finished just now
    return {
        "task_id": task_id,
        "state": State.SUCCEEDED.value,
        "finished": True,
        "result": value,
        "poll_after": 0,
    }


@router.get("/api/tasks/{task_id}/explain", response_model=s.Explanation, responses=ERRORS)
def explain(
    task_id: TaskId,
    app: Jobtrail,
    who: Reader,
    lang: Annotated[str, Query(pattern="^(en|zh)$")] = "en",
) -> dict[str, Any]:
    task = visible(app, who, task_id)
    return {"task_id": task.id, "lang": lang, "text": app.explain(task.id, lang=lang)}


@router.post("/api/tasks/{task_id}/cancel", response_model=s.CancelOut, responses=ERRORS)
def cancel(task_id: TaskId, body: s.ActBody, app: Jobtrail, who: Actor) -> dict[str, Any]:
    task = visible(app, who, task_id)
    return app.cancel(task.id, by=body.by, note=body.note).to_dict()


@router.post("/api/tasks/{task_id}/replay", response_model=s.TaskOut, responses=ERRORS)
def replay(task_id: TaskId, body: s.ReplayBody, app: Jobtrail, who: Actor) -> dict[str, Any]:
    """Replay a dead task (409 for any other); with ``from_step`` the handler resumes at that
    step (422 naming it when the task recorded no such step; nothing is written)."""
    task = visible(app, who, task_id)
    return app.replay(task.id, by=body.by, note=body.note or "", from_step=body.from_step).to_dict()


@router.get(
    "/api/tasks/{task_id}/replay-preview", response_model=s.ReplayPreviewOut, responses=ERRORS
)
def replay_preview(
    task_id: TaskId,
    app: Jobtrail,
    who: Reader,
    from_step: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="preview a replay from this step"),
    ] = None,
) -> dict[str, Any]:
    """What a replay of the task would do (with ``from_step``: the steps it forgets), and the
    effects it would perform again or skip. Changes nothing."""
    task = visible(app, who, task_id)
    result = app.replay_preview(task.id, from_step=from_step)
    return {
        "task_id": task.id,
        "state": result["task"].state.value,
        "replayable": result["replayable"],
        "from_step": result["from_step"],
        "forgotten": result["forgotten"],
        "effects": plain(result["effects"]),
    }


@router.post("/api/events", response_model=s.EventOut, responses=ERRORS)
def send_event(body: s.EventBody, app: Jobtrail, who: Actor) -> dict[str, Any]:
    """Send an event: it is stored (the first payload for a key wins) and every task of the
    tenant waiting for its key resumes (``{"woken": n}``, 0 for a repeat). A tenant-bound
    token sends to its own tenant only (naming another is 403)."""
    tenant = body.tenant or ""
    if who.tenant is not None:
        if body.tenant not in (None, who.tenant):
            raise HTTPException(403, "this token may only send events to its own tenant")
        tenant = who.tenant
    return {"woken": app.send_event(body.key, body.payload, tenant=tenant)}


@router.post("/api/tasks/{task_id}/receipt", response_model=s.TaskOut, responses=ERRORS)
def receipt(task_id: TaskId, body: s.ReceiptBody, app: Jobtrail, who: Actor) -> dict[str, Any]:
    task = visible(app, who, task_id)
    done = app.confirm_receipt(
        task.id, ok=body.ok, category=body.category, error=body.error, by="http"
    )
    return done.to_dict()


@router.get("/api/queues", response_model=s.QueuesOut, responses=ERRORS)
def queues(app: Jobtrail, who: Reader) -> dict[str, Any]:
    untenanted(who)
    return {"stats": plain(app.stats()), "queues": plain(list(app.queues()))}


@router.post("/api/queues/{queue}/pause", responses=ERRORS)
def pause(queue: Queue, body: s.ActBody, app: Jobtrail, who: Actor) -> Any:
    untenanted(who)
    return plain(app.pause(queue, by=body.by, note=body.note or ""))


@router.post("/api/queues/{queue}/resume", responses=ERRORS)
def resume(queue: Queue, body: s.ActBody, app: Jobtrail, who: Actor) -> Any:
    untenanted(who)
    return plain(app.resume(queue, by=body.by, note=body.note or ""))


@router.get("/api/workers", response_model=s.WorkersOut, responses=ERRORS)
def workers(app: Jobtrail, who: Reader) -> dict[str, Any]:
    """The live workers. Any token may read them; a tenant-bound token sees only
    its own tenant's tasks in each worker's ``tasks``."""
    return {"workers": [w.to_dict() for w in app.workers(tenant=who.tenant)]}


# -- dead letters and replay runs: whole-store views, like the queues ------------
@router.get("/api/dead", response_model=s.DeadOut, responses=ERRORS)
def dead(
    app: Jobtrail,
    who: Reader,
    tasks: Annotated[
        int, Query(ge=0, le=MAX_LIMIT, description="newest dead tasks per group, with evidence")
    ] = 5,
) -> dict[str, Any]:
    untenanted(who)
    return {"groups": plain(app.dead(tasks=tasks))}


@router.post(
    "/api/replay-runs", response_model=s.ReplayRunStarted, status_code=202, responses=ERRORS
)
def start_replay_run(body: s.ReplayRunBody, app: Jobtrail, who: Actor) -> dict[str, Any]:
    """Start a detached replay run: this request takes its first step, the workers' sweep
    replays the rest batch by batch; follow it with ``GET /api/replay-runs``."""
    untenanted(who)
    if not (body.reason or body.kind or body.since or body.until):
        raise HTTPException(
            422, "a replay run needs at least one filter (reason, kind, since or until)"
        )
    started: dict[str, Any] = plain(app.start_replay_run(**body.model_dump()))
    return started


@router.get("/api/replay-runs", response_model=s.ReplayRunsOut, responses=ERRORS)
def replay_runs(
    app: Jobtrail,
    who: Reader,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="the newest runs")] = 20,
) -> dict[str, Any]:
    untenanted(who)
    return {"runs": plain(app.replay_runs(limit=limit))}
