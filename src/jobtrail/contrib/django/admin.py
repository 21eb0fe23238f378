"""A read-only admin page for jobtrail's tasks: a list (id, kind, queue, state, attempts,
updated) filterable by state and queue, and per task its fields, its transition timeline and
the ``explain`` text. Registered when ``django.contrib.admin`` discovers this app.

The pages read through each backend's own ``jobtrail.App`` (``JobtrailBackend.app``), not the
ORM: the same code then serves tasks kept in Django's database and those under
``OPTIONS["DATABASE_URL"]``, and the explanation is jobtrail's own. Nothing here writes: no
add, change or delete permission, no actions. Seeing the pages takes an active staff user with
the ``jobtrail.view_task`` permission (a superuser has it)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from ...model.errors import TaskNotFound
from ...model.machine import State
from .backend import JobtrailBackend, status_of
from .compat import task_backends
from .models import Task

#: Tasks per list page (newest first; "older" pages on by id).
PER_PAGE = 100


def jobtrail_backends() -> dict[str, JobtrailBackend]:
    """The ``TASKS`` entries that are jobtrail backends, by alias, in settings order."""
    found: dict[str, JobtrailBackend] = {}
    for alias in getattr(settings, "TASKS", {}) or {}:
        backend = task_backends[alias]
        if isinstance(backend, JobtrailBackend):
            found[alias] = backend
    return found


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):  # type: ignore[misc]
    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        # only these two pages: the ORM-backed add/change/delete/history views never exist
        view = self.admin_site.admin_view
        return [
            path("", view(self.changelist_view), name="jobtrail_task_changelist"),
            path(
                "<str:backend>/<str:task_id>/",
                view(self.task_view),
                name="jobtrail_task_change",
            ),
        ]

    # -- the pages ------------------------------------------------------------------------------
    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        backends = jobtrail_backends()
        if not backends:
            raise Http404("no TASKS entry uses jobtrail.contrib.django.JobtrailBackend")
        alias = request.GET.get("backend") or next(iter(backends))
        backend = _backend(backends, alias)
        state = request.GET.get("state") or None
        queue = request.GET.get("queue") or None
        before = request.GET.get("before") or None
        error = None
        tasks: list[Any] = []
        try:
            tasks = backend.app.list(state=state, queue=queue, before=before, limit=PER_PAGE)
        except (TypeError, ValueError) as exc:
            error = str(exc)  # a bad filter: said on the page, nothing else shown
        query = {k: v for k, v in (("backend", alias), ("state", state), ("queue", queue)) if v}
        older = None
        if len(tasks) == PER_PAGE:
            older = "?" + urlencode({**query, "before": tasks[-1].id})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "jobtrail tasks",
            "backend": alias,
            "backends": [
                {"alias": a, "url": "?" + urlencode({"backend": a}), "chosen": a == alias}
                for a in backends
            ],
            "state_choices": _choices(query, "state", state, [s.value for s in State]),
            "queue_choices": _choices(
                query, "queue", queue, sorted({*backend.queues, *([queue] if queue else [])})
            ),
            "error": error,
            "rows": [
                {
                    "task": t,
                    "url": reverse(
                        "admin:jobtrail_task_change",
                        kwargs={"backend": alias, "task_id": t.id},
                        current_app=self.admin_site.name,
                    ),
                }
                for t in tasks
            ],
            "older": older,
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            "admin/jobtrail/task/change_list.html",
            context,
            status=400 if error else 200,
        )

    def task_view(self, request: HttpRequest, backend: str, task_id: str) -> HttpResponse:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        chosen = _backend(jobtrail_backends(), backend)
        app = chosen.app
        try:
            task = app.get(task_id)
            log = app.transitions(task_id)
            explained = app.explain(task_id)
        except (TaskNotFound, TypeError, ValueError):
            raise Http404(f"no task {task_id!r} in backend {backend!r}") from None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Task {task.id}",
            "subtitle": task.kind,
            "backend": backend,
            "list_url": reverse("admin:jobtrail_task_changelist", current_app=self.admin_site.name)
            + "?"
            + urlencode({"backend": backend}),
            "task": task,
            "django_status": status_of(task),
            "payload": _pretty(task.payload),
            "result": _pretty(task.result) if task.state is State.SUCCEEDED else None,
            "timeline": log,
            "explain": explained,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/jobtrail/task/detail.html", context)

    def _refuse(self, request: HttpRequest) -> HttpResponse | None:
        """``None`` for a read by a user who may view tasks; 405 for any other method.
        (``admin_view`` has already sent anonymous and non-staff users to the login page.)"""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        return None


def _backend(backends: dict[str, JobtrailBackend], alias: str) -> JobtrailBackend:
    try:
        return backends[alias]
    except KeyError:
        raise Http404(f"no jobtrail task backend {alias!r} in TASKS") from None


def _choices(
    query: dict[str, str], name: str, chosen: str | None, values: list[str]
) -> list[dict[str, Any]]:
    """The filter links of one column: "all" and each value, keeping the other filters."""
    rest = {k: v for k, v in query.items() if k != name}
    out = [{"label": "All", "url": "?" + urlencode(rest), "chosen": chosen is None}]
    for value in values:
        out.append(
            {
                "label": value,
                "url": "?" + urlencode({**rest, name: value}),
                "chosen": value == chosen,
            }
        )
    return out


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
