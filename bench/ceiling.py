# ruff: noqa: S608
"""The SQL design ceiling on PostgreSQL: how many jobs per second jobtrail's schema and its
write pattern allow with no Python between the statements — the moonshot row of issue 45.

    python bench/ceiling.py                  # 20,000 jobs, 2 processes, batches of 100
    python bench/ceiling.py --processes 1 --batch 60

A fresh database migrated by the library, N tasks queued by ``enqueue_many``; then P processes
each loop one statement per round trip, autocommit (a commit flushed per round trip, as the
worker's): complete the batch it holds (``leased -> succeeded``, ``completed``, with the
lease guard) and claim the next ``--batch`` due tasks (``FOR UPDATE SKIP LOCKED`` in the order
of the due index, ``queued -> leased``, ``claimed``), every change with its transition row
appended in the same statement — the writes of the worker's ``task_complete_and_claim``,
without its fairness, limits, rates, keys, hand-off or handlers. Jobs/s from the first claim
to the last completion; the checker (``app.check()``) verifies every log afterwards.

``bench/run.py`` runs it after its table when ``jobtrail-pg`` was measured (with twice its
``--n``) and prints jobtrail's 2-process processing as a fraction of it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from typing import Any

import psycopg

import jobtrail

SERVER = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
#: a database of its own (a prefix from BENCH_DB_PREFIX, as bench/run.py's)
DATABASE = f"bench_{os.environ.get('BENCH_DB_PREFIX', '')}ceiling"

ROUND = """
WITH done AS (
    UPDATE jobtrail_tasks t
    SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, seq = t.seq + 1,
        last_reason = 'completed', updated_at = now(), finished_at = now()
    WHERE t.id = ANY(%(ids)s::bigint[]) AND t.state = 'leased' AND t.lease_owner = %(owner)s
    RETURNING t.id, t.seq, t.attempts, t.updated_at
), done_log AS (
    INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor,
                                      attempt, at, data)
    SELECT id, seq, 'leased', 'succeeded', 'completed', %(owner)s, attempts, updated_at,
           '{}'::jsonb
    FROM done
), pick AS (
    SELECT id FROM jobtrail_tasks
    WHERE queue = 'default' AND tenant = '' AND state = 'queued' AND ckey IS NULL
      AND run_at <= now()
    ORDER BY queue, tenant, priority DESC, run_at, id
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE jobtrail_tasks t
    SET state = 'leased', lease_owner = %(owner)s,
        lease_expires_at = now() + make_interval(secs => t.lease_seconds),
        attempts = t.attempts + 1, seq = t.seq + 1, last_reason = 'claimed', updated_at = now()
    FROM pick WHERE t.id = pick.id
    RETURNING t.id, t.seq, t.attempts, t.updated_at, t.payload
), log AS (
    INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason, actor,
                                      attempt, at, data)
    SELECT id, seq, 'queued', 'leased', 'claimed', %(owner)s, attempts, updated_at,
           '{"waited": 0}'::jsonb
    FROM upd
)
SELECT COALESCE(array_agg(id), '{}'), (SELECT count(*) FROM done) FROM upd
"""


def database_url(server: str) -> str:
    return server.rsplit("/", 1)[0] + "/" + DATABASE


def drain(url: str, owner: str, batch: int, start: Any) -> None:
    """Complete and claim until nothing is left (one process)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        start.wait()
        held: list[int] = []
        while True:
            row = conn.execute(
                ROUND, {"ids": held, "owner": owner, "batch": batch}, prepare=True
            ).fetchone()
            assert row is not None
            held = list(row[0])
            if not held:
                return


def measure(server: str, n: int, processes: int, batch: int) -> dict[str, Any]:
    """Jobs/s of ``processes`` draining ``n`` queued tasks with ``ROUND``."""
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    url = database_url(server)
    try:
        app = jobtrail.App(url)
        app.migrate()
        app.task("noop")(lambda ctx, payload: None)
        for i in range(0, n, 1000):
            app.enqueue_many([{"kind": "noop", "payload": {}}] * min(1000, n - i))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE jobtrail_tasks")
            conn.execute("CHECKPOINT")
        ctx = multiprocessing.get_context("spawn")
        start = ctx.Event()
        procs = [
            ctx.Process(target=drain, args=(url, f"ceiling:{i}", batch, start))
            for i in range(processes)
        ]
        for proc in procs:
            proc.start()
        time.sleep(1.0)  # every process connected and waiting
        t0 = time.perf_counter()
        start.set()
        for proc in procs:
            proc.join()
        elapsed = time.perf_counter() - t0
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM jobtrail_tasks WHERE state = 'succeeded'"
            ).fetchone()
        done = int(row[0]) if row else 0
        violations = app.check()
        app.close()
        return {
            "jobs": done,
            "seconds": elapsed,
            "rate": done / elapsed,
            "violations": len(violations),
        }
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--pg", default=SERVER)
    args = parser.parse_args()
    got = measure(args.pg, args.n, args.processes, args.batch)
    print(
        f"SQL design ceiling: {got['rate']:,.0f} jobs/s ({got['jobs']:,} jobs in"
        f" {got['seconds']:.2f} s, {args.processes} processes, batches of {args.batch},"
        f" {got['violations']} invariant violations)"
    )


if __name__ == "__main__":
    main()
