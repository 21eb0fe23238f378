"""chancy 0.26 through its public API (Chancy.migrate / declare / push / push_many, Worker).

How it waits for work: every push sends ``pg_notify`` (``queue.pushed``) and each worker holds a
LISTEN connection, so an idle worker wakes at once; otherwise it polls its queue every
``polling_interval`` (default 5 s, kept). The queue is declared with chancy's defaults — the
process executor (a ``spawn`` pool, each child replaced after 100 jobs), default plugins,
finished-job updates written in batches once a second — except for two settings:

* ``concurrency=CONCURRENCY`` and ``eager_polling=True``. Without eager polling a worker fetches
  new jobs only on a notification or every 5 s, so a queue filled before the worker starts
  drains at CONCURRENCY jobs per 5 s (2 jobs/s); eager polling (fetch again as soon as a job
  completes) is chancy's documented setting for queues that always have work.
* A plain ``logging`` logger at WARNING instead of chancy's default one, which logs every job
  pulled at INFO (rendered by ``rich`` when importable, as it is in the peers' venv): what a
  library's logging amounts to when the application configures none, as for the other peers.

The handler lives in this module so the pool's children can import it as ``chancy_driver.noop``
(``bench/peers`` is on PYTHONPATH); the ``__main__`` guard keeps them from running a phase.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from _common import CONCURRENCY, latency, record_latency, timed

FUNC = "chancy_driver.noop"
LOG = logging.getLogger("chancy.bench")
LOG.setLevel(logging.WARNING)


def noop(t: float | None = None) -> None:
    record_latency(t)


def main() -> None:
    from chancy import Chancy, Job, Queue, Worker

    url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    job = Job(func=FUNC)

    async def setup() -> None:
        async with Chancy(url, log=LOG) as chancy:
            await chancy.migrate()
            await chancy.declare(
                Queue("default", concurrency=CONCURRENCY, eager_polling=True), upsert=True
            )

    async def work() -> None:
        async with Chancy(url, log=LOG) as chancy, Worker(chancy) as worker:
            await worker.wait_for_shutdown()

    if phase == "setup":
        asyncio.run(setup())
        return
    if phase == "work":
        asyncio.run(work())
        return
    # the enqueuing phases keep one open app (connection pool), as an application would
    chancy = Chancy(url, log=LOG)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(chancy.pool.open())

    async def single() -> None:
        for _ in range(n):
            await chancy.push(job)

    async def bulk() -> None:
        async for _refs in chancy.push_many([job] * n, batch_size=1000):
            pass

    def one(t: float) -> None:
        loop.run_until_complete(chancy.push(job.with_kwargs(t=t)))

    try:
        if phase == "enqueue_single":
            timed(lambda: loop.run_until_complete(single()), n)
        elif phase == "enqueue_bulk":
            timed(lambda: loop.run_until_complete(bulk()), n)
        elif phase == "latency":
            latency(__file__, url, n, one)
    finally:
        loop.run_until_complete(chancy.pool.close())
        loop.close()


if __name__ == "__main__":  # the process pool's children import this module for ``noop``
    main()
