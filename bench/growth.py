# ruff: noqa: E501, S608
"""Issue 21, item 5 (growth): does a large store stay fast?

    python bench/growth.py --backend postgres            # fills once, keeps a template
    python bench/growth.py --backend postgres --refill   # fill the template again
    python bench/growth.py --backend sqlite

The grown store: ``--queued`` (1,000,000) due tasks over three queues (default, bulk,
critical), three kinds (publish, email, render) and 50 tenants, each with its ``enqueued``
transition, plus ``--finished`` (3,000,000) tasks finished over the last 24 hours with three
transitions each (enqueued, claimed, completed; one in 200 dead with ``permanent_error``):
10,000,000 transitions in all. Written with set-based SQL (``generate_series`` / a recursive
CTE), then VACUUM ANALYZE and a checkpoint, and kept: PostgreSQL as the database
``bench_growth_pg_filled`` (each run works on ``CREATE DATABASE bench_growth_pg TEMPLATE
bench_growth_pg_filled``), SQLite as a file copied for each run (``--dir``).

The empty store: the same schema with only ``--n`` + claims queued tasks of the same mix.

Measured on each (median of ``--repeat`` calls unless said otherwise):
- processing: jobs/s of one worker process (concurrency 10, defaults otherwise) over ``--n``
  (10,000) of the queued tasks, from its start to the ``--n``-th finished task;
- claim latency: p50/p99 of the worker's claim statement (``claim_unlimited`` in one autocommit
  statement on PostgreSQL, ``claim`` in a write transaction on SQLite; limit 10) over
  ``--claims`` (300) calls, each taking 10 due tasks;
- ``app.stats()`` (5-minute default window and the 1-hour window), ``app.dead()``;
- the dashboard's task list (``GET /``, ``/?state=queued``, ``/?state=succeeded``), a task page
  (``GET /tasks/{id}``) and the queues page, over HTTP through the real ASGI app
  (``fastapi.testclient.TestClient``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim

PG_URL = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
KINDS = ("publish", "email", "render")
QUEUES = ("default", "bulk", "critical")
FILLED = "bench_growth_pg_filled"
WORK = "bench_growth_pg"
EMPTY = "bench_growth_pg_empty"

# %(lo)s..%(hi)s: the rows of this chunk; queued tasks due over the hour before now
PG_QUEUED = """
WITH ins AS (
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason, seq,
        budget_started_at, created_at, updated_at)
    SELECT (ARRAY['publish', 'email', 'render'])[1 + i %% 3],
           CASE WHEN i %% 10 < 5 THEN 'default' WHEN i %% 10 < 8 THEN 'bulk' ELSE 'critical' END,
           't' || (i %% 50), 'queued', '{"n": 1}'::jsonb, 'h', 0, 0, 3, 30, true, t, 'enqueued',
           1, t, t, t
    FROM generate_series(%(lo)s::int, %(hi)s::int) AS i,
         LATERAL (SELECT now() - interval '1 hour' + (i::float8 / %(total)s::int) * interval '1 hour' AS t) tt
    RETURNING id, created_at
)
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at, '{}'::jsonb FROM ins
"""

# finished tasks over the 24 hours before the queued ones; one in 200 dead
PG_FINISHED = """
WITH ins AS (
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason,
        last_error_category, seq, budget_started_at, created_at, updated_at, finished_at,
        claimed_version, first_failure_at)
    SELECT (ARRAY['publish', 'email', 'render'])[1 + i %% 3],
           CASE WHEN i %% 10 < 5 THEN 'default' WHEN i %% 10 < 8 THEN 'bulk' ELSE 'critical' END,
           't' || (i %% 50), CASE WHEN i %% 200 = 7 THEN 'dead' ELSE 'succeeded' END,
           '{"n": 1}'::jsonb, 'h', 0, 1, 3, 30, true, t,
           CASE WHEN i %% 200 = 7 THEN 'permanent_error' ELSE 'completed' END,
           CASE WHEN i %% 200 = 7 THEN 'permanent' END,
           3, t, t, t + interval '1.5 second', t + interval '1.5 second',
           'v1', CASE WHEN i %% 200 = 7 THEN t + interval '1.5 second' END
    FROM generate_series(%(lo)s::int, %(hi)s::int) AS i,
         LATERAL (SELECT now() - interval '25 hours' + (i::float8 / %(total)s::int) * interval '24 hours' AS t) tt
    RETURNING id, created_at, state, last_reason, last_error_category
)
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, error_category,
    actor, attempt, at, data)
SELECT ins.id, s.seq, s.from_state, COALESCE(s.to_state, ins.state),
       COALESCE(s.reason, ins.last_reason), CASE WHEN s.seq = 3 THEN ins.last_error_category END,
       s.actor, s.attempt, ins.created_at + make_interval(secs => s.after), s.data::jsonb
FROM ins, (VALUES (1, NULL, 'queued', 'enqueued', 'bench', 0, 0.0, '{}'),
                  (2, 'queued', 'leased', 'claimed', 'w:1:x', 1, 0.5, '{"waited": 0.5, "version": "v1"}'),
                  (3, 'leased', NULL, NULL, 'w:1:x', 1, 1.5, '{}'))
     AS s(seq, from_state, to_state, reason, actor, attempt, after, data)
"""


def pg_url(db: str) -> str:
    return PG_URL.rsplit("/", 1)[0] + "/" + db


def make_app(url: str) -> jobtrail.App:
    app = jobtrail.App(url)
    for kind in KINDS:
        app.task(kind)(_noop)
    return app


def _noop(ctx: Any, payload: Any) -> None:
    return None


def pg_fill(db: str, queued: int, finished: int, chunk: int = 250_000) -> float:
    start = time.perf_counter()
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {db}")
    app = make_app(pg_url(db))
    app.migrate()
    app.close()
    with psycopg.connect(pg_url(db), autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET maintenance_work_mem = '256MB'")
        for sql, total in ((PG_FINISHED, finished), (PG_QUEUED, queued)):
            for lo in range(1, total + 1, chunk):
                hi = min(total, lo + chunk - 1)
                conn.execute(sql, {"lo": lo, "hi": hi, "total": total})
                print(f"  {db}: rows {hi:,} of {total:,}", flush=True)
        conn.execute("VACUUM ANALYZE jobtrail_tasks")
        conn.execute("VACUUM ANALYZE jobtrail_transition_log")
        conn.execute("CHECKPOINT")
    return time.perf_counter() - start


def pg_from_template() -> None:
    app = make_app(pg_url(FILLED))
    app.migrate()  # the template follows the schema of this checkout (new indexes: once)
    app.close()
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {WORK} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {WORK} TEMPLATE {FILLED}")
        conn.execute("CHECKPOINT")


def pg_exists(db: str) -> bool:
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone()
            is not None
        )


# -- SQLite -------------------------------------------------------------------------------------
SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"


def sqlite_fill(path: Path, queued: int, finished: int) -> float:
    start = time.perf_counter()
    path.unlink(missing_ok=True)
    app = make_app(f"sqlite:///{path}")
    app.migrate()
    app.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    if finished:
        sqlite_finished(conn, finished)
    sqlite_queued(conn, queued)
    conn.execute("ANALYZE")
    conn.close()
    return time.perf_counter() - start


def sqlite_finished(conn: sqlite3.Connection, finished: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    kind = "CASE i % 3 WHEN 0 THEN 'publish' WHEN 1 THEN 'email' ELSE 'render' END"
    queue = "CASE WHEN i % 10 < 5 THEN 'default' WHEN i % 10 < 8 THEN 'bulk' ELSE 'critical' END"
    conn.execute(f"""
        WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {int(finished)})
        INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
            attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason,
            last_error_category, seq, budget_started_at, created_at, updated_at, finished_at,
            claimed_version, first_failure_at, evidence_on_row)
        SELECT {kind}, {queue}, 't' || (i % 50),
               CASE WHEN i % 200 = 7 THEN 'dead' ELSE 'succeeded' END, '{{"n":1}}', 'h', 0, 1, 3,
               30, 1, t, CASE WHEN i % 200 = 7 THEN 'permanent_error' ELSE 'completed' END,
               CASE WHEN i % 200 = 7 THEN 'permanent' END, 3, t, t, t + 1.5, t + 1.5,
               'v1', CASE WHEN i % 200 = 7 THEN t + 1.5 END, 1
        FROM (SELECT i, {SQLITE_NOW} - 90000.0 + i * 86400.0 / {int(finished)} AS t FROM s)""")
    conn.execute("""
        INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason,
            error_category, actor, attempt, at, data)
        SELECT t.id, s.seq, s.from_state, COALESCE(s.to_state, t.state),
               COALESCE(s.reason, t.last_reason), CASE WHEN s.seq = 3 THEN t.last_error_category END,
               s.actor, s.attempt, t.created_at + s.after, s.data
        FROM jobtrail_tasks t,
             (SELECT 1 AS seq, NULL AS from_state, 'queued' AS to_state, 'enqueued' AS reason,
                     'bench' AS actor, 0 AS attempt, 0.0 AS after, '{}' AS data
              UNION ALL SELECT 2, 'queued', 'leased', 'claimed', 'w:1:x', 1, 0.5,
                     '{"waited":0.5,"version":"v1"}'
              UNION ALL SELECT 3, 'leased', NULL, NULL, 'w:1:x', 1, 1.5, '{}') s
        ORDER BY t.id, s.seq""")
    conn.execute("COMMIT")


def sqlite_queued(conn: sqlite3.Connection, queued: int) -> None:
    kind = "CASE i % 3 WHEN 0 THEN 'publish' WHEN 1 THEN 'email' ELSE 'render' END"
    queue = "CASE WHEN i % 10 < 5 THEN 'default' WHEN i % 10 < 8 THEN 'bulk' ELSE 'critical' END"
    conn.execute("BEGIN IMMEDIATE")
    after = conn.execute("SELECT COALESCE(MAX(id), 0) FROM jobtrail_tasks").fetchone()[0]
    conn.execute(f"""
        WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {int(queued)})
        INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
            attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason, seq,
            budget_started_at, created_at, updated_at, evidence_on_row)
        SELECT {kind}, {queue}, 't' || (i % 50), 'queued', '{{"n":1}}', 'h', 0, 0, 3, 30, 1, t,
               'enqueued', 1, t, t, t, 1
        FROM (SELECT i, {SQLITE_NOW} - 3600.0 + i * 3600.0 / {int(queued)} AS t FROM s)""")
    conn.execute(
        "INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor,"
        " attempt, at, data) SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at,"
        " '{}' FROM jobtrail_tasks WHERE id > ?",
        (after,),
    )
    conn.execute("COMMIT")


# -- measurements -------------------------------------------------------------------------------
def _work(url: str, n: int, out: Any) -> None:
    from _worker_rate import worker_rate

    app = make_app(url)
    rate = worker_rate(app, n, QUEUES)
    app.close()
    out.put(rate)


def processing(url: str, n: int) -> float:
    """jobs/s of one worker process (concurrency 10) over ``n`` tasks already queued."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_work, args=(url, n, out))
    proc.start()
    rate = float(out.get(timeout=600))
    proc.join()
    return rate


def claim_latency(app: jobtrail.App, claims: int) -> tuple[float, float]:
    driver = app._driver
    request = Claim(
        owner="bench:9:c", queues=list(QUEUES), kinds=list(KINDS), limit=10, version=None
    )
    times = []
    for _ in range(claims):
        t0 = time.perf_counter()
        if driver.claims_in_one_statement:
            with driver.single_statement(pinned=True) as tx:
                rows = transition.claim_unlimited(driver, tx, request)
        else:
            with driver.transaction() as tx:
                rows = transition.claim(driver, tx, request)
        times.append(time.perf_counter() - t0)
        assert len(rows) == 10, len(rows)
    times.sort()
    return times[len(times) // 2] * 1000, times[min(len(times) - 1, int(len(times) * 0.99))] * 1000


def median_ms(fn: Any, repeat: int) -> float:
    fn()  # first call: plans prepared, pages read
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def reads(app: jobtrail.App, repeat: int) -> dict[str, float]:
    from fastapi.testclient import TestClient

    from jobtrail.web.dashboard import create_dashboard_app

    client = TestClient(create_dashboard_app(app), base_url="http://127.0.0.1")
    succeeded = app.list(state="succeeded", limit=1)[0].id
    queued = app.list(state="queued", limit=1)[0].id

    def get(path: str) -> Any:
        def call() -> None:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)

        return call

    return {
        "app.stats() 5 min": median_ms(lambda: app.stats(), repeat),
        "app.stats() 1 h": median_ms(lambda: app.stats(window=3600), repeat),
        "app.dead()": median_ms(app.dead, repeat),
        "GET /": median_ms(get("/"), repeat),
        "GET /?state=queued": median_ms(get("/?state=queued"), repeat),
        "GET /?state=succeeded": median_ms(get("/?state=succeeded"), repeat),
        "GET /tasks/{succeeded}": median_ms(get(f"/tasks/{succeeded}"), repeat),
        "GET /tasks/{queued}": median_ms(get(f"/tasks/{queued}"), repeat),
        "GET /queues": median_ms(get("/queues"), repeat),
        "GET /dead": median_ms(get("/dead"), repeat),
    }


def settle() -> None:
    """Write out the page cache's dirty pages before the clock starts: a store just filled or
    copied (1.8 GB for SQLite) is otherwise written back by the kernel during the run, and
    every fsync of the run waits behind it (the grown SQLite file read 5,759 jobs/s copied
    just before, 10,225 after a sync; the empty one 10,831)."""
    os.sync()


def measure(label: str, url: str, args: argparse.Namespace) -> dict[str, float]:
    settle()
    rate = processing(url, args.n)
    app = make_app(url)
    p50, p99 = claim_latency(app, args.claims)
    out = {"jobs/s (1 proc, c=10)": rate, "claim p50 ms": p50, "claim p99 ms": p99}
    out.update(reads(app, args.repeat))
    app.close()
    print(f"{label}: " + ", ".join(f"{k} {v:.1f}" for k, v in out.items()), flush=True)
    return out


def report(empty: dict[str, float], grown: dict[str, float]) -> None:
    print(f"\n{'':28s} {'empty':>10s} {'grown':>10s} {'ratio':>7s}")
    for key in empty:
        ratio = grown[key] / empty[key] if empty[key] else float("nan")
        print(f"{key:28s} {empty[key]:10.1f} {grown[key]:10.1f} {ratio:7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--queued", type=int, default=1_000_000)
    parser.add_argument("--finished", type=int, default=3_000_000)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--only", choices=["empty", "grown", "both"], default="both")
    parser.add_argument("--dir", default="/tmp/jobtrail-growth")
    args = parser.parse_args()
    # the worker stops after --n finished but ends what it holds first (up to 60 claimed a
    # round trip): the claims measured after it need their own 10 each beyond that
    spare = args.n + args.claims * 10 + 1000
    results: dict[str, dict[str, float]] = {}
    if args.backend == "postgres":
        if args.only != "grown":
            pg_fill(EMPTY, spare, 0)
            results["empty"] = measure("empty", pg_url(EMPTY), args)
        if args.only != "empty":
            if args.refill or not pg_exists(FILLED):
                print(f"filling {FILLED} ...", flush=True)
                print(f"  filled in {pg_fill(FILLED, args.queued, args.finished):.0f} s")
            pg_from_template()
            results["grown"] = measure("grown", pg_url(WORK), args)
    else:
        base = Path(args.dir)
        base.mkdir(parents=True, exist_ok=True)
        if args.only != "grown":
            sqlite_fill(base / "empty.db", spare, 0)
            results["empty"] = measure("empty", f"sqlite:///{base / 'empty.db'}", args)
        if args.only != "empty":
            filled = base / "filled.db"
            if args.refill or not filled.exists():
                print(f"filling {filled} ...", flush=True)
                print(f"  filled in {sqlite_fill(filled, args.queued, args.finished):.0f} s")
            work = base / "work.db"
            for suffix in ("", "-wal", "-shm"):
                Path(str(work) + suffix).unlink(missing_ok=True)
            app = make_app(f"sqlite:///{filled}")
            app.migrate()
            app.close()
            shutil.copyfile(filled, work)
            results["grown"] = measure("grown", f"sqlite:///{work}", args)
    if len(results) == 2:
        report(results["empty"], results["grown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
