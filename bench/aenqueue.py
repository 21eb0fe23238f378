# ruff: noqa: S608
"""``aenqueue`` throughput against ``enqueue`` (issue 17), both backends.

    python bench/aenqueue.py                      # N=2,000 per row, 1 and 16 concurrent
    python bench/aenqueue.py --n 500 --concurrency 1,8,32 --pg postgresql://...

Rows: ``enqueue`` (sync, one call at a time), ``aenqueue`` awaited one at a time, and
``aenqueue`` from C concurrent tasks on one event loop (each awaiting its own calls). Each
backend gets a fresh store (a fresh PostgreSQL schema, a fresh SQLite file); the rows run
interleaved in ``--rounds`` rounds, so that a shared machine's load weighs on each alike, and
the tasks stored are counted. ``loop cpu ms/1k``: CPU time of the event loop's thread per
1,000 calls (what the calls cost the loop; on SQLite the work is on jobtrail's threads).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import jobtrail  # noqa: E402


def fresh(backend: str, pg: str, tmp: str) -> tuple[str, Callable[[], None]]:
    if backend == "sqlite":
        path = Path(tmp) / f"{secrets.token_hex(4)}.db"
        return f"sqlite:///{path}", lambda: None
    schema = "bench_" + secrets.token_hex(4)
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')

    def drop() -> None:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    sep = "&" if "?" in pg else "?"
    return f"{pg}{sep}options=-csearch_path%3D{schema}", drop


def measure(
    url: str, n: int, rows: list[tuple[str, int]], rounds: int
) -> list[tuple[float, float]]:
    """calls/s and loop CPU ms per 1,000 calls of each row, the rows interleaved in ``rounds``
    rounds (a shared machine's load then weighs on every row alike)."""
    app = jobtrail.App(url)
    app.migrate()
    app.task("noop")(lambda ctx, p: None)
    wall = [0.0] * len(rows)
    cpu = [0.0] * len(rows)
    per = n // rounds
    try:

        async def one(mode: str, concurrency: int) -> None:
            if mode == "enqueue":
                for i in range(per):
                    app.enqueue("noop", {"i": i})
            elif concurrency == 1:
                for i in range(per):
                    await app.aenqueue("noop", {"i": i})
            else:

                async def lane(k: int) -> None:
                    for i in range(k, per, concurrency):
                        await app.aenqueue("noop", {"i": i})

                await asyncio.gather(*(lane(k) for k in range(concurrency)))

        async def run() -> None:
            await app.aenqueue("noop")  # opens the pool / threads
            app.enqueue("noop")
            for _ in range(rounds):
                for r, (mode, concurrency) in enumerate(rows):
                    c0, t0 = time.thread_time(), time.perf_counter()
                    await one(mode, concurrency)
                    wall[r] += time.perf_counter() - t0
                    cpu[r] += time.thread_time() - c0

        asyncio.run(run())
        expected = per * rounds * len(rows) + 2
        listed = len(app.list(limit=10_000)) if expected <= 10_000 else expected
        if listed != expected:
            raise SystemExit(f"stored {listed} tasks, expected {expected}")
        return [
            (per * rounds / w, c * 1e6 / (per * rounds)) for w, c in zip(wall, cpu, strict=True)
        ]
    finally:
        app.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", default="16", help="comma-separated task counts")
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--only", default="postgres,sqlite")
    parser.add_argument("--rounds", type=int, default=5, help="rounds the rows are interleaved in")
    args = parser.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    print(
        f"N={args.n} per row in {args.rounds} interleaved rounds; "
        f"python {sys.version.split()[0]}; cpus {os.cpu_count()}"
    )
    print(f"{'backend':10} {'call':26} {'calls/s':>10} {'loop cpu ms/1k':>15}")
    rows = [("enqueue", 1), ("aenqueue", 1)] + [("aenqueue", c) for c in concurrencies]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.only.split(","):
            url, drop = fresh(backend, args.pg, tmp)
            try:
                results = measure(url, args.n, rows, args.rounds)
            finally:
                drop()
            for (mode, c), (rate, cpu) in zip(rows, results, strict=True):
                label = mode if mode == "enqueue" else f"aenqueue x{c} concurrent"
                if mode == "aenqueue" and c == 1:
                    label = "aenqueue (one at a time)"
                print(f"{backend:10} {label:26} {rate:10.0f} {cpu:15.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
