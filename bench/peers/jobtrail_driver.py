"""jobtrail through its public API (run with the project's own environment).

``steady_work`` is a worker at the library's defaults (``prefetch`` passed only when
``BENCH_PREFETCH`` is set), where ``work`` claims 10 ahead unless told otherwise."""

from __future__ import annotations

import os
import sys
from typing import Any

from _common import (
    CONCURRENCY,
    latency,
    open_loop,
    record_latency,
    record_steady,
    steady_mode,
    timed,
)

import jobtrail

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = jobtrail.App(url)
STEADY = steady_mode()


@app.task("noop", max_attempts=1)
def noop(ctx: Any, payload: Any) -> None:
    t = payload.get("t") if isinstance(payload, dict) else None
    if STEADY:
        record_steady(ctx.task_id, t, payload.get("s"))
    else:
        record_latency(t)


if phase.startswith(("enqueue", "steady_enqueue")):
    # connected before the clock starts, as the peers' drivers are (their connect or pool
    # open comes before the timed loop): one read checks a pooled connection out and in
    app.list(limit=1)

if phase == "setup":
    app.migrate()
elif phase == "enqueue_single":
    timed(lambda: [app.enqueue("noop", {}) for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":

    def bulk() -> None:
        for i in range(0, n, 1000):
            app.enqueue_many([{"kind": "noop", "payload": {}}] * min(1000, n - i))

    timed(bulk, n)
elif phase == "work":
    # concurrency handlers at once, and as many claimed ahead (pgqueuer's default fetches
    # batches of 10 with no cap on its picked jobs); BENCH_PREFETCH=0 for none
    app.run_worker(
        concurrency=CONCURRENCY, prefetch=int(os.environ.get("BENCH_PREFETCH", CONCURRENCY))
    )
elif phase == "steady_work":
    prefetch = os.environ.get("BENCH_PREFETCH")
    if prefetch:
        app.run_worker(concurrency=CONCURRENCY, prefetch=int(prefetch))
    else:
        app.run_worker(concurrency=CONCURRENCY)
elif phase == "steady_enqueue":

    def sender() -> Any:  # one App for all threads: its pool is thread-safe
        return lambda t, s: app.enqueue("noop", {"t": t, "s": s}) and None

    open_loop(n, sender)
elif phase == "latency":
    latency(__file__, url, n, lambda t: app.enqueue("noop", {"t": t}) and None)
app.close()
