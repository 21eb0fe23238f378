# ruff: noqa: S608
"""What a hand-off at enqueue would save an idle job (issue 21, idle latency), measured on bare
PostgreSQL before anyone builds it.

    python bench/idle_handoff.py                  # 200 samples of each, interleaved
    python bench/idle_handoff.py --samples 400 --pg postgresql://postgres@127.0.0.1/test

Today an idle job costs two commits in a row, each waiting for its WAL flush: the enqueue
(insert + NOTIFY) and, once the worker's listener wakes, the claim. A hand-off would lease the
task to a worker registered as idle inside the enqueue's own transaction and NOTIFY that
worker the task's id: one commit. This script times both shapes with psycopg on one table
(``bench_handoff``, in its own schema, dropped at the end), one job at a time, 50-100 ms apart
as ``bench/run.py``'s idle column:

- **two commits**: the enqueuer inserts a queued row and notifies ``handoff_q``; a worker
  thread blocked on its LISTEN connection wakes and runs the claim (``UPDATE ... WHERE id =
  (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``, autocommit) on a second connection; the
  job "starts" when the claim returns;
- **hand-off**: the enqueuer inserts the row already leased to the worker and notifies the
  worker's channel with its id; the job starts when the notification arrives.

Reported: p50 / p99 in ms from before the enqueue call to the start, and the ratio. It leaves
out what a real hand-off must add to the enqueue (finding an idle, live worker of the kind and
queue, the limits, pause and rate gates, the claimed transition), so it bounds the gain from
above.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time

import psycopg

SCHEMA = "bench_handoff"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    setup = psycopg.connect(args.pg, autocommit=True)
    setup.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    setup.execute(f"CREATE SCHEMA {SCHEMA}")
    setup.execute(
        f"CREATE TABLE {SCHEMA}.jobs (id bigserial PRIMARY KEY, state text NOT NULL, "
        "owner text, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
    )
    setup.execute(f"CREATE INDEX ON {SCHEMA}.jobs (id) WHERE state = 'queued'")

    listen = psycopg.connect(args.pg, autocommit=True)
    listen.execute("LISTEN handoff_q")
    listen.execute("LISTEN handoff_w1")
    claim = psycopg.connect(args.pg, autocommit=True)
    enqueue = psycopg.connect(args.pg, autocommit=True)
    started: list[float] = []
    arrived = threading.Event()
    stop = threading.Event()

    def worker() -> None:
        for note in listen.notifies():
            if stop.is_set():
                return
            if note.channel == "handoff_q":
                claim.execute(
                    f"UPDATE {SCHEMA}.jobs SET state = 'leased', owner = 'w1' WHERE id = ("
                    f"SELECT id FROM {SCHEMA}.jobs WHERE state = 'queued' ORDER BY id "
                    "LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, payload"
                ).fetchall()
            started.append(time.perf_counter())
            arrived.set()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    shapes = {
        "two commits": (
            f"WITH ins AS (INSERT INTO {SCHEMA}.jobs (state, payload) VALUES ('queued', '{{}}') "
            "RETURNING id) SELECT pg_notify('handoff_q', '') FROM ins"
        ),
        "hand-off": (
            f"WITH ins AS (INSERT INTO {SCHEMA}.jobs (state, owner, payload) VALUES "
            "('leased', 'w1', '{}') RETURNING id) SELECT pg_notify('handoff_w1', id::text) "
            "FROM ins"
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in shapes}
    try:
        for i in range(args.samples + 5):
            for name, sql in random.sample(list(shapes.items()), 2):
                arrived.clear()
                t0 = time.perf_counter()
                enqueue.execute(sql)
                if not arrived.wait(5):
                    raise SystemExit(f"no start within 5 s ({name}, sample {i})")
                if i >= 5:
                    times[name].append((started[-1] - t0) * 1000)
                time.sleep(random.uniform(0.05, 0.1))
    finally:
        stop.set()
        setup.execute("SELECT pg_notify('handoff_q', '')")
        thread.join(5)
        setup.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        for conn in (setup, listen, claim, enqueue):
            conn.close()
    base = statistics.median(times["two commits"])
    print(f"idle job, enqueue call to start, {args.samples} samples each, interleaved (ms)")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(f"{name:<12} p50 {p50:6.2f}  p99 {pct(values, 0.99):6.2f}  x{p50 / base:.2f}")


if __name__ == "__main__":
    main()
