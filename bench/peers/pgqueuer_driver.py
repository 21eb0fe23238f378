"""pgqueuer 1.6 through its public API (Queries / QueueManager over asyncpg, the driver its
documentation and benchmarks use; psycopg async when asyncpg is missing — with it, pgqueuer's
idle worker wakes only about once a second).

``steady_work`` is ``work`` (``QueueManager.run`` with batch_size 10, its default); the steady
enqueuer's threads each hold their own event loop and asyncpg connection."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import psycopg
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
from pgqueuer import QueueManager
from pgqueuer.db import PsycopgDriver
from pgqueuer.queries import Queries

url, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


async def driver() -> Any:
    try:
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
    except ImportError:
        return PsycopgDriver(await psycopg.AsyncConnection.connect(url, autocommit=True))
    return AsyncpgDriver(await asyncpg.connect(url))


async def connect() -> Queries:
    return Queries(await driver())


async def main() -> None:
    q = await connect()
    if phase == "setup":
        await q.install()
    elif phase in ("enqueue_single", "enqueue_bulk"):
        import time

        start = time.perf_counter()
        if phase == "enqueue_single":
            for _ in range(n):
                await q.enqueue("noop", None)
        else:
            for i in range(0, n, 1000):
                k = min(1000, n - i)
                await q.enqueue(["noop"] * k, [None] * k, [0] * k)
        elapsed = time.perf_counter() - start
        print(json.dumps({"seconds": elapsed, "rate": n / elapsed}))
    elif phase in ("work", "steady_work"):
        qm = QueueManager(Queries(await driver()))
        steady = steady_mode()

        @qm.entrypoint("noop")
        async def noop(job) -> None:  # type: ignore[no-untyped-def]
            # latency runs send "t", steady runs "t s" (due time, enqueue call start)
            times = [float(x) for x in job.payload.decode().split()] if job.payload else []
            if steady:
                record_steady(job.id, times[0] if times else None, times[-1] if times else None)
            else:
                record_latency(times[0] if times else None)

        await qm.run(batch_size=CONCURRENCY)


if phase == "steady_enqueue":

    def sender() -> Any:
        # asyncpg connections are not shared across loops: one loop and client per thread,
        # each used only by its own thread
        loop = asyncio.new_event_loop()
        client = loop.run_until_complete(connect())

        def send(t: float, s: float) -> None:
            loop.run_until_complete(client.enqueue("noop", f"{t!r} {s!r}".encode()))

        return send

    open_loop(n, sender)
elif phase == "enqueue_threads":

    def sender_now() -> Any:  # as steady_enqueue's: a loop and a connection per thread
        loop = asyncio.new_event_loop()
        client = loop.run_until_complete(connect())
        return lambda: loop.run_until_complete(client.enqueue("noop", None)) and None

    threaded(n, sender_now)
elif phase == "latency":
    # one client kept open across samples, as an application would (and as the other drivers
    # do): a connection per sample would put connection setup into pgqueuer's latency
    loop = asyncio.new_event_loop()
    client = loop.run_until_complete(connect())

    def one(t: float) -> None:
        loop.run_until_complete(client.enqueue("noop", str(t).encode()))

    try:
        latency(__file__, url, n, one)
    finally:
        loop.close()
else:
    _ = timed
    asyncio.run(main())
