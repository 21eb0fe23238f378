"""Dramatiq 2 through its public API, on the RabbitMQ of the URL. Dramatiq's defaults: durable
queues and persistent messages without publisher confirms (``send()`` returns once the
message is written to the socket), a message acknowledged after its actor ran (a worker that
dies mid-run has it delivered again: at least once), its default middleware (retries, time
limit, ...). A "process" is one ``Worker`` of ``$BENCH_CONCURRENCY`` (10) threads, as
``dramatiq --processes 1 --threads 10``.

The queue is ``$BENCH_QUEUE`` (default ``bench``), emptied by ``setup``; jobs are counted by
``record_done`` (``_common.py``): no result is stored at the defaults. Bulk is
``group(...).run()`` of 1,000 messages (Dramatiq has no batched publish)."""

from __future__ import annotations

import os
import signal
import sys

import dramatiq
from _common import CONCURRENCY, latency, record_done, record_latency, threaded, timed
from dramatiq.brokers.rabbitmq import RabbitmqBroker

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
queue = os.environ.get("BENCH_QUEUE", "bench")
broker = RabbitmqBroker(url=url)
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=queue)
def noop(t: float | None = None) -> None:
    record_latency(t)
    record_done()


if phase == "setup":
    broker.flush(queue)  # the queue and its delay and dead-letter queues
elif phase == "enqueue_single":
    broker.channel  # connected before the clock starts  # noqa: B018
    timed(lambda: [noop.send() for _ in range(n)] and None, n)
elif phase == "enqueue_bulk":
    broker.channel  # noqa: B018

    def bulk() -> None:
        for i in range(0, n, 1000):
            dramatiq.group(noop.message() for _ in range(min(1000, n - i))).run()

    timed(bulk, n)
elif phase == "work":
    worker = dramatiq.Worker(broker, worker_threads=CONCURRENCY)
    worker.start()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    worker.stop()
elif phase == "enqueue_threads":  # the broker opens a channel per thread on its first send
    broker.channel  # noqa: B018
    threaded(n, lambda: lambda: noop.send() and None)
elif phase == "latency":
    broker.channel  # noqa: B018
    latency(__file__, url, n, lambda t: noop.send(t) and None)
broker.close()
