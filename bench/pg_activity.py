# ruff: noqa: S608
"""What a bench's PostgreSQL backends do, for ``bench/many_workers.py``.

* ``Sampler``: reads ``pg_stat_activity`` (and the locks waited for, from ``pg_locks``) of one
  database every few milliseconds, and sums it up: connections per client process (by
  ``application_name``) and by state, the wait events of the active backends, what they run,
  and which locks they wait for.
* ``idle_cost``: transactions, index scans and CPU per second of a set of backends doing their
  background work (cumulative statistics: ``pg_stat_database``, ``pg_stat_user_indexes``).
* ``commit_probe``: commits per second of P connections, each updating its own row, with and
  without a ``pg_notify`` in the same statement: whether NOTIFY serializes the commits.
"""

from __future__ import annotations

import collections
import re
import statistics
import threading
import time
from typing import Any

import psycopg
from run import TICK, cpu_ticks

ACTIVITY = """
SELECT application_name, state, wait_event_type, wait_event, query
FROM pg_stat_activity
WHERE datname = %(db)s AND pid <> pg_backend_pid() AND backend_type = 'client backend'
"""
#: PostgreSQL's NOTIFY lock (async.c): one for the whole cluster, taken by every transaction
#: that notifies just before its commit and held until the commit is durable; who holds it or
#: waits for it, from this database (ours) or from others
NOTIFY_LOCK = """
SELECT a.datname = %(db)s, l.granted, count(*)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'object' AND l.database = 0 AND l.objid = 0
  AND l.classid = 'pg_database'::regclass
GROUP BY 1, 2
"""
WAITING = """
SELECT l.locktype, l.mode, COALESCE(l.relation::regclass::text,
       l.classid::regclass::text || ' ' || l.objid, l.locktype), a.query,
       (SELECT b.query FROM pg_stat_activity b
        WHERE b.pid = (pg_blocking_pids(l.pid))[1] LIMIT 1)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND a.datname = %(db)s
"""


def short(query: str) -> str:
    """A statement's first words without comments: enough to tell the statements apart."""
    text = " ".join(re.sub(r"--[^\n]*", " ", query or "").split())
    return text[:60] or "-"


class Sampler(threading.Thread):
    """Samples one database's backends every ``interval`` seconds until ``halt`` is set; only
    the connections whose ``application_name`` starts with ``prefix`` are summed up."""

    def __init__(self, pg: str, dbname: str, interval: float, prefix: str) -> None:
        super().__init__(daemon=True)
        self.pg, self.dbname, self.interval, self.prefix = pg, dbname, interval, prefix
        self.samples: list[list[tuple[Any, ...]]] = []
        self.locks: collections.Counter[str] = collections.Counter()
        self.notify: collections.Counter[str] = collections.Counter()
        self.halt = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.pg, autocommit=True, application_name="bench_sampler") as conn:
            while not self.halt.is_set():
                params = {"db": self.dbname}
                self.samples.append(list(conn.execute(ACTIVITY, params).fetchall()))
                for kind, mode, what, query, blocker in conn.execute(WAITING, params):
                    if kind == "object":  # the NOTIFY lock: who waits is always a commit
                        self.locks[f"{kind} {mode} {what}"] += 1
                    else:
                        self.locks[f"{kind} {mode} {what}: {short(query)} <- {short(blocker)}"] += 1
                for ours, granted, count in conn.execute(NOTIFY_LOCK, params):
                    who = "ours" if ours else "other databases"
                    self.notify[f"{'held' if granted else 'waited'} by {who}"] += count
                self.halt.wait(self.interval)

    def report(self) -> dict[str, Any]:
        per_client: list[int] = []  # connections of one client process in one sample
        totals: list[int] = []
        states: collections.Counter[str] = collections.Counter()
        waits: collections.Counter[str] = collections.Counter()
        running: collections.Counter[str] = collections.Counter()
        for sample in self.samples:
            ours = [r for r in sample if (r[0] or "").startswith(self.prefix)]
            by_app = collections.Counter(r[0] for r in ours)
            per_client += list(by_app.values())
            totals.append(len(ours))
            for _app, state, wtype, wevent, query in ours:
                states[state or "?"] += 1
                if state == "active":
                    waits[f"{wtype}:{wevent}" if wtype else "CPU (no wait event)"] += 1
                    running[short(query)] += 1
        n = max(1, len(self.samples))
        return {
            "samples": len(self.samples),
            "conn_per_worker_mean": statistics.mean(per_client) if per_client else 0.0,
            "conn_per_worker_max": max(per_client, default=0),
            "conn_total_mean": statistics.mean(totals) if totals else 0.0,
            "conn_total_max": max(totals, default=0),
            "states_per_sample": {k: round(v / n, 2) for k, v in states.most_common()},
            "active_per_sample": round(sum(waits.values()) / n, 2),
            "waits": dict(waits.most_common(8)),
            "running": dict(running.most_common(6)),
            "lock_waits": dict(self.locks.most_common(6)),
            "notify_lock": dict(sorted(self.notify.items())),
            # backends of other databases holding or waiting for the NOTIFY lock, per sample
            "notify_others": sum(v for k, v in self.notify.items() if "other" in k) / n,
        }


def backend_pids(conn: psycopg.Connection[Any], dbname: str, prefix: str) -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND starts_with(application_name, %s)",
        (dbname, prefix),
    ).fetchall()
    return [int(r[0]) for r in rows]


def counters(conn: psycopg.Connection[Any], dbname: str) -> dict[str, int]:
    """The database's transactions and each jobtrail index's scans (cumulative)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (dbname,)
    ).fetchone()
    out = {"xacts": int(row[0]) if row else 0}
    for name, scans in conn.execute(
        "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname LIKE 'jobtrail_%'"
    ).fetchall():
        out[name] = int(scans)
    return out


def idle_cost(
    conn: psycopg.Connection[Any], dbname: str, prefix: str, pids: list[int], seconds: float
) -> dict[str, Any]:
    """Per second over ``seconds``: transactions and index scans in ``dbname``, CPU of the
    client processes ``pids`` (with their children) and of the backends whose
    ``application_name`` starts with ``prefix``. A backend reports its statistics up to 10 s
    late (PGSTAT_IDLE_INTERVAL): the caller leaves that long after any burst of work."""
    backends = backend_pids(conn, dbname, prefix)
    before = counters(conn, dbname)
    b0 = {p: cpu_ticks([p]) for p in backends}
    w0 = cpu_ticks(pids, tree=True)
    t0 = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - t0
    w1 = cpu_ticks(pids, tree=True)
    b1 = sum(cpu_ticks([p]) - b0.get(p, 0) for p in backend_pids(conn, dbname, prefix))
    after = counters(conn, dbname)
    per_s = {k: (after[k] - before.get(k, 0)) / elapsed for k in after}
    return {
        "seconds": elapsed,
        "xacts_per_s": per_s.pop("xacts"),
        "scans_per_s": {k: round(v, 1) for k, v in sorted(per_s.items()) if v > 0},
        "cpu_ms_per_s_workers": (w1 - w0) * 1000 / TICK / elapsed,
        "cpu_ms_per_s_backends": b1 * 1000 / TICK / elapsed,
        "connections": len(backend_pids(conn, dbname, prefix)),
    }


PROBE_WRITE = (
    "WITH u AS (UPDATE bench_commit_probe SET n = n + 1 WHERE id = %(id)s RETURNING id),"
    " l AS (INSERT INTO bench_commit_log SELECT %(id)s, repeat('x', 200)"
    " FROM generate_series(1, %(rows)s))"
    " SELECT {notify} FROM u"
)
NOTIFY = "pg_notify('bench_commit_probe', '')"


def commit_probe(url: str, clients: int, seconds: float, mode: str, rows: int = 20) -> float:
    """Commits per second of ``clients`` connections on threads, each in autocommit updating
    its own row and appending ``rows`` rows of 200 bytes (about what a worker's round trip
    of 10 tasks writes) per statement. ``mode``: ``plain``; ``in``: a pg_notify in that
    statement (as jobtrail's completions); ``after``: the pg_notify as a statement of its own
    right after the commit (a transaction with no writes: no WAL flush under the lock)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (id int PRIMARY KEY, n int)")
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit_log (id int, pad text)")
        conn.execute("TRUNCATE bench_commit_log")
        conn.execute(
            "INSERT INTO bench_commit_probe SELECT g, 0 FROM generate_series(0, %s) g"
            " ON CONFLICT DO NOTHING",
            (clients,),
        )
    write = PROBE_WRITE.format(notify=NOTIFY if mode == "in" else "1")
    counts = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def client(i: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            start.wait()
            while not stop.is_set():
                conn.execute(write, {"id": i, "rows": rows})
                if mode == "after":
                    conn.execute(f"SELECT {NOTIFY}")
                counts[i] += 1

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    done = sum(counts)
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.join(10)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE bench_commit_log")
    return done / elapsed
