# ruff: noqa: S608
"""Issue 8, scale: does throughput hold with 1,000,000 queued rows already in the table?

    python bench/scale.py                       # both backends, 1,000,000 rows, N=30,000
    python bench/scale.py --backend pg --rows 200000 --n 5000

For each backend: a fresh store; process N no-op tasks with one in-process worker
(concurrency 10) on the empty table; then add ``--rows`` queued tasks (with their ``enqueued``
transitions, written by SQL for speed) and process N more — once with the rows scheduled an
hour ahead (a big schedule: the due tasks come first in the claim index), once with the rows
due (a backlog the worker takes from). Prints jobs/s for each and the ratio to the empty
table; the claim must use the due index, never a scan (``tests/integration/test_claim_plan``
fails on a sequential scan). Also prints the bytes the tables and indexes grew per job.
N is 30,000 by default: at ~10,000 jobs/s a run of 10,000 takes under a second, shorter than
the machine's hiccups. After each fill, PostgreSQL is vacuumed and checkpointed first (see
``fill``).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from _worker_rate import worker_rate  # noqa: E402

import jobtrail  # noqa: E402

PG_FILL = """
WITH ins AS (
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        max_attempts, lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at,
        created_at, updated_at)
    SELECT 'noop', 'default', '', 'queued', '{}'::jsonb, '', 0, 1, 30, true,
           now() + make_interval(secs => %(ahead)s), 'enqueued', 1, now(), now(), now()
    FROM generate_series(1, %(rows)s)
    RETURNING id, created_at
)
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt,
                                  at, data)
SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at, '{}'::jsonb FROM ins
"""

SQLITE_NOW = "round((julianday('now') - 2440587.5) * 86400.0, 3)"
SQLITE_FILL = f"""
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)
INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
    max_attempts, lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at,
    created_at, updated_at)
SELECT 'noop', 'default', '', 'queued', '{{}}', '', 0, 1, 30, 1, {SQLITE_NOW} + :ahead,
       'enqueued', 1, {SQLITE_NOW}, {SQLITE_NOW}, {SQLITE_NOW} FROM n
"""
SQLITE_FILL_LOG = """
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt,
                                  at, data)
SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at, '{}'
FROM jobtrail_tasks WHERE id > :after
"""


def make_app(backend: str, tmp: Path, pg: str) -> tuple[jobtrail.App, Any]:
    if backend == "pg":
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS bench_scale WITH (FORCE)")
            conn.execute("CREATE DATABASE bench_scale")
        url = pg.rsplit("/", 1)[0] + "/bench_scale"
        raw: Any = psycopg.connect(url, autocommit=True)
    else:
        url = f"sqlite:///{tmp / 'scale.db'}"
        raw = None
    app = jobtrail.App(url)

    @app.task("noop", max_attempts=1)
    def noop(ctx: Any, payload: Any) -> None:
        pass

    app.migrate()
    if raw is None:
        raw = sqlite3.connect(tmp / "scale.db", isolation_level=None, timeout=60)
    return app, raw


def fill(backend: str, raw: Any, rows: int, ahead: float) -> float:
    start = time.perf_counter()
    if backend == "pg":
        raw.execute(PG_FILL, {"rows": rows, "ahead": ahead})
        # settle as a table that grew over time would be: a million rows written in seconds
        # leave autovacuum about to start on them and a checkpoint under way (every page the
        # measurement then touches first is written whole into the WAL), which a measurement
        # of one second would otherwise take for the cost of the table's size
        raw.execute("VACUUM ANALYZE jobtrail_tasks")
        raw.execute("VACUUM ANALYZE jobtrail_transition_log")
        raw.execute("CHECKPOINT")
    else:
        after = raw.execute("SELECT COALESCE(MAX(id), 0) FROM jobtrail_tasks").fetchone()[0]
        raw.execute("BEGIN IMMEDIATE")
        raw.execute(SQLITE_FILL, {"rows": rows, "ahead": ahead})
        raw.execute(SQLITE_FILL_LOG, {"after": after})
        raw.execute("COMMIT")
        raw.execute("ANALYZE")
    return time.perf_counter() - start


def process(app: jobtrail.App, n: int, *, enqueue: bool) -> float:
    """jobs/s of one worker (concurrency 10) over ``n`` tasks (enqueued first if asked)."""
    if enqueue:
        for i in range(0, n, 1000):
            app.enqueue_many([{"kind": "noop", "payload": {}}] * min(1000, n - i))
    return worker_rate(app, n)


def size(backend: str, raw: Any) -> int:
    if backend == "pg":
        row = raw.execute(
            "SELECT pg_total_relation_size('jobtrail_tasks')"
            " + pg_total_relation_size('jobtrail_transition_log')"
        ).fetchone()
        return int(row[0])
    return int(
        raw.execute(
            "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size"
        ).fetchone()[0]
    )


def run(backend: str, rows: int, n: int, pg: str) -> None:
    with tempfile.TemporaryDirectory(prefix="jobtrail-scale-") as tmp:
        app, raw = make_app(backend, Path(tmp), pg)
        before = size(backend, raw)
        if backend == "pg":
            raw.execute("CHECKPOINT")  # as after each fill
        empty = process(app, n, enqueue=True)
        grew = (size(backend, raw) - before) / n
        took = fill(backend, raw, rows, ahead=3600.0)
        scheduled = process(app, n, enqueue=True)
        took += fill(backend, raw, rows, ahead=0.0)
        backlog = process(app, n, enqueue=False)
        print(
            f"{backend:6s} empty {empty:7.0f} jobs/s | +{rows:,} scheduled {scheduled:7.0f}"
            f" ({scheduled / empty:.2f}x) | +{rows:,} due backlog {backlog:7.0f}"
            f" ({backlog / empty:.2f}x) | fill {took:.0f}s | tables+indexes grew"
            f" {grew:,.0f} bytes per finished job",
            flush=True,
        )
        app.close()
        raw.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["pg", "sqlite", "both"], default="both")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--n", type=int, default=30_000)
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    for backend in ["pg", "sqlite"] if args.backend == "both" else [args.backend]:
        run(backend, args.rows, args.n, args.pg)


if __name__ == "__main__":
    main()
