# ruff: noqa: S608
"""What a drained job costs the PostgreSQL server (issue 21): WAL and statement time per job.

    python bench/server_cost.py                        # jobtrail-pg and pgqueuer, N=20,000
    python bench/server_cost.py --n 5000 --rounds 3 --only jobtrail-pg

Needs the ``pg_stat_statements`` extension loaded by the server
(``shared_preload_libraries = 'pg_stat_statements'``, a restart) and created in the ``--pg``
database (this script creates it there when it can). For each system (``bench/run.py``'s
``Target``: a fresh database, the same drivers and peers' virtualenv), N no-op jobs are queued
in bulk, then one worker process (concurrency 10, the library's defaults) drains them; the
columns are per job over the drain only, from the statements run in that system's database:

- **WAL records** and **WAL bytes** (``wal_records``, ``wal_bytes``; full-page images are
  counted in both, and shown alone as ``fpi``): what the server writes and flushes;
- **statements**: statements executed (round trips, roughly);
- **exec us**: the statements' execution time (``total_exec_time``): the server's side of the
  work, without the client's;
- **CPU ms/1k**: the worker process and its backends, from ``/proc`` (as ``bench/run.py``).

The peers' drivers and virtualenv are ``bench/run.py``'s (``--no-install`` there, or run it
once first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import Target  # noqa: E402

SUMS = """
SELECT coalesce(sum(s.wal_records), 0), coalesce(sum(s.wal_bytes), 0),
       coalesce(sum(s.wal_fpi), 0), coalesce(sum(s.calls), 0),
       coalesce(sum(s.total_exec_time), 0)
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = %s
"""


def sums(pg: str, dbname: str) -> list[float]:
    with psycopg.connect(pg, autocommit=True) as conn:
        row = conn.execute(SUMS, (dbname,)).fetchone()
    assert row is not None
    return [float(v) for v in row]


def check_extension(pg: str) -> None:
    with psycopg.connect(pg, autocommit=True) as conn:
        loaded = conn.execute("SHOW shared_preload_libraries").fetchone()
        if loaded is None or "pg_stat_statements" not in str(loaded[0]):
            raise SystemExit(
                "pg_stat_statements is not loaded: set shared_preload_libraries = "
                "'pg_stat_statements' on the server and restart it"
            )
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def measure(name: str, pg: str, n: int, tmp: Path) -> dict[str, float]:
    target = Target(name, pg, tmp)
    target.phase("setup", 0)
    target.phase("enqueue_bulk", n)
    time.sleep(1.0)  # the enqueue's statements are counted before the snapshot
    before = sums(pg, target.dbname)
    rate, cpu = target.process(1, n, timeout=600)
    time.sleep(1.5)  # a backend reports its statements when its statement ends
    after = sums(pg, target.dbname)
    records, wal, fpi, calls, exec_ms = (b - a for a, b in zip(before, after, strict=True))
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{target.dbname}" WITH (FORCE)')
    return {
        "jobs/s": rate,
        "CPU ms/1k": cpu,
        "WAL records": records / n,
        "WAL bytes": wal / n,
        "fpi": fpi / n,
        "statements": calls / n,
        "exec us": exec_ms * 1000 / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", default="jobtrail-pg,pgqueuer", help="comma-separated")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    check_extension(args.pg)
    names = [x for x in args.only.split(",") if x]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name in names:
                print(f"{name}, round {r + 1} ...", flush=True)
                runs[name].append(measure(name, args.pg, args.n, Path(tmp)))
    columns = list(next(iter(runs.values()))[0])
    print(f"\nN={args.n}, 1 worker process of concurrency 10 at defaults, median of {args.rounds}")
    print(f"{'system':<14}" + "".join(f"{c:>13}" for c in columns))
    for name, results in runs.items():
        cells = [statistics.median(r[c] for r in results) for c in columns]
        print(f"{name:<14}" + "".join(f"{v:>13,.2f}" for v in cells))


if __name__ == "__main__":
    main()
