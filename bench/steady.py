# ruff: noqa: S603, S608
"""Steady arrival (issue 21): latency under a constant offered load, not only a drained queue.

    python bench/steady.py                          # 50% and 90% of capacity, 60 s each
    python bench/steady.py --seconds 10 --only jobtrail-pg,pgqueuer
    python bench/steady.py --capacity jobtrail-pg=5000,pgqueuer=4500

Systems: jobtrail-pg and pgqueuer on PostgreSQL, jobtrail-sqlite and huey on SQLite, through
``bench/run.py``'s machinery (``Target``, the peers' virtualenv, the drivers in
``bench/peers/``; run ``bench/run.py`` once, or link ``bench/.venv-peers``, to have the peers
installed). Each run gets a fresh store: the database ``<--db-prefix>_<system>`` (default
``bench_steady_jobtrail_pg`` ...) on the ``--pg`` server, dropped and created, or a new SQLite
file.

1. **Capacity** (unless ``--capacity`` gives it): N jobs (``--capacity-n``) are queued, then one
   worker process drains them; jobs/s from the first to the last finished job, as
   ``bench/run.py``'s "1 proc" column, but with the steady worker below (the median of
   ``--rounds`` drains). ``--common-capacity`` runs both systems of a pair at the same offered
   rates, from the lower of their two capacities; by default each runs at fractions of its own.
2. **Steady arrival**, per rate (``--rates``, fractions of that capacity): one worker process
   (driver phase ``steady_work``: concurrency 10 at the library's defaults; jobtrail with its
   adaptive prefetch unless ``BENCH_PREFETCH`` fixes one; pgqueuer ``QueueManager.run`` with its
   default batch of 10; huey a consumer of 10 threads) is started and warmed up with 20 jobs,
   then a separate enqueuer process sends ``rate x --seconds`` single enqueues, open loop:
   job i is due at ``t0 + i / rate``, ``--senders`` threads (default 16) take the jobs in
   turn, sleep until each is due and send it then, or at once if late, so a slow enqueue does
   not lower the offered rate while a sender is free. Sending stops a second after the last due
   time: what a system could not take by then is not sent (achieved/s shows it), which bounds
   the run's length. Every job carries its due time ``t`` and the time ``s`` its enqueue call
   began. The run ends when every sent job's finish is recorded.

Columns (ms; p50 / p99 / max over every job of the run):

- **offered/s**: the rate asked for; **achieved/s**: jobs sent over the time from the first due
  time to the return of the last enqueue call;
- **done/s**: jobs over the time from the first due time to the last recorded finish: below
  offered/s when the system did not keep up (a backlog grew: see pickup max);
- **send lag p99**: how late the enqueuer sent (call start - due time); large when the enqueue
  path itself cannot take the rate, and then pickup counts that wait too;
- **pickup**: the handler's start (``time.time()`` as it is entered) - the job's due time
  ``t``; **pickup-s p99**: the same from the start of its enqueue call ``s`` (what the queue
  adds once a job is sent);
- **commits/job** (PostgreSQL): transactions committed in the system's database during the run
  (``xact_commit`` of ``pg_stat_database``: the enqueuer's and the worker's, every one a WAL
  flush at ``synchronous_commit=on``) per job sent;
- **completion**: the finish as the store records it - the due time ``t``. jobtrail:
  ``finished_at`` of the task row (``now()`` of the completing transaction on PostgreSQL, the
  completing statement's clock in ms on SQLite); pgqueuer: ``created`` (``now()`` of its
  inserting transaction) of the job's ``successful`` row in ``pgqueuer_log``, written by its
  batched completion buffer; huey: ``time.time()`` in its ``SIGNAL_COMPLETE`` handler, which
  huey calls after the result is stored in its SQLite ``kv`` table (huey stores no times).

Every job is verified: each sent job ran exactly once and has a recorded finish within
``max(60, 2 x --seconds)`` of the last send, or that run fails (reported; the others go on, and
the script exits 1 after the table). Ratio rows: jobtrail-pg / pgqueuer and jobtrail-sqlite /
huey per rate (below 1 is better). All clocks are the one machine's wall clock.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import Target, install_peers  # noqa: E402

#: system -> SQL giving (id as text, finish as epoch seconds) of its finished jobs; None: the
#: driver's completion file (huey)
FINISHES: dict[str, str | None] = {
    "jobtrail-pg": "SELECT id::text, extract(epoch FROM finished_at)::float8"
    " FROM jobtrail_tasks WHERE state = 'succeeded'",
    "pgqueuer": "SELECT job_id::text, extract(epoch FROM created)::float8"
    " FROM pgqueuer_log WHERE status = 'successful'",
    "jobtrail-sqlite": "SELECT CAST(id AS TEXT), finished_at FROM jobtrail_tasks"
    " WHERE state = 'succeeded'",
    "huey": None,
}
PAIRS = (("jobtrail-pg", "pgqueuer"), ("jobtrail-sqlite", "huey"))
WARM = 20  # jobs that warm the worker up before a measured run (not counted)


class SteadyTarget(Target):
    """A ``Target`` whose driver processes also get ``extra`` in their environment."""

    def __init__(self, name: str, pg: str, tmp: Path, dbname: str) -> None:
        super().__init__(name, pg, tmp, dbname=dbname)
        self.extra: dict[str, str] = {}

    def env(self) -> dict[str, str]:
        env = super().env() | self.extra
        if "BENCH_PREFETCH" in os.environ:  # Target drops it (run.py's defaults rows)
            env["BENCH_PREFETCH"] = os.environ["BENCH_PREFETCH"]
        return env

    def finishes(self, done_file: Path) -> dict[str, float]:
        sql = FINISHES[self.name]
        if sql is None:
            return {a: float(b) for a, b in read_rows(done_file, 2)}
        if self.backend == "pg":
            with psycopg.connect(self.url, autocommit=True) as conn:
                rows = conn.execute(sql).fetchall()
        else:
            with sqlite3.connect(self.url[len("sqlite:///") :], timeout=30) as conn:
                rows = conn.execute(sql).fetchall()
        return {str(a): float(b) for a, b in rows}

    def commits(self, settled: bool = True) -> int | None:
        """Transactions committed in this database so far (PostgreSQL); with ``settled``, once
        every other session of it has ended (a backend reports its counts when it exits at the
        latest; a live one within about a second of going idle)."""
        if self.backend != "pg":
            return None
        with psycopg.connect(self.pg, autocommit=True) as conn:
            deadline = time.monotonic() + (10 if settled else 0)
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.dbname,)
                ).fetchone()
                if row == (0,):
                    break
                time.sleep(0.1)
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (self.dbname,)
            ).fetchone()
        return int(row[0]) if row else None

    def drop(self) -> None:
        if self.backend == "pg":
            with psycopg.connect(self.pg, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')


def read_rows(path: Path, width: int) -> list[list[str]]:
    """The complete lines of ``path`` split in fields (a line still being written is left)."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")[:-1]  # the part after the last newline is incomplete
    return [x.split() for x in lines if len(x.split()) == width]


def count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def dbname_for(prefix: str, name: str) -> str:
    return f"{prefix}_{name.replace('-', '_')}"


def measure_capacity(name: str, n: int, pg: str, tmp: Path, prefix: str) -> float:
    t = SteadyTarget(name, pg, tmp, dbname_for(prefix, name))
    try:
        t.phase("setup", 0)
        if "skip" in t.phase("enqueue_bulk", n):
            t.phase("enqueue_single", n)
        rate, _cpu = t.process(1, n, timeout=max(120.0, n / 20), phase="steady_work")
        return rate
    finally:
        t.drop()


def wait_for(what: str, done: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def steady_run(
    name: str, rate: float, seconds: float, senders: int, pg: str, tmp: Path, prefix: str
) -> dict[str, Any]:
    """One worker process under ``rate`` jobs/s for ``seconds``; the row of the table."""
    started, done_file = tmp / f"{name}-started.txt", tmp / f"{name}-done.txt"
    for f in (started, done_file):
        f.write_text("")
    t = SteadyTarget(name, pg, tmp, dbname_for(prefix, name))
    t.extra = {"BENCH_STEADY_FILE": str(started), "BENCH_STEADY_DONE": str(done_file)}
    n = asked = max(1, round(rate * seconds))
    try:
        t.phase("setup", 0)
        errors = (tmp / f"{name}-worker.err").open("w+")
        worker = subprocess.Popen(
            [t.python, t.script, t.url, "steady_work", "0"],
            env=t.env(),
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            t.extra |= {"BENCH_RATE": "200", "BENCH_SENDERS": "1"}
            t.phase("steady_enqueue", WARM)
            wait_for("the warm-up jobs", lambda: count_lines(started) >= WARM, 60)
            time.sleep(0.2)  # their completions too (a batched completion may trail)
            for f in (started, done_file):  # O_APPEND writers: truncating is safe
                f.write_text("")
            t.extra |= {"BENCH_RATE": repr(rate), "BENCH_SENDERS": str(senders)}
            commits0 = t.commits(settled=False)
            sent = t.phase("steady_enqueue", n)
            n = sent["sent"]  # fewer than asked when the enqueue path could not take the rate
            drain = max(60.0, 2 * seconds)
            wait_for(f"{n} handler starts", lambda: count_lines(started) >= n, drain)
            rows = read_rows(started, 4)
            ids = [r[0] for r in rows]
            if len(set(ids)) != len(ids) or len(ids) != n:
                raise RuntimeError(f"{name}: {len(ids)} handler runs, {len(set(ids))} jobs")
            finishes: dict[str, float] = {}

            def all_finished() -> bool:
                finishes.update(t.finishes(done_file))
                return all(i in finishes for i in ids)

            wait_for(f"{n} recorded finishes", all_finished, drain)
        finally:
            worker.terminate()
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            errors.seek(0)
            err = errors.read()
            errors.close()
            if worker.returncode not in (0, -15) and err:
                print(f"  {name} worker exited {worker.returncode}: {err[-800:]}", flush=True)
        commits1 = t.commits()
    finally:
        t.drop()
    due = [float(r[1]) for r in rows]
    pickup = sorted((float(r[3]) - d) * 1000 for r, d in zip(rows, due, strict=True))
    pickup_sent = sorted((float(r[3]) - float(r[2])) * 1000 for r in rows)
    completion = sorted((finishes[r[0]] - d) * 1000 for r, d in zip(rows, due, strict=True))
    return {
        "offered": rate,
        "achieved": sent["achieved"],
        "done": n / max(max(finishes[i] for i in ids) - min(due), 1e-9),
        "send_p99": sent["send_lag_p99_ms"],
        "pickup_p50": pct(pickup, 0.5),
        "pickup_p99": pct(pickup, 0.99),
        "pickup_max": pickup[-1],
        "pickup_sent_p99": pct(pickup_sent, 0.99),
        "completion_p50": pct(completion, 0.5),
        "completion_p99": pct(completion, 0.99),
        "completion_max": completion[-1],
        "commits": None if commits1 is None else (commits1 - commits0) / n,
        "jobs": n,
        "unsent": asked - n,
    }


def pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(len(xs) * q))]


COLS = [
    ("offered", "offered/s", None),
    ("achieved", "achieved/s", None),
    ("done", "done/s", None),
    ("send_p99", "send lag p99", False),
    ("pickup_p50", "pickup p50", False),
    ("pickup_p99", "pickup p99", False),
    ("pickup_max", "pickup max", False),
    ("pickup_sent_p99", "pickup-s p99", False),
    ("completion_p50", "compl. p50", False),
    ("completion_p99", "compl. p99", False),
    ("completion_max", "compl. max", False),
    ("commits", "commits/job", False),
]


def fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"


def table(results: dict[tuple[str, float], dict[str, Any]], fractions: list[float]) -> str:
    head = f"{'system':<17}{'rate':>6}" + "".join(f"{c[1]:>14}" for c in COLS)
    lines = [head, "-" * len(head)]
    for ours, peer in PAIRS:
        for frac in fractions:
            for name in (ours, peer):
                r = results.get((name, frac))
                if r is not None:
                    cells = "".join(f"{fmt(r[k]):>14}" for k, _label, _ in COLS)
                    lines.append(f"{name:<17}{f'{frac:.0%}':>6}{cells}")
            a, b = results.get((ours, frac)), results.get((peer, frac))
            if a is not None and b is not None:
                cells = "".join(
                    f"{'' if lower is None else ratio(a[k], b[k]):>14}" for k, _l, lower in COLS
                )
                label = f"ratio {ours.split('-')[1]}"
                lines.append(f"{label:<17}{f'{frac:.0%}':>6}{cells}")
        lines.append("")
    return "\n".join(lines)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def median(values: list[Any]) -> Any:
    """The median, or None when a round had no value (commits on SQLite)."""
    return None if None in values else statistics.median(values)


def parse_capacity(text: str, names: list[str]) -> dict[str, float]:
    """``5000`` (every system) or ``jobtrail-pg=5000,pgqueuer=4500``."""
    if not text:
        return {}
    if "=" not in text:
        return dict.fromkeys(names, float(text))
    return {k: float(v) for k, v in (x.split("=", 1) for x in text.split(","))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rates", default="0.5,0.9", help="fractions of each capacity")
    parser.add_argument(
        "--capacity", default="", help="jobs/s, one for all or NAME=RATE,...; else measured"
    )
    parser.add_argument("--capacity-n", type=int, default=10_000, help="jobs drained to measure")
    parser.add_argument(
        "--common-capacity",
        action="store_true",
        help="run both systems of a pair at the same offered rates, from the lower capacity",
    )
    parser.add_argument("--senders", type=int, default=16, help="enqueuer threads")
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--db-prefix", default="bench_steady", help="database name prefix")
    parser.add_argument("--only", default="", help="comma-separated systems")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure capacities and run every rate this many times, interleaved; each cell "
        "(and capacity) is the median",
    )
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = parser.parse_args()
    names = [x for x in FINISHES if not args.only or x in args.only.split(",")]
    skipped = {} if args.no_install else install_peers()
    names = [x for x in names if x not in skipped]
    fractions = [float(x) for x in args.rates.split(",")]
    capacity = parse_capacity(args.capacity, names)
    runs: dict[tuple[str, float], list[dict[str, Any]]] = {}
    failed: list[str] = []
    prefix = args.db_prefix
    with tempfile.TemporaryDirectory() as tmp:
        drained: dict[str, list[float]] = {}
        for _round in range(args.rounds):  # interleaved, as the steady runs below
            for name in (x for x in names if x not in capacity):
                print(f"capacity of {name} (N={args.capacity_n}) ...", flush=True)
                rate = measure_capacity(name, args.capacity_n, args.pg, Path(tmp), args.db_prefix)
                print(f"  {name}: {rate:,.0f} jobs/s", flush=True)
                drained.setdefault(name, []).append(rate)
        capacity |= {k: statistics.median(v) for k, v in drained.items()}
        if args.common_capacity:  # both of a pair at the same offered rates: the lower one's
            for pair in PAIRS:
                if all(x in capacity for x in pair):
                    low = min(capacity[x] for x in pair)
                    capacity |= dict.fromkeys(pair, low)
        for round_ in range(1, args.rounds + 1):
            for frac in fractions:  # every system at one rate, then the next rate
                for name in names:
                    rate = capacity[name] * frac
                    print(f"{name} at {frac:.0%} ({rate:,.0f}/s), round {round_} ...", flush=True)
                    try:
                        row = steady_run(
                            name, rate, args.seconds, args.senders, args.pg, Path(tmp), prefix
                        )
                    except Exception as exc:  # one broken run must not hide the others
                        print(f"  failed: {exc}", flush=True)
                        failed.append(f"{name} at {frac:.0%}: {exc}")
                        continue
                    print(f"  {json.dumps(row)}", flush=True)
                    runs.setdefault((name, frac), []).append(row)
    results = {k: {c: median([r[c] for r in v]) for c in v[0]} for k, v in runs.items()}
    prefetch = os.environ.get("BENCH_PREFETCH")
    print()
    print(
        f"{args.seconds:g} s per rate, 1 worker process of concurrency 10 (jobtrail: "
        + (f"prefetch {prefetch}" if prefetch else "library defaults")
        + f"), {args.senders} enqueuer threads, {os.cpu_count()} CPUs, capacity "
        + ", ".join(f"{k} {v:,.0f}/s" for k, v in capacity.items())
        + (" (the lower of each pair for both)" if args.common_capacity else "")
        + (f", median of {args.rounds} rounds" if args.rounds > 1 else "")
        + "; times in ms"
    )
    print(table(results, fractions))
    for line in failed:
        print(f"failed: {line}")
    if args.json:
        print(json.dumps({f"{k[0]}@{k[1]}": v for k, v in results.items()}))
    if failed:
        sys.exit(1)  # after the table of the runs that did finish


if __name__ == "__main__":
    main()
