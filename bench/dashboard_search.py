"""How fast is the dashboard's search on a grown store? Loads N tasks (default 1,000,000) whose
payloads carry an ``order_id`` (unique) and a ``customer`` (1,000 tasks each), one in ten an
idempotency key, the dead ones an error text; then times each kind of search, through
``App.search`` and through the task list page over HTTP (in-process client), best of 3.

    python bench/dashboard_search.py --backend postgres          # goal: each under 300 ms
    python bench/dashboard_search.py --backend sqlite --tasks 200000

PostgreSQL finds a payload field through the GIN index of migration 0026 and a key through
its own index; SQLite and error text read at most the newest 100,000 tasks (``SCAN``).
The pages also count the open states through index-only scans: on a shared server where
another open transaction kept the load's VACUUM from marking pages all-visible they read the
heap (a second per page); ``--keep``, ``VACUUM`` the schema, and time it again with ``--url``.
"""

from __future__ import annotations

import argparse
import secrets
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

import jobtrail

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"

PG_LOAD = """
INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, idempotency_key,
    priority, attempts, max_attempts, lease_seconds, reentrant, run_at, last_reason,
    last_error_category, last_error, seq, budget_started_at, created_at, updated_at, finished_at)
OVERRIDING SYSTEM VALUE
SELECT CASE WHEN i % 4 = 0 THEN 'email' ELSE 'publish' END, 'default', 't' || (i % 50), state,
       jsonb_build_object('order_id', i, 'customer', 'c' || (i % 1000), 'lines', i % 7),
       'h', CASE WHEN i % 10 = 0 THEN 'key-' || i END, 0,
       1, 5, 30, true, t0,
       CASE state WHEN 'succeeded' THEN 'completed' WHEN 'dead' THEN 'permanent_error'
                  ELSE 'enqueued' END,
       CASE WHEN state = 'dead' THEN 'unavailable' END,
       CASE WHEN state = 'dead' THEN 'TimeoutError: bank ' || (i % 97) || ' did not answer' END,
       CASE state WHEN 'queued' THEN 1 ELSE 3 END, t0, t0, t0,
       CASE WHEN state <> 'queued' THEN t0 END
FROM (
    SELECT i, CASE WHEN i % 100 < 94 THEN 'succeeded' WHEN i % 100 < 97 THEN 'queued'
                   ELSE 'dead' END AS state,
           now() - interval '24 hours' + (i::float8 / %(n)s) * interval '24 hours' AS t0
    FROM generate_series(1, %(n)s) AS i
) s;
VACUUM ANALYZE jobtrail_tasks;
"""

SQLITE_LOAD = """
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < :n)
INSERT INTO jobtrail_tasks (id, kind, queue, tenant, state, payload, payload_hash,
    idempotency_key, priority, attempts, max_attempts, lease_seconds, reentrant, run_at,
    last_reason, last_error_category, last_error, seq, budget_started_at, created_at,
    updated_at, finished_at)
SELECT i, CASE WHEN i % 4 = 0 THEN 'email' ELSE 'publish' END, 'default', 't' || (i % 50),
       CASE WHEN i % 100 < 94 THEN 'succeeded' WHEN i % 100 < 97 THEN 'queued' ELSE 'dead' END,
       json_object('order_id', i, 'customer', 'c' || (i % 1000), 'lines', i % 7), 'h',
       CASE WHEN i % 10 = 0 THEN 'key-' || i END, 0, 1, 5, 30, 1, :t0 + i * 0.01,
       CASE WHEN i % 100 < 94 THEN 'completed' WHEN i % 100 < 97 THEN 'enqueued'
            ELSE 'permanent_error' END,
       CASE WHEN i % 100 >= 97 THEN 'unavailable' END,
       CASE WHEN i % 100 >= 97 THEN 'TimeoutError: bank ' || (i % 97) || ' did not answer' END,
       CASE WHEN i % 100 BETWEEN 94 AND 96 THEN 1 ELSE 3 END,
       :t0, :t0 + i * 0.01, :t0 + i * 0.01, CASE WHEN i % 100 NOT BETWEEN 94 AND 96 THEN :t0 END
FROM s;
"""


def best(fn: Callable[[], Any], runs: int = 3) -> float:
    out = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the loaded schema or file")
    parser.add_argument("--url", help="time a store loaded before (--keep) instead of loading")
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from jobtrail.web.dashboard import create_dashboard_app

    n = int(args.tasks)
    schema = "bench_" + secrets.token_hex(4)
    if args.url:
        url, args.keep = args.url, True
    elif args.backend == "postgres":
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = f"{PG_URL}?options={quote(f'-csearch_path={schema}')}"
    else:
        path = Path(tempfile.mkdtemp()) / "bench.db"
        url = f"sqlite:///{path}"
    app = jobtrail.App(url)
    app.migrate()
    try:
        start = time.perf_counter()
        if args.url:
            pass
        elif args.backend == "postgres":
            with psycopg.connect(url, autocommit=True) as conn:
                for statement in PG_LOAD.split(";\n"):
                    if statement.strip():
                        conn.execute(statement.replace("%(n)s", str(n)))
        else:
            with sqlite3.connect(path) as db:
                db.execute(SQLITE_LOAD, {"n": n, "t0": time.time() - 86400})
                db.execute("ANALYZE")
        print(f"{args.backend}: loaded {n:,} tasks in {time.perf_counter() - start:.1f} s")
        client = TestClient(create_dashboard_app(app), base_url="http://127.0.0.1")
        old, new = 123_457 % n or 1, n - 3
        searches = [
            f"payload.order_id = {old}",  # one match, old: outside SQLite's bounded scan
            f"payload.order_id = {new}",  # one match among the newest
            "payload.customer = c7",  # 1,000 matches: the newest 50
            "payload.customer = nobody",  # no match: the whole index (or scan) read
            "error: bank 42 did not",
            f"key: key-{(n // 2) // 10 * 10}",
            "tenant: t7",
        ]
        for page in ("/", "/?state=dead"):
            print(
                f"  page {page:<31} {best(lambda page=page: client.get(page)):8.1f} ms (no search)"
            )
        print(f"  {'search':<36} {'App.search':>11} {'page /?q=':>10}  found")
        for query in searches:
            found = app.search(query)
            ms = best(lambda query=query: app.search(query))
            page = best(lambda query=query: client.get("/?q=" + quote(query)))
            bounded = " (newest 100,000 only)" if found["scanned_from"] is not None else ""
            print(f"  {query:<36} {ms:8.1f} ms {page:7.1f} ms  {len(found['tasks'])}{bounded}")
        ms = best(lambda: app.search_states("payload.customer = c7"))
        print(f"  {'select-all preview, customer = c7':<36} {ms:8.1f} ms")
        ms = best(lambda: app.search_states("", state="succeeded"))
        print(f"  {'select-all preview, state=succeeded':<36} {ms:8.1f} ms  (10,000 cap)")
    finally:
        app.close()
        if args.keep:
            print(f"kept: {url}")
        elif args.backend == "postgres":
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(main())
