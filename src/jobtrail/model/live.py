"""Which live worker can take a task: a worker claims a task when it serves the
task's queue and registers its kind. Pure; ``explain`` (``core/explain_workers.py``, which
the dashboard's task page shows too) and ``doctor`` (``store/probe.py``) ask it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: What keeps a due task from every live worker: no worker serves its queue, or those that do
#: do not register its kind.
NO_QUEUE, NO_KIND = "queue", "kind"


def missing(queue: str, kind: str, workers: Iterable[Mapping[str, Any]]) -> str | None:
    """``None`` when some worker of ``workers`` (rows with ``queues`` and ``kinds``) takes a
    task of ``kind`` in ``queue``; else ``NO_QUEUE`` or ``NO_KIND``, whichever is first
    missing."""
    serving = [w for w in workers if queue in w["queues"]]
    if not serving:
        return NO_QUEUE
    if not any(kind in w["kinds"] for w in serving):
        return NO_KIND
    return None
