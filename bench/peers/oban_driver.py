"""oban-py 0.7 through its public API (Oban.create_pool, oban.schema.install, @worker,
Oban.enqueue / enqueue_many, embedded mode ``async with Oban(pool=..., queues=...)``).

It needs Python >= 3.12, so it runs from its own virtualenv (``bench/.venv-peers-312``).

How it waits for work: every insert of an available job sends ``pg_notify('oban_insert')`` from
the INSERT statement itself, and each worker's notifier holds a LISTEN connection; the stager
passes the notification to the queue's producer, which fetches at once. Without a notification
the stager polls every ``stager.interval`` (default 1 s) for available jobs. While jobs run, each
completion wakes the producer, which acks the finished jobs in one transaction and fetches more
(fetches debounced by 5 ms). Everything is left at oban's defaults except the queue,
``{"default": CONCURRENCY}``; the worker runs embedded under ``asyncio.run`` as for the other
peers (oban's CLI, ``oban start``, would run it under uvloop). ``enqueue_many`` is oban's bulk
API: one INSERT per job, on one connection in one transaction. Jobs name their worker by module
and class, here ``__main__.Noop``: every phase runs this script as ``__main__``, so the worker
process resolves it from oban's registry of decorated workers.

Finished jobs stay in ``oban_jobs`` in state ``completed``: the default pruner deletes them after
``max_age`` 86,400 s (checking every 60 s), so the count in ``bench/run.py`` reads that state.
"""

from __future__ import annotations

import asyncio
import sys

from _common import CONCURRENCY, latency, record_latency, timed
from oban import Job, Oban, worker
from oban.schema import install

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


@worker(queue="default")
class Noop:
    async def process(self, job: Job) -> None:
        record_latency(job.args.get("t"))


async def setup() -> None:
    pool = await Oban.create_pool(url)
    try:
        await install(pool)
    finally:
        await pool.close()


async def work() -> None:
    pool = await Oban.create_pool(url)
    async with Oban(pool=pool, queues={"default": CONCURRENCY}):
        await asyncio.Event().wait()  # until killed


def main() -> None:
    if phase == "setup":
        asyncio.run(setup())
        return
    if phase == "work":
        asyncio.run(work())
        return
    # the enqueuing phases keep one client (connection pool) open, as an application would
    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(Oban.create_pool(url))
    oban = Oban(pool=pool)  # no queues: client mode, enqueue only

    async def single() -> None:
        for _ in range(n):
            await oban.enqueue(Noop.new())

    async def bulk() -> None:
        for i in range(0, n, 1000):
            await oban.enqueue_many(Noop.new() for _ in range(min(1000, n - i)))

    def one(t: float) -> None:
        loop.run_until_complete(oban.enqueue(Noop.new({"t": t})))

    run = loop.run_until_complete
    try:
        if phase == "enqueue_single":
            timed(lambda: run(single()), n)
        elif phase == "enqueue_bulk":
            timed(lambda: run(bulk()), n)
        elif phase == "latency":
            latency(__file__, url, n, one)
    finally:
        run(pool.close())
        loop.close()


main()
