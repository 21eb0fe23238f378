"""Receivers that write each task signal, with the process that sent it, to JT_DJ_SIGNALS."""

import json
import os

from jobtrail.contrib.django.compat import task_enqueued, task_finished, task_started


def _record(name: str, task_result: object, **_: object) -> None:
    path = os.environ.get("JT_DJ_SIGNALS")
    if not path:
        return
    line = {
        "signal": name,
        "pid": os.getpid(),
        "id": task_result.id,
        "backend": task_result.backend,
        "status": str(task_result.status),
        "errors": [e.exception_class_path for e in task_result.errors],
    }
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


def on_enqueued(sender: object, task_result: object, **kw: object) -> None:
    _record("enqueued", task_result)


def on_started(sender: object, task_result: object, **kw: object) -> None:
    _record("started", task_result)


def on_finished(sender: object, task_result: object, **kw: object) -> None:
    _record("finished", task_result)


task_enqueued.connect(on_enqueued)
task_started.connect(on_started)
task_finished.connect(on_finished)
