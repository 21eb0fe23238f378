# ruff: noqa: S608
"""Retention on PostgreSQL (issue 18): does pruning hold claims up, and does the
store level off?

    python bench/retention.py prune  --tasks 1000000    # claim latency before and during a prune
    python bench/retention.py steady --tasks 200000 --retention 60 --rate 800

``prune``: a fresh database with ``--tasks`` succeeded tasks finished 8 days ago, each with three
transitions (enqueued, claimed, completed), written with ``generate_series`` (not through the
API: minutes instead of hours), then ANALYZE. A claimer thread claims (the worker's
one-statement claim, ``limit`` 5, every 10 ms) from a queue of due tasks for ``--before``
seconds, then keeps claiming while the worker's retention pass (``prune_retained``, the
default 7-day retention, 500 tasks per transaction, 5 ms between batches, as the worker's
thread runs it) deletes every old task. Prints claim
latency p50/p99/max before and during, the prune's duration and rate, and table sizes before
and after (and after VACUUM).

``steady``: a worker (concurrency 10, its retention thread on, ``succeeded`` kept
``--retention`` seconds) and an enqueuer (``enqueue_many`` batches of 100 at ``--rate``
tasks/s) until ``--tasks`` were enqueued; every ``--every`` seconds prints the live tasks and the
size of the tasks and transitions tables with their indexes and TOAST
(``pg_total_relation_size``), so one can see whether it levels off. ``--autovacuum tuned``
sets the per-table autovacuum settings of docs/postgres.md first; ``--vacuum-every S`` runs
``VACUUM (ANALYZE)`` of both tables every S seconds instead, for a server where autovacuum is
off (``SHOW autovacuum``).

PostgreSQL: ``--pg`` (default ``JOBTRAIL_TEST_PG_URL``); the database ``bench_retention`` is
dropped and made again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import Any

import psycopg

import jobtrail
from jobtrail.core import transition
from jobtrail.services.retention import prune_retained
from jobtrail.store.base import Claim

DB = "bench_retention"
TUNED = (
    "ALTER TABLE jobtrail_tasks SET (autovacuum_vacuum_scale_factor = 0.02,"
    " autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,"
    " autovacuum_vacuum_cost_limit = 2000)",
    "ALTER TABLE jobtrail_transition_log SET (autovacuum_vacuum_scale_factor = 0.02,"
    " autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,"
    " autovacuum_vacuum_cost_limit = 2000)",
)


def fresh(pg: str) -> str:
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB}")
        conn.execute(f"CREATE DATABASE {DB}")
    return pg.rsplit("/", 1)[0] + "/" + DB


def sizes(conn: psycopg.Connection[Any]) -> dict[str, float]:
    row = conn.execute(
        "SELECT pg_total_relation_size('jobtrail_tasks'), pg_total_relation_size("
        "'jobtrail_transition_log'), pg_relation_size('jobtrail_tasks'),"
        " pg_relation_size('jobtrail_transition_log')"
    ).fetchone()
    assert row is not None
    mb = 1024.0 * 1024.0
    return {
        "tasks_total_mb": row[0] / mb,
        "transitions_total_mb": row[1] / mb,
        "tasks_heap_mb": row[2] / mb,
        "transitions_heap_mb": row[3] / mb,
    }


def show(label: str, s: dict[str, float]) -> None:
    print(
        f"{label}: tasks {s['tasks_total_mb']:.1f} MB (heap {s['tasks_heap_mb']:.1f}),"
        f" transitions {s['transitions_total_mb']:.1f} MB (heap {s['transitions_heap_mb']:.1f})",
        flush=True,
    )


def generate(conn: psycopg.Connection[Any], n: int, chunk: int = 200_000) -> None:
    """``n`` succeeded tasks finished 8 days ago, three transitions each, in chunks."""
    for lo in range(0, n, chunk):
        count = min(chunk, n - lo)
        with conn.transaction():
            conn.execute(
                "INSERT INTO jobtrail_tasks (kind, queue, state, payload, payload_hash, attempts,"
                " max_attempts, lease_seconds, reentrant, run_at, last_reason, seq,"
                " budget_started_at, created_at, updated_at, finished_at)"
                " SELECT 'old', 'default', 'succeeded', jsonb_build_object('i', g), md5(g::text),"
                " 1, 3, 30, true, t, 'completed', 3, t, t, t + interval '1 second',"
                " t + interval '1 second'"
                " FROM generate_series(1, %(n)s) AS g,"
                " LATERAL (SELECT now() - interval '8 days'"
                " - make_interval(secs => g::float8 / 1000) AS t) AS tt",
                {"n": count},
            )
            conn.execute(
                "INSERT INTO jobtrail_transition_log (task_id, seq, from_state, to_state, reason,"
                " actor, attempt, at, data)"
                " SELECT t.id, s.seq, s.from_state, s.to_state, s.reason, s.actor, s.attempt,"
                " t.created_at + make_interval(secs => s.seq - 1), s.data::jsonb"
                " FROM (SELECT id, created_at FROM jobtrail_tasks ORDER BY id DESC LIMIT %(n)s) t,"
                " (VALUES (1, NULL, 'queued', 'enqueued', 'caller', 0, '{}'),"
                "  (2, 'queued', 'leased', 'claimed', 'w:1:x', 1, '{\"waited\": 0.01}'),"
                "  (3, 'leased', 'succeeded', 'completed', 'w:1:x', 1, '{}'))"
                " AS s(seq, from_state, to_state, reason, actor, attempt, data)",
                {"n": count},
            )
        print(f"  generated {lo + count} tasks", flush=True)


class Claimer(threading.Thread):
    """Claims 5 at a time from the due queue ``probe`` in a loop (the worker's fast path) and
    records each claim's latency, tagged with the phase it ran in."""

    def __init__(self, app: jobtrail.App) -> None:
        super().__init__(daemon=True)
        self.app = app
        self.phase = "before"
        self.samples: dict[str, list[float]] = {"before": [], "during": [], "after": []}
        self.stop = threading.Event()
        self.claimed = 0

    def run(self) -> None:
        driver = self.app._driver
        request = Claim(owner="bench:1:x", queues=["probe"], kinds=["p"], limit=5, version=None)
        while not self.stop.is_set():
            start = time.perf_counter()
            with driver.single_statement(pinned=True) as tx:
                rows = transition.claim_unlimited(driver, tx, request)
            self.samples[self.phase].append(time.perf_counter() - start)
            self.claimed += len(rows)
            time.sleep(0.01)  # a worker claims when slots free up, not in a tight loop


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000


def latency(label: str, values: list[float]) -> None:
    print(
        f"claim {label:6}: n={len(values):6}  p50 {pct(values, 50):6.2f} ms  p99"
        f" {pct(values, 99):6.2f} ms  max {max(values) * 1000:7.2f} ms"
        f"  mean {statistics.fmean(values) * 1000:6.2f} ms",
        flush=True,
    )


def bench_prune(args: argparse.Namespace) -> None:
    url = fresh(args.pg)
    app = jobtrail.App(url)
    app.migrate()
    app.task("p")(lambda ctx, payload: None)
    conn = psycopg.connect(url, autocommit=True)
    start = time.perf_counter()
    generate(conn, args.tasks)
    print(f"generated {args.tasks} tasks in {time.perf_counter() - start:.0f} s", flush=True)
    conn.execute("VACUUM ANALYZE jobtrail_tasks")
    conn.execute("VACUUM ANALYZE jobtrail_transition_log")
    n = conn.execute("SELECT count(*) FROM jobtrail_transitions").fetchone()
    print(f"transitions: {n[0] if n else '?'}")
    # due tasks for the claimer: more than it can take in the whole run
    app.enqueue_many([{"kind": "p", "queue": "probe"} for _ in range(args.probes)])
    # a quiet start: the load's dirty pages written, its statistics taken
    conn.execute("CHECKPOINT")
    conn.execute("ANALYZE jobtrail_tasks")
    show("before", sizes(conn))
    claimer = Claimer(app)
    claimer.start()
    time.sleep(args.before)
    claimer.phase = "during"
    pruner = jobtrail.App(url)
    start = time.perf_counter()
    # as the worker's retention thread runs it (pump.py: a 5 ms pause between batches)
    pruned = prune_retained(pruner._driver, pruner.retention, stop=threading.Event(), pause=0.005)
    took = time.perf_counter() - start
    claimer.phase = "after"
    time.sleep(min(args.before, 10))
    claimer.stop.set()
    claimer.join()
    print(f"pruned {pruned} in {took:.1f} s ({sum(pruned.values()) / took:.0f} tasks/s)")
    for phase in ("before", "during", "after"):
        if claimer.samples[phase]:
            latency(phase, claimer.samples[phase])
    print(f"claimed {claimer.claimed} probe tasks")
    show("after prune", sizes(conn))
    conn.execute("VACUUM jobtrail_tasks")
    conn.execute("VACUUM jobtrail_transition_log")
    show("after VACUUM", sizes(conn))
    pruner.close()
    app.close()
    conn.close()


def bench_steady(args: argparse.Namespace) -> None:
    url = fresh(args.pg)
    app = jobtrail.App(url, retention={"succeeded": args.retention})
    app.migrate()
    conn = psycopg.connect(url, autocommit=True)
    if args.autovacuum == "tuned":
        for statement in TUNED:
            conn.execute(statement)

    @app.task("noop")
    def noop(ctx: Any, payload: Any) -> None:
        pass

    from jobtrail.worker import Worker, WorkerOptions

    worker = Worker(
        app,
        WorkerOptions(queues=["default"], concurrency=10, poll_interval=0.1, install_signals=False),
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    vacuumer = None
    if args.vacuum_every:
        vacuumer = Vacuumer(url, args.vacuum_every)
        vacuumer.start()
    enqueued = 0
    start = time.monotonic()
    next_report = start
    batch = 100
    print(
        f"retention {args.retention} s, rate {args.rate}/s, {args.tasks} tasks,"
        f" autovacuum {args.autovacuum}, VACUUM every {args.vacuum_every or '-'} s"
    )
    while enqueued < args.tasks:
        due = start + enqueued / args.rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        app.enqueue_many([{"kind": "noop", "payload": {"i": enqueued + i}} for i in range(batch)])
        enqueued += batch
        if time.monotonic() >= next_report:
            report(conn, time.monotonic() - start, enqueued)
            next_report += args.every
    # drain and let one more retention period pass, reporting
    end = time.monotonic() + args.retention + 2 * args.every
    while time.monotonic() < end:
        time.sleep(args.every)
        report(conn, time.monotonic() - start, enqueued)
    worker.stop()
    thread.join(timeout=30)
    if vacuumer is not None:
        vacuumer.stop.set()
        vacuumer.join()
        print(f"{vacuumer.runs} VACUUMs, the longest {vacuumer.longest:.1f} s")
    app.close()
    conn.close()


class Vacuumer(threading.Thread):
    """``VACUUM (ANALYZE)`` of both tables every ``every`` seconds: what autovacuum does on a
    server where it is on (``--vacuum-every``, for a server where it is off)."""

    def __init__(self, url: str, every: float) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.every = every
        self.stop = threading.Event()
        self.runs = 0
        self.longest = 0.0

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(self.every):
                start = time.monotonic()
                conn.execute("VACUUM (ANALYZE) jobtrail_tasks, jobtrail_transition_log")
                self.runs += 1
                self.longest = max(self.longest, time.monotonic() - start)


def report(conn: psycopg.Connection[Any], t: float, enqueued: int) -> None:
    row = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded') FROM jobtrail_tasks"
    ).fetchone()
    pruned = conn.execute("SELECT COALESCE(sum(tasks), 0) FROM jobtrail_pruned").fetchone()
    vac = conn.execute(
        "SELECT relname, n_dead_tup, autovacuum_count + vacuum_count FROM pg_stat_user_tables"
        " WHERE relname IN ('jobtrail_tasks', 'jobtrail_transition_log') ORDER BY relname"
    ).fetchall()
    s = sizes(conn)
    assert row is not None and pruned is not None
    print(
        f"t={t:6.0f}s enqueued {enqueued:8} live {row[0]:7} (succeeded {row[1]:7})"
        f" pruned {pruned[0]:8}  tasks {s['tasks_total_mb']:6.1f} MB"
        f"  transitions {s['transitions_total_mb']:6.1f} MB"
        f"  dead tuples {vac[0][1]}/{vac[1][1]} vacuums {vac[0][2]}/{vac[1][2]}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("prune", "steady"))
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--probes", type=int, default=200_000)
    parser.add_argument("--before", type=float, default=20.0)
    parser.add_argument("--retention", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=800.0)
    parser.add_argument("--every", type=float, default=15.0)
    parser.add_argument("--autovacuum", choices=("default", "tuned"), default="default")
    parser.add_argument("--vacuum-every", type=float, default=0.0)
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    if args.mode == "prune":
        bench_prune(args)
    else:
        bench_steady(args)


if __name__ == "__main__":
    main()
