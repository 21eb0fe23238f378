# ruff: noqa: E501, S608
"""How fast is queue health on a big store? Loads N tasks (default 1,000,000) with their
transitions into a fresh PostgreSQL schema (or SQLite file), then times `app.stats()`, each of
its queries, `app.dead()` (with and without its tasks' evidence), a preview, a claim, and
`app.list()` paging.

    python bench/stats_1m.py --backend postgres --tasks 1000000
    python bench/stats_1m.py --backend sqlite --tasks 1000000

Mix: 94% succeeded spread over the last 24 h (3 transitions each), 2% queued and due,
0.5% leased, 1% dead, 1.5% cancelled, 1% queued with a future run_at.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim

PG_URL = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

PG_LOAD = """
INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
    attempts, max_attempts, lease_seconds, reentrant, run_at, lease_owner, lease_expires_at,
    last_reason, seq, budget_started_at, created_at, updated_at, finished_at)
OVERRIDING SYSTEM VALUE
SELECT kind, queue, 't' || (i % 50), state, '{"n": 1}', 'h', 0,
       CASE WHEN state = 'queued' THEN 0 ELSE 1 END, 5, 30, true,
       CASE WHEN bucket = 99 THEN now() + interval '1 hour' ELSE t0 END,
       CASE WHEN state = 'leased' THEN 'bench:1:x' END,
       CASE WHEN state = 'leased' THEN now() + interval '1 hour' END,
       CASE state WHEN 'succeeded' THEN 'completed' WHEN 'dead' THEN 'permanent_error'
                  WHEN 'cancelled' THEN 'cancelled_before_start' WHEN 'leased' THEN 'claimed'
                  ELSE 'enqueued' END,
       CASE state WHEN 'succeeded' THEN 3 WHEN 'dead' THEN 3 WHEN 'cancelled' THEN 2
                  WHEN 'leased' THEN 2 ELSE 1 END,
       t0, t0, t0 + interval '1 second',
       CASE WHEN state IN ('succeeded', 'dead', 'cancelled') THEN t0 + interval '1 second' END
FROM (
    SELECT i, i % 100 AS bucket,
           CASE WHEN i % 4 = 0 THEN 'email' WHEN i % 4 = 1 THEN 'render' ELSE 'publish' END AS kind,
           CASE WHEN i % 3 = 0 THEN 'bulk' ELSE 'default' END AS queue,
           CASE WHEN i % 100 < 94 THEN 'succeeded' WHEN i % 100 < 96 THEN 'queued'
                WHEN i % 200 = 192 THEN 'leased' WHEN i % 100 = 97 THEN 'dead'
                WHEN i % 100 = 98 THEN 'cancelled' WHEN i % 100 = 99 THEN 'queued'
                ELSE 'cancelled' END AS state,
           now() - interval '24 hours' + (i::float8 / %(n)s) * interval '24 hours' AS t0
    FROM generate_series(1, %(n)s) AS i
) s;
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at, '{}' FROM jobtrail_tasks;
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
SELECT id, 2, 'queued', 'leased', 'claimed', 'bench:1:x', 1, created_at + interval '0.5 second',
       '{"waited": 0.5, "version": "v1"}' FROM jobtrail_tasks WHERE seq >= 2 AND state <> 'cancelled';
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
SELECT id, 2, 'queued', 'cancelled', 'cancelled_before_start', 'ops', 0, finished_at, '{}'
FROM jobtrail_tasks WHERE state = 'cancelled';
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
SELECT id, 3, 'leased', state, last_reason, 'bench:1:x', 1, finished_at, '{}'
FROM jobtrail_tasks WHERE state IN ('succeeded', 'dead');
ANALYZE jobtrail_tasks;
ANALYZE jobtrail_transition_log;
"""


def timed(label: str, fn, repeat: int = 3):  # type: ignore[no-untyped-def]
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    print(f"  {label:<42} {best * 1000:9.1f} ms (best of {repeat})")
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    schema = "bench_" + secrets.token_hex(4)
    if args.backend == "postgres":
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = f"{PG_URL}?options={quote(f'-csearch_path={schema}')}"
    else:
        path = Path(tempfile.mkdtemp()) / "bench.db"
        url = f"sqlite:///{path}"
    app = jobtrail.App(url)

    @app.task("publish")
    def publish(ctx, payload):  # type: ignore[no-untyped-def]
        return None

    app.migrate()
    print(f"{args.backend}: loading {args.tasks:,} tasks ...", flush=True)
    start = time.perf_counter()
    if args.backend == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in PG_LOAD.split(";\n"):
                if statement.strip():
                    conn.execute(statement.replace("%(n)s", str(int(args.tasks))))
    else:
        load_sqlite(str(path), args.tasks)
    print(f"  loaded in {time.perf_counter() - start:.1f} s")
    with app._driver.transaction(write=False) as tx:
        n_tasks = (
            tx.one("stats_count_tasks")["n"] if "stats_count_tasks" in app._driver.sql else None
        )
    del n_tasks
    print("timings:")
    report = timed("app.stats() (5 min window)", lambda: app.stats(window=300))
    timed("app.stats() (1 h window)", lambda: app.stats(window=3600))
    with app._driver.transaction(write=False) as tx:
        since = app._driver.encode_time(app._driver.db_now(tx))
    for name in ("stats_open", "stats_dead"):
        timed(f"  query {name}", lambda name=name: _run(app, name, {}))
    for name in ("stats_finished", "stats_reasons", "stats_waits", "stats_runs"):
        timed(f"  query {name} (5 min)", lambda name=name: _run(app, name, {"since": since}))
    timed("app.dead()", app.dead)
    timed("app.dead(tasks=5) (evidence)", lambda: app.dead(tasks=5))
    timed("app.dead_preview(limit=500) (effects)", lambda: app.dead_preview(limit=500))
    timed("app.list(limit=50)", lambda: app.list(limit=50))
    timed("app.list(state='dead', limit=50)", lambda: app.list(state="dead", limit=50))
    states = ("queued", "leased", "cancelled", "succeeded")
    for state in states:
        timed(f"app.list(state={state!r}, limit=50)", lambda s=state: app.list(state=s, limit=50))
    timed("  query view_state_counts", lambda: _run(app, "view_state_counts", {}))
    # again once psycopg has prepared them (fifth use) and PostgreSQL may use a generic plan
    for _ in range(8):
        for state in ("dead", *states):
            app.list(state=state, limit=50)
        _run(app, "view_state_counts", {})
    for state in ("dead", *states):
        timed(
            f"app.list(state={state!r}, limit=50), prepared",
            lambda s=state: app.list(state=s, limit=50),
        )
    timed("  query view_state_counts, prepared", lambda: _run(app, "view_state_counts", {}))

    def claim_one() -> None:
        with app._driver.transaction() as tx:
            rows = transition.claim(
                app._driver,
                tx,
                Claim(
                    owner="bench:2:y", queues=["default"], kinds=["publish"], limit=10, version=None
                ),
            )
            assert rows

    timed("claim 10 due tasks", claim_one)
    print(
        f"queues in report: {len(report['queues'])}; e.g. {report['queues'][0]['queue']}/"
        f"{report['queues'][0]['kind']} queued={report['queues'][0]['counts']['queued']}"
    )
    app.close()
    if args.backend == "postgres" and not args.keep:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return 0


def _run(app: jobtrail.App, name: str, params: dict) -> int:  # type: ignore[type-arg]
    since = params.get("since")
    with app._driver.transaction(write=False) as tx:
        if since is not None:
            now = app._driver.db_now(tx)
            from datetime import timedelta

            params = {"since": app._driver.encode_time(now - timedelta(seconds=300))}
        return len(tx.all(name, params))


def load_sqlite(path: str, n: int) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    now = "((julianday('now') - 2440587.5) * 86400.0)"
    conn.executescript(f"""
    CREATE TEMP TABLE seq AS WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s
        WHERE i < {int(n)}) SELECT i FROM s;
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        attempts, max_attempts, lease_seconds, reentrant, run_at, lease_owner, lease_expires_at,
        last_reason, seq, budget_started_at, created_at, updated_at, finished_at)
    SELECT kind, queue, 't' || (i % 50), state, '{{"n":1}}', 'h', 0,
        CASE WHEN state = 'queued' THEN 0 ELSE 1 END, 5, 30, 1,
        CASE WHEN i % 100 = 99 THEN {now} + 3600 ELSE t0 END,
        CASE WHEN state = 'leased' THEN 'bench:1:x' END,
        CASE WHEN state = 'leased' THEN {now} + 3600 END,
        CASE state WHEN 'succeeded' THEN 'completed' WHEN 'dead' THEN 'permanent_error'
                   WHEN 'cancelled' THEN 'cancelled_before_start' WHEN 'leased' THEN 'claimed'
                   ELSE 'enqueued' END,
        CASE state WHEN 'succeeded' THEN 3 WHEN 'dead' THEN 3 WHEN 'cancelled' THEN 2
                   WHEN 'leased' THEN 2 ELSE 1 END,
        t0, t0, t0 + 1,
        CASE WHEN state IN ('succeeded', 'dead', 'cancelled') THEN t0 + 1 END
    FROM (SELECT i,
            CASE WHEN i % 4 = 0 THEN 'email' WHEN i % 4 = 1 THEN 'render' ELSE 'publish' END AS kind,
            CASE WHEN i % 3 = 0 THEN 'bulk' ELSE 'default' END AS queue,
            CASE WHEN i % 100 < 94 THEN 'succeeded' WHEN i % 100 < 96 THEN 'queued'
                 WHEN i % 200 = 192 THEN 'leased' WHEN i % 100 = 97 THEN 'dead'
                 WHEN i % 100 = 98 THEN 'cancelled' WHEN i % 100 = 99 THEN 'queued'
                 ELSE 'cancelled' END AS state,
            {now} - 86400.0 + (i * 86400.0 / {int(n)}) AS t0
          FROM seq);
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
    SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at, '{{}}' FROM jobtrail_tasks;
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
    SELECT id, 2, 'queued', 'leased', 'claimed', 'bench:1:x', 1, created_at + 0.5,
           '{{"waited":0.5,"version":"v1"}}' FROM jobtrail_tasks WHERE seq >= 2 AND state <> 'cancelled';
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
    SELECT id, 2, 'queued', 'cancelled', 'cancelled_before_start', 'ops', 0, finished_at, '{{}}'
    FROM jobtrail_tasks WHERE state = 'cancelled';
    INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt, at, data)
    SELECT id, 3, 'leased', state, last_reason, 'bench:1:x', 1, finished_at, '{{}}'
    FROM jobtrail_tasks WHERE state IN ('succeeded', 'dead');
    ANALYZE;
    """)
    conn.commit()
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
