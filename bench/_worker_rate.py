"""Shared by ``growth.py``, ``pooler.py`` and ``scale.py``: one in-process worker's drain rate.

Not a benchmark of its own; the scripts import it (``bench/`` is on ``sys.path`` when one of
them runs as ``python bench/<script>.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from jobtrail.worker import Worker, WorkerOptions


def worker_rate(app: Any, n: int, queues: Sequence[str] = ("default",)) -> float:
    """jobs/s of one worker (concurrency 10, no signal handlers) over ``n`` tasks already
    queued, from its start to its ``n``-th finished task; then stops it.

    ``app``: an ``App`` or its ``worker_collaborators()``, as ``Worker`` takes them."""
    worker = Worker(app, WorkerOptions(queues=list(queues), concurrency=10, install_signals=False))
    thread = threading.Thread(target=worker.run)
    start = time.perf_counter()
    thread.start()
    while worker.processed < n:
        time.sleep(0.001)
    elapsed = time.perf_counter() - start
    worker.stop()
    thread.join()
    return n / elapsed
