"""jobtrail through its public API (run with the project's own environment).

``steady_work`` is ``work``: the library's defaults (its adaptive prefetch) unless
``BENCH_PREFETCH`` fixes a prefetch."""

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
    threaded,
    timed,
)

import jobtrail

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = jobtrail.App(url)
# BENCH_WAIT_FOR_DISK=0 (run.py's jobtrail-pg-nowait): every enqueue with wait_for_disk=False
OPTIONS: dict[str, Any] = (
    {"wait_for_disk": False} if os.environ.get("BENCH_WAIT_FOR_DISK") == "0" else {}
)
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
    timed(lambda: [app.enqueue("noop", {}, **OPTIONS) for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":

    def bulk() -> None:
        for i in range(0, n, 1000):
            app.enqueue_many([{"kind": "noop", "payload": {}, **OPTIONS}] * min(1000, n - i))

    timed(bulk, n)
elif phase in ("work", "steady_work"):
    # concurrency handlers at once; the library's adaptive prefetch unless BENCH_PREFETCH
    # fixes one (run.py's -tuned rows: 10, as pgqueuer's default fetches batches of 10)
    fixed = os.environ.get("BENCH_PREFETCH")
    app.run_worker(concurrency=CONCURRENCY, prefetch=int(fixed) if fixed else None)
elif phase in ("steady_enqueue", "enqueue_threads"):
    # The peers' senders connect before the clock starts (pgqueuer: a connection per thread).
    # The App's pool opens its connections one at a time as callers wait for them
    # (psycopg_pool), so 16 threads starting at once waited for it in their first two seconds
    # (send lag p99 26-65 ms there, 2.4-6.6 ms after; measured 2026-12-02): its connections
    # are opened first here too, as a long-running sender's are.
    pool = getattr(app._driver, "pool", None)
    if pool is not None:
        held = [pool.getconn() for _ in range(pool.max_size)]
        for conn in held:
            pool.putconn(conn)

    def sender() -> Any:  # one App for all threads: its pool is thread-safe
        return lambda t, s: app.enqueue("noop", {"t": t, "s": s}) and None

    if phase == "steady_enqueue":
        open_loop(n, sender)
    else:
        threaded(n, lambda: lambda: app.enqueue("noop", {}, **OPTIONS) and None)
elif phase == "latency":
    latency(__file__, url, n, lambda t: app.enqueue("noop", {"t": t}) and None)
app.close()
