"""The dashboard's bulk actions (``bulk.py``): ``POST /bulk`` takes the chosen tasks — ticked
rows (``id``, repeated) or "all matching the filter" (``all=1`` with the list's filters and
search, resolved again here and bounded by ``SELECTION_MAX``) — with the action, operator and
note. A replay first shows what it would do to each task's effects and asks again
(``confirm=1``, with the exact ids); then the action starts and ``/bulk/{id}`` shows it
progress. Every POST keeps the same-origin rule of the other forms."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...app.search import SELECTION_MAX
from ...model import i18n
from ...model.validate import MAX_NOTE
from .bulk import ACTION_KEYS, ACTIONS
from .routes import Dash, _clean, _require, _same_origin, request_lang, routes, templates

PREVIEW_SHOWN = 200
templates.env.globals["bulk_action_keys"] = ACTION_KEYS
#: the list's filters a bulk form carries for "all matching"
templates.env.globals["bulk_filter_names"] = ("state", "kind", "queue", "tenant", "q")


def _selected(request: Request, dash: Dash, form: dict[str, str], ids: list[str]) -> list[str]:
    """The ids the form names: its ticked rows, or everything matching its filters."""
    tenant = dash.allow(request, "act")
    if form.get("all") == "1":
        try:
            chosen = dash.app.search_states(
                form.get("q", ""),
                state=_clean(form.get("state")),
                kind=_clean(form.get("kind")),
                queue=_clean(form.get("queue")),
                tenant=tenant if tenant is not None else _clean(form.get("tenant")),
                cap=SELECTION_MAX,
            )
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        return list(chosen["ids"])
    bad = [i for i in ids if not (i.isdigit() and len(i) <= 18)]
    if bad:
        raise HTTPException(422, f"id must be a task id (digits), not {bad[0][:40]!r}")
    if len(ids) > SELECTION_MAX:
        raise HTTPException(422, f"at most {SELECTION_MAX} tasks at once")
    return list(dict.fromkeys(ids))


@routes.post("/bulk", response_class=HTMLResponse)
async def bulk(request: Request, dash: Dash) -> Response:
    _same_origin(request)
    raw = await request.form()
    ids = [v.strip() for v in raw.getlist("id") if isinstance(v, str)]
    form = {k: v.strip() for k, v in raw.items() if isinstance(v, str) and k != "id"}
    action = form.get("action", "")
    if action not in ACTIONS:
        raise HTTPException(422, f"action must be one of {', '.join(ACTIONS)}")
    _require(form, "by", "note")
    for name in ("by", "note"):
        if len(form[name]) > MAX_NOTE or "\x00" in form[name]:
            raise HTTPException(422, f"{name} must be text of at most {MAX_NOTE} characters")
    chosen = _selected(request, dash, form, ids)
    if not chosen:
        raise HTTPException(422, "no task selected: tick a task or choose all matching")
    tenant = dash.allow(request, "act")
    if action == "replay" and form.get("confirm") != "1":
        preview = dash.app.replay_effects(chosen)
        return dash.page(
            request,
            "bulk_confirm.html",
            form=form,
            ids=[t.id for t in preview["tasks"]],
            shown=preview["tasks"][:PREVIEW_SHOWN],
            effects=preview["effects"],
            not_dead=len(preview["not_dead"]),
        )
    job = dash.jobs.start(dash.app, action, chosen, form["by"], form["note"], tenant)
    lang = form.get("lang") if form.get("lang") in i18n.LANGUAGES else request_lang(request)
    return RedirectResponse(f"/bulk/{job.id}?" + urlencode({"lang": lang}), status_code=303)


@routes.get("/bulk/{job_id}", response_class=HTMLResponse)
def bulk_progress(request: Request, dash: Dash, job_id: str) -> HTMLResponse:
    tenant = dash.allow(request, "read")
    job = dash.jobs.get(job_id)
    if job is None or job.tenant != tenant:
        raise HTTPException(404, f"no bulk action {job_id[:40]} in this process")
    return dash.page(request, "bulk.html", job=job.view())
