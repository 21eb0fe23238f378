"""Celery 5 through its public API, on the broker of the URL: Redis (``redis://``) or RabbitMQ
(``amqp://``). Celery's defaults: no result backend, the task acknowledged when a worker
receives it (``acks_late=False``: a worker that dies mid-task loses it), the prefork pool
(``--concurrency`` child processes, counted in the CPU column), prefetch multiplier 4, and on
RabbitMQ durable queues and persistent messages without publisher confirms (``delay()`` returns
once the message is written to the socket).

The queue is ``$BENCH_QUEUE`` (default ``bench``), emptied by ``setup``; its jobs are counted
by ``record_done`` (``_common.py``): Celery keeps no record of a finished job at its defaults.
Bulk is ``group(...).apply_async()`` of 1,000 signatures (one message each: Celery has no
batched publish)."""

from __future__ import annotations

import os
import sys

from _common import CONCURRENCY, latency, record_done, record_latency, threaded, timed
from celery import Celery, group

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
queue = os.environ.get("BENCH_QUEUE", "bench")
app = Celery("bench", broker=url)
app.conf.task_default_queue = queue  # a queue of this run's own (a shared broker)


@app.task(name="noop")
def noop(t: float | None = None) -> None:
    record_latency(t)
    record_done()


def connect() -> None:
    """Connected before the clock starts, as every driver is (the producer pool's
    connection is made on the first publish otherwise)."""
    with app.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=1)


if phase == "setup":
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1)
        conn.default_channel.queue_delete(queue)
elif phase == "enqueue_single":
    connect()
    timed(lambda: [noop.delay() for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":
    connect()

    def bulk() -> None:
        for i in range(0, n, 1000):
            group(noop.s() for _ in range(min(1000, n - i))).apply_async()

    timed(bulk, n)
elif phase == "work":
    # a node name of its own: two workers on one host would otherwise share celery@host
    app.worker_main(["worker", f"--concurrency={CONCURRENCY}", f"--hostname=b{os.getpid()}@%h"])
elif phase == "enqueue_threads":  # Celery's producer pool is shared by the threads
    connect()
    threaded(n, lambda: lambda: noop.delay() and None)
elif phase == "latency":
    connect()
    latency(__file__, url, n, lambda t: noop.delay(t) and None)
