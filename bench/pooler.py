"""Issue 18: PostgreSQL direct vs. through PgBouncer, same run.

    python bench/pooler.py                      # N=10,000 processed, 2,000 single enqueues
    python bench/pooler.py --n 20000 --single 5000 --rounds 3

Starts a PgBouncer (Debian's ``pgbouncer``, ``tests/bouncer.py``: ``default_pool_size=8``) in
front of the PostgreSQL at ``--pg`` (default ``JOBTRAIL_TEST_PG_URL``), on a fresh database
``bench_pooler``. For each setting — direct, PgBouncer ``pool_mode=transaction`` with
``App(pooler="transaction")`` (no LISTEN: polling), and PgBouncer ``pool_mode=session`` — it
measures, on an emptied table:

* single enqueues: ``app.enqueue`` one after the other from one thread (tasks/s, p50 and p99
  latency in ms);
* batch enqueues: ``enqueue_many`` of 1,000 at a time (tasks/s);
* processing: N no-op tasks queued first, one in-process worker (concurrency 10) (jobs/s).

The settings are interleaved round by round so that the machine's drift hits them alike;
the table shows the median over ``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from _worker_rate import worker_rate  # noqa: E402
from bouncer import Bouncer  # noqa: E402

import jobtrail  # noqa: E402

DB = "bench_pooler"


def make_app(url: str, **options: Any) -> jobtrail.App:
    app = jobtrail.App(url, **options)

    @app.task("noop", max_attempts=1)
    def noop(ctx: Any, payload: Any) -> None:
        pass

    return app


def empty(direct: str) -> None:
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute("TRUNCATE jobtrail_transition_log, jobtrail_tasks CASCADE")
        conn.execute("VACUUM ANALYZE jobtrail_tasks")
        conn.execute("VACUUM ANALYZE jobtrail_transition_log")


def singles(app: jobtrail.App, n: int) -> tuple[float, float, float]:
    times = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        app.enqueue("noop", {"i": i})
        times.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    times.sort()
    return n / elapsed, 1000 * times[len(times) // 2], 1000 * times[int(len(times) * 0.99)]


def batches(app: jobtrail.App, n: int) -> float:
    start = time.perf_counter()
    for i in range(0, n, 1000):
        app.enqueue_many([{"kind": "noop", "payload": {"i": j}} for j in range(min(1000, n - i))])
    return n / (time.perf_counter() - start)


def process(app: jobtrail.App, n: int) -> float:
    return worker_rate(app.worker_collaborators(), n)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--pg",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--n", type=int, default=10_000, help="tasks processed per setting")
    parser.add_argument("--single", type=int, default=2_000, help="single enqueues per setting")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with psycopg.connect(args.pg, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    direct = args.pg.rsplit("/", 1)[0] + "/" + DB
    bouncer = Bouncer(direct)
    bouncer.start()
    try:
        urls = bouncer.add("public")
        settings: dict[str, tuple[str, dict[str, Any]]] = {
            "direct": (direct, {}),
            "pgbouncer transaction": (urls["transaction"], {"pooler": "transaction"}),
            "pgbouncer session": (urls["session"], {"pooler": "session"}),
        }
        with jobtrail.App(direct) as app:
            app.migrate()
        results: dict[str, dict[str, list[float]]] = {name: {} for name in settings}
        for r in range(args.rounds):
            for name, (url, options) in settings.items():
                app = make_app(url, **options)
                try:
                    got: dict[str, float] = {}
                    empty(direct)
                    got["single/s"], got["p50 ms"], got["p99 ms"] = singles(app, args.single)
                    empty(direct)
                    got["batch/s"] = batches(app, args.n)
                    got["process/s"] = process(app, args.n)
                finally:
                    app.close()
                for key, value in got.items():
                    results[name].setdefault(key, []).append(value)
                print(
                    f"round {r + 1} {name}: " + ", ".join(f"{k} {v:,.2f}" for k, v in got.items())
                )
        keys = ["single/s", "p50 ms", "p99 ms", "batch/s", "process/s"]
        print()
        print(f"| setting | {' | '.join(keys)} |")
        print("|---|" + "---:|" * len(keys))
        for name, values in results.items():
            cells = []
            for key in keys:
                med = statistics.median(values[key])
                cells.append(f"{med:.2f}" if "ms" in key else f"{med:,.0f}")
            print(f"| {name} | {' | '.join(cells)} |")
        print(
            f"\nN={args.n} processed (worker concurrency 10, no-op handler), {args.single} single "
            f"enqueues, batches of 1,000; median of {args.rounds} rounds; PgBouncer "
            "default_pool_size=8"
        )
    finally:
        bouncer.close()
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


if __name__ == "__main__":
    main()
