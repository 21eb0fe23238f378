"""The task framework's names, from Django >= 6.0's ``django.tasks`` or else the
``django-tasks`` backport (0.12), whose spellings differ (``InvalidTask`` is
``InvalidTaskError`` there; early releases said ``SUCCEEDED`` for ``SUCCESSFUL``). Looked up at
run time, so both work from one source (typed ``Any``: Django ships no type information)."""

from __future__ import annotations

import importlib
from typing import Any


def _framework() -> str:
    for name in ("django.tasks", "django_tasks"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name
    raise ImportError(
        "jobtrail.contrib.django needs Django's task framework: Django >= 6.0, or the "
        "django-tasks backport on Django 5.2 (pip install 'jobtrail[django]')"
    )


#: ``"django.tasks"`` (built in, Django >= 6.0) or ``"django_tasks"`` (the backport).
FRAMEWORK = _framework()

_root = importlib.import_module(FRAMEWORK)
_base = importlib.import_module(f"{FRAMEWORK}.base")
_backends = importlib.import_module(f"{FRAMEWORK}.backends.base")
_exceptions = importlib.import_module(f"{FRAMEWORK}.exceptions")
_signals = importlib.import_module(f"{FRAMEWORK}.signals")

DEFAULT_TASK_QUEUE_NAME: str = _base.DEFAULT_TASK_QUEUE_NAME
BaseTaskBackend: Any = _backends.BaseTaskBackend
DjangoTask: Any = _base.Task
TaskContext: Any = _base.TaskContext
TaskError: Any = _base.TaskError
TaskResult: Any = _base.TaskResult
TaskResultStatus: Any = _base.TaskResultStatus
InvalidTask: Any = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
TaskResultDoesNotExist: Any = _exceptions.TaskResultDoesNotExist
SUCCESSFUL: Any = getattr(TaskResultStatus, "SUCCESSFUL", None) or TaskResultStatus.SUCCEEDED
task_backends: Any = _root.task_backends
task_enqueued: Any = _signals.task_enqueued
task_started: Any = _signals.task_started
task_finished: Any = _signals.task_finished
#: How the framework normalises arguments and return values to JSON (a ``TypeError``
#: "Unsupported type: …" for what JSON cannot hold).
normalize_json: Any = (
    importlib.import_module("django.utils.json").normalize_json
    if FRAMEWORK == "django.tasks"
    else importlib.import_module("django_tasks.utils").normalize_json
)
