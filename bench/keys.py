# ruff: noqa: S608
"""Serial per key: what a concurrency key costs the claim.

    python bench/keys.py                          # both backends, the defaults below
    python bench/keys.py --backend pg --keys 1000 --per-key 10 --backlog 100000

For each backend, on a fresh store (PostgreSQL: a database ``bench_keys`` of its own):

1. **processing**: one in-process worker (concurrency 10, ``_worker_rate.worker_rate``) drains
   ``--keys`` x ``--per-key`` no-op tasks with a concurrency key each (limit 1 per key; enqueued
   round-robin over the keys) against as many plain no-op tasks in a queue of their own.
   Goal: keyed at least 0.7x plain.
2. **pickup latency of other keys**: ``--probes`` tasks, each under a key of its own, are
   enqueued one every ``--every`` seconds while a worker (concurrency 10) runs; pickup = the
   claim's time minus the task's creation, both by the database clock (its ``claimed``
   transition). Once with ``--backlog`` tasks queued under one hot key (limit 1, whose one
   running task sleeps 50 ms), once without (an empty store). Goal: p99 within 2x.

Prints one line per measurement with the settings.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from _worker_rate import worker_rate  # noqa: E402

import jobtrail  # noqa: E402
from jobtrail.worker import Worker, WorkerOptions  # noqa: E402

PG_FILL = """
WITH ins AS (
    INSERT INTO jobtrail_tasks (kind, queue, tenant, state, payload, payload_hash, priority,
        max_attempts, lease_seconds, reentrant, run_at, last_reason, seq, budget_started_at,
        created_at, updated_at, ckey, concurrency_limit)
    SELECT 'hot', 'keyed', '', 'queued', '{}'::jsonb, '', 0, 1, 30, true,
           now(), 'enqueued', 1, now(), now(), now(), 'hot', 1
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
    created_at, updated_at, ckey, concurrency_limit)
SELECT 'hot', 'keyed', '', 'queued', '{{}}', '', 0, 1, 30, 1, {SQLITE_NOW},
       'enqueued', 1, {SQLITE_NOW}, {SQLITE_NOW}, {SQLITE_NOW}, 'hot', 1 FROM n
"""
SQLITE_FILL_LOG = """
INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason, actor, attempt,
                                  at, data)
SELECT id, 1, NULL, 'queued', 'enqueued', 'bench', 0, created_at, '{}'
FROM jobtrail_tasks WHERE id > :after
"""
PICKUP = {
    "pg": """SELECT EXTRACT(EPOCH FROM tr.at - t.created_at)::float8 FROM jobtrail_tasks t
             JOIN jobtrail_transitions tr ON tr.task_id = t.id AND tr.reason = 'claimed'
             WHERE t.kind = 'probe'""",
    "sqlite": """SELECT tr.at - t.created_at FROM jobtrail_tasks t
                 JOIN jobtrail_transitions tr ON tr.task_id = t.id AND tr.reason = 'claimed'
                 WHERE t.kind = 'probe'""",
}


def make_app(backend: str, tmp: Path, pg: str, name: str) -> tuple[jobtrail.App, Any]:
    if backend == "pg":
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS bench_keys WITH (FORCE)")
            conn.execute("CREATE DATABASE bench_keys")
        url = pg.rsplit("/", 1)[0] + "/bench_keys"
        raw: Any = psycopg.connect(url, autocommit=True)
    else:
        path = tmp / f"{name}.db"
        url = f"sqlite:///{path}"
        raw = None
    app = jobtrail.App(url)

    @app.task("noop", max_attempts=1)
    def noop(ctx: Any, payload: Any) -> None:
        pass

    @app.task("hot", max_attempts=1, concurrency_per_key=1)
    def hot(ctx: Any, payload: Any) -> None:
        time.sleep(0.05)

    @app.task("probe", max_attempts=1)
    def probe(ctx: Any, payload: Any) -> None:
        pass

    app.migrate()
    if raw is None:
        raw = sqlite3.connect(tmp / f"{name}.db", isolation_level=None, timeout=60)
    return app, raw


def processing(backend: str, keys: int, per_key: int, pg: str, rounds: int) -> None:
    n = keys * per_key
    runs: dict[str, list[float]] = {"plain": [], "limited": [], "keyed": []}
    for variant in [v for _ in range(rounds) for v in runs]:  # alternated: the machine drifts
        with tempfile.TemporaryDirectory(prefix="jobtrail-keys-") as tmp:
            app, raw = make_app(backend, Path(tmp), pg, variant)
            items: list[dict[str, Any]] = []
            for seq in range(per_key):
                for k in range(keys):
                    item: dict[str, Any] = {"kind": "noop", "payload": {"seq": seq}}
                    if variant == "keyed":
                        item["concurrency_key"] = f"account:{k}"
                    items.append(item)
            if variant == "limited":  # the limited claim keyed tasks take, without keys
                app.set_limit("default", total=1_000_000, by="bench", note="limited claim")
            for i in range(0, n, 1000):
                app.enqueue_many(items[i : i + 1000])
            if backend == "pg":
                raw.execute("VACUUM ANALYZE jobtrail_tasks")
            runs[variant].append(worker_rate(app, n))
            app.close()
            raw.close()
    rates = {v: statistics.median(r) for v, r in runs.items()}
    print(
        f"{backend:6s} processing {n:,} tasks ({keys:,} keys x {per_key}, limit 1; one worker, "
        f"median of {rounds} rounds, "
        f"concurrency 10): plain {rates['plain']:,.0f} jobs/s, keyed {rates['keyed']:,.0f} "
        f"jobs/s ({rates['keyed'] / rates['plain']:.2f}x); plain tasks under a concurrency limit "
        f"(the same limited claim) {rates['limited']:,.0f} jobs/s",
        flush=True,
    )


def pickup(backend: str, backlog: int, probes: int, every: float, pg: str) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="jobtrail-keys-") as tmp:
        app, raw = make_app(backend, Path(tmp), pg, f"pickup{backlog}")
        app.enqueue("hot", {}, concurrency_key="hot")  # the queue is keyed from here on
        if backlog:
            if backend == "pg":
                raw.execute(PG_FILL, {"rows": backlog})
                raw.execute("VACUUM ANALYZE jobtrail_tasks")
                raw.execute("VACUUM ANALYZE jobtrail_transition_log")
                raw.execute("CHECKPOINT")
            else:
                after = raw.execute("SELECT COALESCE(MAX(id), 0) FROM jobtrail_tasks").fetchone()[0]
                raw.execute("BEGIN IMMEDIATE")
                raw.execute(SQLITE_FILL, {"rows": backlog})
                raw.execute(SQLITE_FILL_LOG, {"after": after})
                raw.execute("COMMIT")
                raw.execute("ANALYZE")
        worker = Worker(app, WorkerOptions(queues=["keyed"], concurrency=10, install_signals=False))
        thread = threading.Thread(target=worker.run)
        thread.start()
        time.sleep(1.0)  # the worker is up and the hot key held
        for i in range(probes):
            app.enqueue("probe", {"i": i}, queue="keyed", concurrency_key=f"other:{i}")
            time.sleep(every)
        deadline = time.monotonic() + 30
        while len(raw.execute(PICKUP[backend]).fetchall()) < probes:
            if time.monotonic() > deadline:
                raise SystemExit("probes not all claimed within 30 s")
            time.sleep(0.05)
        worker.stop()
        thread.join()
        waits = sorted(float(r[0]) for r in raw.execute(PICKUP[backend]).fetchall())
        app.close()
        raw.close()
    return waits


def p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["pg", "sqlite", "both"], default="both")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--per-key", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=300)
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("--only", choices=["processing", "pickup"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    for backend in ["pg", "sqlite"] if args.backend == "both" else [args.backend]:
        if args.only in (None, "processing"):
            processing(backend, args.keys, args.per_key, args.pg, args.rounds)
        if args.only in (None, "pickup"):
            empty = pickup(backend, 0, args.probes, args.every, args.pg)
            hot = pickup(backend, args.backlog, args.probes, args.every, args.pg)
            print(
                f"{backend:6s} pickup of other keys ({args.probes} probes, one every "
                f"{args.every * 1000:.0f} ms, one worker, concurrency 10): empty store "
                f"p50 {statistics.median(empty) * 1000:.1f} ms p99 {p(empty, 0.99) * 1000:.1f} ms"
                f" | {args.backlog:,} queued under one hot key p50 "
                f"{statistics.median(hot) * 1000:.1f} ms p99 {p(hot, 0.99) * 1000:.1f} ms "
                f"({p(hot, 0.99) / p(empty, 0.99):.2f}x)",
                flush=True,
            )


if __name__ == "__main__":
    main()
