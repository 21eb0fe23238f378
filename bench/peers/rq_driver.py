"""RQ 2 through its public API, on the Redis of the URL. RQ's defaults: a job's data and its
result (kept 500 s) in Redis, a worker that forks a work horse for every job, and a job whose
worker dies mid-run moved to the failed registry, not run again. RQ's worker runs one job at a
time, so a "process" here is ``WorkerPool`` of ``$BENCH_CONCURRENCY`` (10) workers, the
``rq worker-pool -n 10`` of its command line (their horses are counted in the CPU column).

The queue is ``$BENCH_QUEUE`` (default ``bench``), emptied by ``setup``; jobs are counted by
``record_done`` (``_common.py``). Bulk is ``Queue.enqueue_many`` of 1,000 (one pipeline)."""

from __future__ import annotations

import os
import sys

from _common import CONCURRENCY, latency, threaded, timed
from _rq_jobs import noop
from redis import Redis
from rq import Queue
from rq.worker_pool import WorkerPool

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
name = os.environ.get("BENCH_QUEUE", "bench")
conn = Redis.from_url(url)
queue = Queue(name, connection=conn)

if phase == "setup":
    queue.empty()
elif phase == "enqueue_single":
    conn.ping()  # connected before the clock starts
    timed(lambda: [queue.enqueue(noop) for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":
    conn.ping()

    def bulk() -> None:
        for i in range(0, n, 1000):
            queue.enqueue_many([Queue.prepare_data(noop) for _ in range(min(1000, n - i))])

    timed(bulk, n)
elif phase == "work":
    WorkerPool([name], connection=conn, num_workers=CONCURRENCY).start(logging_level="WARNING")
elif phase == "enqueue_threads":  # the Redis client's connection pool is thread-safe
    conn.ping()
    threaded(n, lambda: lambda: queue.enqueue(noop) and None)
elif phase == "latency":
    conn.ping()
    latency(__file__, url, n, lambda t: queue.enqueue(noop, t) and None)
