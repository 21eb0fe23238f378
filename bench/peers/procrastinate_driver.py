"""procrastinate 3.10 through its public API (App, PsycopgConnector, defer/batch_defer)."""

from __future__ import annotations

import sys

from _common import CONCURRENCY, latency, record_latency, timed
from procrastinate import App, PsycopgConnector

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = App(connector=PsycopgConnector(conninfo=url))


@app.task(name="noop")
def noop(t: float | None = None) -> None:
    record_latency(t)


with app.open():
    if phase == "setup":
        app.schema_manager.apply_schema()
    elif phase == "enqueue_single":
        timed(lambda: [noop.defer() for _ in range(n)] and None, n)
    elif phase == "enqueue_bulk":

        def bulk() -> None:
            for i in range(0, n, 1000):
                noop.batch_defer(*[{}] * min(1000, n - i))

        timed(bulk, n)
    elif phase == "work":
        app.run_worker(concurrency=CONCURRENCY, wait=True, install_signal_handlers=True)
    elif phase == "latency":
        latency(__file__, url, n, lambda t: noop.defer(t=t) and None)
