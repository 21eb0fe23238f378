"""huey 3.5 (SqliteHuey) through its public API. Results are stored, so finished jobs are
counted in huey's own ``kv`` table. Huey has no bulk enqueue.

``steady_work`` is ``work`` (a consumer of 10 threads); in steady runs a ``SIGNAL_COMPLETE``
handler appends ``<id> <now>`` to ``$BENCH_STEADY_DONE``: huey emits it after the result is
stored (``put_result``, committed), and huey's store keeps no timestamps of its own."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from _common import (
    CONCURRENCY,
    latency,
    open_loop,
    record_latency,
    record_steady,
    steady_mode,
    threaded,
    timed,
)
from huey import SqliteHuey, signals

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
path = url[len("sqlite:///") :]
huey = SqliteHuey(filename=path)


STEADY = steady_mode()


@huey.task(context=True)
def noop(t: float | None = None, s: float | None = None, task: Any = None) -> int:
    if STEADY:
        record_steady(task.id, t, s)
    else:
        record_latency(t)
    return 1


if os.environ.get("BENCH_STEADY_DONE"):
    done_fd = os.open(os.environ["BENCH_STEADY_DONE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    @huey.signal(signals.SIGNAL_COMPLETE)
    def completed(signal: Any, task: Any) -> None:
        os.write(done_fd, f"{task.id} {time.time()!r}\n".encode())


if phase == "setup":
    huey.storage.flush_queue()
elif phase == "enqueue_single":
    timed(lambda: [noop() for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":
    print(json.dumps({"skip": "huey has no bulk enqueue"}))
elif phase in ("work", "steady_work"):
    huey.create_consumer(workers=CONCURRENCY, worker_type="thread").run()
elif phase == "steady_enqueue":
    # huey's SQLite storage is one connection behind a lock: the threads take turns on it
    open_loop(n, lambda: lambda t, s: noop(t=t, s=s) and None)
elif phase == "enqueue_threads":  # one connection behind a lock, as in steady_enqueue
    threaded(n, lambda: lambda: noop() and None)
elif phase == "latency":
    latency(__file__, url, n, lambda t: noop(t=t) and None)
