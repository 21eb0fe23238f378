"""pgqueuer 1.6 through its public API (Queries / QueueManager over asyncpg, the driver its
documentation and benchmarks use; psycopg async when asyncpg is missing — with it, pgqueuer's
idle worker wakes only about once a second)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import psycopg
from _common import CONCURRENCY, latency, record_latency, timed
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
    elif phase == "work":
        qm = QueueManager(Queries(await driver()))

        @qm.entrypoint("noop")
        async def noop(job) -> None:  # type: ignore[no-untyped-def]
            record_latency(float(job.payload.decode()) if job.payload else None)

        await qm.run(batch_size=CONCURRENCY)


if phase == "latency":
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
