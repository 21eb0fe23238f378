"""The dashboard's pages and form actions (issue 5), server-rendered with Jinja2.

Every read goes through public ``App`` methods; every action through the same audited calls
the CLI uses (``cancel``, ``replay``, ``replay_dead``, ``pause``, ``resume``), each asking for
the operator (``by``) and a note. ``authorize(request, action)`` (action ``"read"`` or ``"act"``)
may raise ``HTTPException`` and returns the caller's tenant (or ``None`` for all tenants): a
tenant-bound caller sees only that tenant's tasks and not the cross-tenant pages.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from ...app import App
from ...app.replays import DEFAULT_BATCH_TIMEOUT
from ...app.search import SCAN, SELECTION_MAX
from ...core import explain, replays
from ...core.results import raising_frame
from ...model import i18n
from ...model.errors import IllegalTransition, TaskNotFound
from ...model.machine import State
from ...model.models import Task, iso
from ...model.timeparse import looks_like_duration, parse_duration, parse_time
from . import life
from .bulk import BulkJobs
from .charts import activity_chart
from .origin import refusal

Authorize = Callable[[Request, str], str | None]

HERE = Path(__file__).parent
STATIC = {
    "htmx.min.js": "text/javascript",
    "live.js": "text/javascript",
    "dashboard.css": "text/css",
}
PAGE_SIZE = 50
#: the header's counts stop here ("10000+"): a million-row count would hold up the page
COUNT_CAP = 10_000
PREVIEW_LIMIT = 500
#: The newest dead tasks of each group the dead-letter page shows with their evidence, and the
#: newest replay runs it lists (docs/dashboard.md, "Pages": a group's evidence is its newest
#: tasks' own error text, input reference and provider ids).
EVIDENCE_TASKS = 5
RUNS_SHOWN = 20
PAYLOAD_LIMIT = 2000
STATS_WINDOWS = {60, 300, 900, 3600}  # health cost grows with the window's volume
CANCEL_OUTCOMES = {"cancelled", "cancel_requested", "already_terminal", "too_late"}
DONE_CODES = CANCEL_OUTCOMES | {"replayed", "paused", "resumed"}
ACTIONABLE_CANCEL = {State.QUEUED, State.LEASED, State.WAITING, State.AWAITING_RECEIPT}

templates = Jinja2Templates(directory=str(HERE / "templates"))


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return iso(value if value.tzinfo else value.replace(tzinfo=UTC))
    return "" if value is None else str(value)


def _age(seconds: Any) -> str:
    if seconds is None:
        return "–"
    if isinstance(seconds, str):
        return seconds
    s = int(float(seconds))
    if s < 60:
        return f"{float(seconds):.1f}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def _json(value: Any, limit: int = PAYLOAD_LIMIT) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _urlpart(value: Any) -> str:
    """A name as one URL path segment or query value: every reserved character encoded
    (``/``, ``?``, ``#``, ``&``, ``%``…), so a name can never become another path or action."""
    return quote(str(value), safe="")


templates.env.filters["urlpart"] = _urlpart
templates.env.filters["when"] = _when
templates.env.filters["age"] = _age
templates.env.filters["tojson_short"] = _json


def request_lang(request: Request) -> str:
    """The page's language: ``?lang=`` (422 unless one of ours), else the ``lang`` cookie,
    else ``Accept-Language``, else English (``i18n.pick``)."""
    query = request.query_params.get("lang")
    if query is not None and query not in i18n.LANGUAGES:
        raise HTTPException(422, f"lang must be one of {', '.join(i18n.LANGUAGES)}")
    return i18n.pick(
        query, request.cookies.get(i18n.COOKIE), request.headers.get("accept-language")
    )


@pass_context
def _t(context: Any, key: str, **args: Any) -> Markup:
    """``{{ t('key', name=value) }}``: the catalog's text (ours, trusted) in the page's
    language, with every argument escaped unless it is already ``Markup``."""
    lang = context.get("lang")
    if lang not in i18n.LANGUAGES:
        request = context.get("request")
        lang = i18n.pick(
            None,
            request.cookies.get(i18n.COOKIE) if request else None,
            request.headers.get("accept-language") if request else None,
        )
    return Markup(i18n.t(key, lang)).format(**args)


templates.env.globals["t"] = _t


def _input_time(value: str | None, now: datetime, name: str) -> datetime | None:
    """An ISO 8601 time, or a duration ago (``30m``, ``2h``, ``7d``); empty → ``None``."""
    value = (value or "").strip()
    if not value:
        return None
    if looks_like_duration(value):
        return now - timedelta(seconds=parse_duration(value, name))
    return parse_time(value, name)


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


def _number(form: dict[str, str], name: str, kind: Callable[[str], Any]) -> Any:
    """An optional number field: ``None`` when left empty, a clear error when not a number."""
    value = _clean(form.get(name))
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {value[:40]!r}") from None


def _same_origin(request: Request) -> None:
    """Refuse a state-changing request another page started (``origin.refusal``). The apps
    built here also run ``OriginGuard`` over every route; this keeps the router safe when it is
    included in someone else's application."""
    why = refusal(request.method, request.scope["path"], request.url.scheme, request.headers)
    if why is not None:
        raise HTTPException(403, why)


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: v.strip() if isinstance(v, str) else "" for k, v in form.items()}


def _require(form: dict[str, str], *names: str) -> None:
    missing = [n for n in names if not form.get(n)]
    if missing:
        raise HTTPException(422, f"required: {', '.join(missing)} (who you are and why)")


class Dashboard:
    """What the routes of one ``router()`` share: the ``App`` they read and act on, the
    ``authorize`` hook of the application that includes them, and its session cookie. Each
    router binds its own to the request (``bind``, a dependency of the router that runs before
    the route's), and the routes, declared once below, receive it as ``dash: Dash``."""

    def __init__(self, app: App, authorize: Authorize | None, session_cookie: str | None) -> None:
        self.app = app
        self.authorize = authorize
        self.session_cookie = session_cookie
        self.jobs = BulkJobs()

    async def bind(self, request: Request) -> None:
        request.state.jobtrail_dashboard = self

    def allow(self, request: Request, action: str) -> str | None:
        """The caller's tenant (``None``: every tenant), or ``HTTPException`` from
        ``authorize``."""
        if self.authorize is None:
            return None
        return self.authorize(request, action)

    def whole_store(self, request: Request, action: str) -> None:
        """Refuse a tenant-bound caller a page or action that spans tenants."""
        if self.allow(request, action) is not None:
            raise HTTPException(403, "a tenant-bound token sees only its own tasks")

    def load(self, task_id: str, tenant: str | None) -> Task:
        """The task, or 404 when it is unknown or another tenant's (the same answer)."""
        try:
            task = self.app.get(task_id)
        except TaskNotFound:
            raise HTTPException(404, f"no task {task_id}") from None
        if tenant is not None and task.tenant != tenant:
            raise HTTPException(404, f"no task {task_id}")
        return task

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        """The template ``name`` in the request's language, with the header's context."""
        signed_in = self.session_cookie is not None and self.session_cookie in request.cookies
        lang = request_lang(request)
        other = "zh" if lang == "en" else "en"
        query = [(k, v) for k, v in request.query_params.multi_items() if k != "lang"]
        switch_url = request.url.path + "?" + urlencode([*query, ("lang", other)])
        response = templates.TemplateResponse(
            request,
            name,
            {
                "nav": name.split(".")[0],
                "signed_in": signed_in,
                "lang": lang,
                "other_lang": other,
                "switch_url": switch_url,
                **context,
            },
            status_code=status,
        )
        if request.query_params.get("lang") in i18n.LANGUAGES:  # the switch: it sticks
            response.set_cookie(
                i18n.COOKIE, lang, max_age=i18n.COOKIE_MAX_AGE, httponly=True, samesite="lax"
            )
        return response

    def preview_context(self, params: dict[str, str | None]) -> dict[str, Any]:
        now = self.app.db_now()
        try:
            since = _input_time(params.get("since"), now, "since")
            until = _input_time(params.get("until"), now, "until")
            result = self.app.dead_preview(
                reason=_clean(params.get("reason")),
                kind=_clean(params.get("kind")),
                since=since,
                until=until,
                limit=PREVIEW_LIMIT + 1,
            )
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        chosen = result["tasks"][:PREVIEW_LIMIT]
        return {
            "preview": chosen,
            "effects": result["effects"],
            "truncated": len(result["tasks"]) > PREVIEW_LIMIT,
            "frozen_until": iso(result["until"]),
            "since_iso": iso(since) if since else "",
            "params": params,
        }


async def current(request: Request) -> Dashboard:
    """The ``Dashboard`` the matched route's router bound to this request."""
    dash = getattr(request.state, "jobtrail_dashboard", None)
    if not isinstance(dash, Dashboard):
        raise RuntimeError("a dashboard route was reached outside a router() of its own")
    return dash


Dash = Annotated[Dashboard, Depends(current)]
#: Every page and action, declared once; ``router()`` (at the end) includes them under its
#: own binding.
routes = APIRouter(include_in_schema=False)


@routes.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise HTTPException(404, "no such file")
    return FileResponse(HERE / "static" / name, media_type=STATIC[name])


# -- tasks ------------------------------------------------------------------------------
@routes.get("/", response_class=HTMLResponse)
def tasks(
    request: Request,
    dash: Dash,
    state: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    tenant: str | None = None,
    q: str | None = None,
    before: str | None = None,
) -> HTMLResponse:
    bound = dash.allow(request, "read")
    state, kind, queue, q = _clean(state), _clean(kind), _clean(queue), _clean(q)
    tenant = bound if bound is not None else _clean(tenant)
    if state is not None and state not in {s.value for s in State}:
        raise HTTPException(422, f"unknown state {state!r}")
    before = _clean(before)
    if before is not None and not before.isdigit():
        raise HTTPException(422, "before must be a task id")
    scanned_from = None
    try:
        if q is not None:
            found = dash.app.search(
                q, state=state, kind=kind, queue=queue, tenant=tenant,
                limit=PAGE_SIZE + 1, before=before,
            )  # fmt: skip
            rows, scanned_from = found["tasks"], found["scanned_from"]
        else:
            rows = dash.app.list(
                state=state, kind=kind, queue=queue, tenant=tenant,
                limit=PAGE_SIZE + 1, before=before,
            )  # fmt: skip
        if before is None and len(rows) <= PAGE_SIZE:  # the whole answer is on this page
            selection = {
                "ids": [t.id for t in rows],
                "states": dict(Counter(t.state.value for t in rows).most_common()),
                "more": False,
                "scanned_from": scanned_from,
            }
        else:  # what "all matching" would take: read again, up to SELECTION_MAX
            selection = dash.app.search_states(
                q or "", state=state, kind=kind, queue=queue, tenant=tenant, cap=SELECTION_MAX
            )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    filters = {"state": state, "kind": kind, "queue": queue, "tenant": tenant, "q": q}
    keep = {k: v for k, v in filters.items() if v}
    next_url = "/?" + urlencode({**keep, "before": rows[-1].id}) if more and rows else None
    return dash.page(
        request,
        "tasks.html",
        tasks=rows,
        counts=dash.app.state_counts(upto=COUNT_CAP + 1) if bound is None else None,
        count_cap=COUNT_CAP,
        states=[s.value for s in State],
        # queue names span tenants (like /api/queues): a tenant-bound caller types one
        queues=[x["queue"] for x in dash.app.queues()] if bound is None else [],
        kinds=dash.app.kinds,
        filters=filters,
        next_url=next_url,
        first_url=("/?" + urlencode(keep)) if before else None,
        tenant_bound=bound is not None,
        selection=selection,
        bulk_actions=["cancel", "replay", "dismiss"],
        selection_max=SELECTION_MAX,
        scanned_from=scanned_from,
        scan=SCAN,
    )


# -- one task ---------------------------------------------------------------------------
@routes.get("/tasks/{task_id}", response_class=HTMLResponse)
def task_page(request: Request, dash: Dash, task_id: str, done: str | None = None) -> HTMLResponse:
    bound = dash.allow(request, "read")
    lang = request_lang(request)
    task = dash.load(task_id, bound)
    transitions = dash.app.transitions(task.id)
    steps = dash.app.steps(task.id)
    confirmed = any(st["effect"] and st["status"] == "confirmed" for st in steps)
    timeline = [
        {
            "t": t,
            "sentence": explain.transition_sentence(t, lang, confirmed),
            "state_name": explain.STATE_NAMES[lang].get(t.to_state, t.to_state.value),
            "frame": raising_frame(t.traceback),
        }
        for t in transitions
    ]
    live = dash.app.why_not_running(task.id, lang)
    phases = life.phases(transitions, live["now"])
    parent = None
    if task.parent_id is not None:
        try:
            parent = dash.app.get(task.parent_id)
        except TaskNotFound:  # pruned
            parent = None
    return dash.page(
        request,
        "task.html",
        task=task,
        timeline=timeline,
        why=live["why"],
        details=live["details"],
        now=live["now"],
        state_name=explain.STATE_NAMES[lang].get(task.state, task.state.value),
        reason_sentence=explain.sentence(task.last_reason, lang) if task.last_reason else "",
        steps=steps,
        # the timeline's loop names each transition ``t``: its labels come in as values
        show_result=task.state is State.SUCCEEDED and task.result is not None,
        label_raised_at=i18n.t("task.raised_at", lang),
        label_traceback=i18n.t("task.traceback", lang),
        outbox=dash.app.outbox(task.id),
        children=dash.app.children(task.id),
        parent=parent,
        done=done if done in DONE_CODES else None,
        can_cancel=task.state in ACTIONABLE_CANCEL,
        can_replay=task.state is State.DEAD,
        life_svg=Markup(life.svg(phases, lang, life.ending(transitions))),
        life_end=(
            life.describe_end(end, phases[0] if phases else None, lang)
            if (end := life.ending(transitions))
            else None
        ),
        life_items=[life.describe(p, lang) for p in phases],
        life_kinds=[p.kind for p in phases],
    )


@routes.post("/tasks/{task_id}/cancel")
async def cancel(request: Request, dash: Dash, task_id: str) -> Response:
    _same_origin(request)
    task = dash.load(task_id, dash.allow(request, "act"))
    form = await _form(request)
    _require(form, "by", "note")
    result = dash.app.cancel(task.id, by=form["by"], note=form["note"])
    lang = form.get("lang") if form.get("lang") in explain.LANGUAGES else "en"
    query = urlencode({"done": result.outcome, "lang": lang})
    return RedirectResponse(f"/tasks/{task.id}?{query}", status_code=303)


@routes.post("/tasks/{task_id}/replay")
async def replay(request: Request, dash: Dash, task_id: str) -> Response:
    _same_origin(request)
    task = dash.load(task_id, dash.allow(request, "act"))
    form = await _form(request)
    _require(form, "by", "note")
    try:
        dash.app.replay(
            task.id, by=form["by"], note=form["note"], from_step=form.get("from_step") or None
        )
    except IllegalTransition as exc:
        raise HTTPException(409, str(exc)) from None
    lang = form.get("lang") if form.get("lang") in explain.LANGUAGES else "en"
    query = urlencode({"done": "replayed", "lang": lang})
    return RedirectResponse(f"/tasks/{task.id}?{query}", status_code=303)


# -- queues -----------------------------------------------------------------------------
@routes.get("/queues", response_class=HTMLResponse)
def queues(
    request: Request, dash: Dash, done: str | None = None, q: str | None = None, window: int = 300
) -> HTMLResponse:
    dash.whole_store(request, "read")
    if window not in STATS_WINDOWS:
        raise HTTPException(422, f"window must be one of {sorted(STATS_WINDOWS)} seconds")
    stats = dash.app.stats(window=float(window))
    activity = dash.app.activity()
    lang = request_lang(request)
    charts = {
        name: Markup(
            activity_chart(v["arrivals"], v["completions"], activity["bucket"], lang, name)
        )
        for name, v in activity["queues"].items()
    }
    live_workers = dash.app.workers()
    totals = {
        name: (sum(v["arrivals"]), sum(v["completions"])) for name, v in activity["queues"].items()
    }
    return dash.page(
        request,
        "queues.html",
        stats=stats,
        # a queued count at its bound (shown "N+"): the page says what N+ means
        at_least=any(q["at_least"] for q in stats["queues"]),
        windows=sorted(STATS_WINDOWS),
        queues=dash.app.queues(),
        charts=charts,
        totals=totals,
        activity=activity,
        done=done if done in DONE_CODES else None,
        done_queue=q,
        serving={
            x["queue"]: [w for w in live_workers if x["queue"] in w.queues]
            for x in dash.app.queues()
        },
    )


@routes.get("/queues/{queue:path}", response_class=HTMLResponse)
def queue_page(request: Request, dash: Dash, queue: str) -> HTMLResponse:
    """One queue: its state, the live workers that serve it and its activity chart."""
    dash.whole_store(request, "read")
    found = [x for x in dash.app.queues() if x["queue"] == queue]
    serving = [w for w in dash.app.workers() if queue in w.queues]
    if not found and not serving:
        raise HTTPException(404, f"no queue {queue[:80]!r}: no task and no live worker")
    lang = request_lang(request)
    activity = dash.app.activity()
    mine = activity["queues"].get(queue)
    chart = (
        Markup(
            activity_chart(mine["arrivals"], mine["completions"], activity["bucket"], lang, queue)
        )
        if mine
        else None
    )
    shown = found[0] if found else {"queue": queue, "paused": False}
    return dash.page(request, "queue.html", queue=shown, serving=serving, chart=chart)


# ``path``: a queue name may hold "/" (sent as %2F, which the server decodes before routing)
@routes.post("/queues/{queue:path}/{action}")
async def queue_action(request: Request, dash: Dash, queue: str, action: str) -> Response:
    _same_origin(request)
    dash.whole_store(request, "act")
    if action not in ("pause", "resume"):
        raise HTTPException(404, "unknown queue action")
    form = await _form(request)
    _require(form, "by", "note")
    try:
        if action == "pause":
            dash.app.pause(queue, by=form["by"], note=form["note"])
        else:
            dash.app.resume(queue, by=form["by"], note=form["note"])
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    done = "paused" if action == "pause" else "resumed"
    return RedirectResponse("/queues?" + urlencode({"done": done, "q": queue}), 303)


# -- dead letters -----------------------------------------------------------------------
@routes.get("/dead", response_class=HTMLResponse)
def dead(
    request: Request,
    dash: Dash,
    reason: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    preview: str | None = None,
) -> HTMLResponse:
    dash.whole_store(request, "read")
    params = {"reason": reason, "kind": kind, "since": since, "until": until}
    extra = dash.preview_context(params) if preview else {"preview": None, "params": params}
    lang = request_lang(request)
    runs = [
        {
            **r,
            "outcome": replays.outcome(r, lang),
            "state_text": i18n.t(replays.STATE_KEYS[r["state"]], lang),
            "filter_text": replays.filter_text(r["filter"]),
        }
        for r in dash.app.replay_runs(limit=RUNS_SHOWN)
    ]
    return dash.page(
        request,
        "dead.html",
        groups=dash.app.dead(tasks=EVIDENCE_TASKS),
        runs=runs,
        bulk_actions=["replay", "dismiss"],
        # "select all": every dead task (the newest SELECTION_MAX), as the list's state=dead
        selection=dash.app.search_states("", state="dead", cap=SELECTION_MAX),
        selection_max=SELECTION_MAX,
        selection_state=State.DEAD.value,
        **extra,
    )


@routes.get("/dead/preview", response_class=HTMLResponse)
def dead_preview(
    request: Request,
    dash: Dash,
    reason: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> HTMLResponse:
    dash.whole_store(request, "read")
    params = {"reason": reason, "kind": kind, "since": since, "until": until}
    return dash.page(request, "_preview.html", **dash.preview_context(params))


@routes.post("/dead/replay", response_class=HTMLResponse)
async def dead_replay(request: Request, dash: Dash) -> HTMLResponse:
    """Start a *detached* replay run: this request takes its first step and answers; the
    workers' sweep replays the rest batch by batch (an HTTP request cannot wait for a run
    that settles batch after batch for minutes)."""
    _same_origin(request)
    dash.whole_store(request, "act")
    form = await _form(request)
    _require(form, "by", "note", "until", "limit")
    try:  # the first step replays up to a batch: off the event loop
        timeout = _number(form, "batch_timeout", float)
        started = await run_in_threadpool(
            dash.app.start_replay_run,
            reason=_clean(form.get("reason")),
            kind=_clean(form.get("kind")),
            since=_clean(form.get("since")),
            until=form["until"],
            limit=int(form["limit"]),
            per_second=_number(form, "per_second", float),
            batch_size=_number(form, "batch_size", int),
            stop_after_failures=_number(form, "stop_after_failures", int),
            batch_timeout=DEFAULT_BATCH_TIMEOUT if timeout is None else timeout,
            by=form["by"],
            note=form["note"],
        )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    lang = request_lang(request)
    run = {
        **started,
        "outcome": replays.outcome(started, lang),
        "running": started["state"] == replays.RUNNING,
    }
    return dash.page(request, "replayed.html", results=started["touched"], form=form, run=run)


# -- cron -------------------------------------------------------------------------------
@routes.get("/cron", response_class=HTMLResponse)
def cron(request: Request, dash: Dash) -> HTMLResponse:
    dash.whole_store(request, "read")
    schedules = dash.app.schedules()
    windows = {s["kind"]: dash.app.cron_windows(s["kind"], limit=10) for s in schedules}
    skipped = {
        s["kind"]: dash.app.cron_windows(s["kind"], limit=20, state="skipped") for s in schedules
    }
    return dash.page(request, "cron.html", schedules=schedules, windows=windows, skipped=skipped)


# -- workers (docs/dashboard.md, "Pages") ------------------------------------------------
@routes.get("/workers", response_class=HTMLResponse)
def workers(request: Request, dash: Dash) -> HTMLResponse:
    # every reader sees the live workers; a tenant-bound one only its tenant's tasks
    tenant = dash.allow(request, "read")
    return dash.page(request, "workers.html", workers=dash.app.workers(tenant=tenant))


def router(
    app: App, *, authorize: Authorize | None = None, session_cookie: str | None = None
) -> APIRouter:
    """The dashboard's routes for ``app``: pages ``/``, ``/tasks/{id}``, ``/queues``, ``/dead``,
    ``/cron``, ``/workers``, their form actions, and ``/static/...``. With ``session_cookie``
    (the cookie a ``/login`` of the including app sets) a page read with that cookie offers
    "Sign out", a POST to ``/logout`` that the including app must serve."""
    dash = Dashboard(app, authorize, session_cookie)
    r = APIRouter(include_in_schema=False, dependencies=[Depends(dash.bind)])
    # each route added itself (not ``include_router``, whose result newer FastAPI keeps as one
    # opaque entry): ``r.routes`` lists the pages, and ``bind`` comes first in each
    for route in routes.routes:
        assert isinstance(route, APIRoute)
        r.add_api_route(
            route.path,
            route.endpoint,
            methods=sorted(route.methods or ()),
            response_class=route.response_class,
            name=route.name,
            include_in_schema=False,
        )
    return r
