"""What the live workers' heartbeat costs a worker's claims.

    python bench/heartbeat.py --before-src /tmp/jt-before/src       # the code before, to compare
    python bench/heartbeat.py --n 20000 --rounds 3 --backends pg,sqlite

For each backend it measures claims/s of one in-process worker (concurrency 10, the default
prefetch) working off N queued no-op tasks, from its start until it has finished them all
(and the CPU its process used meanwhile, per 1,000 claims: steadier than the rate on a
shared machine),
in three settings, interleaved round by round so that the machine's drift hits them alike:

* ``before``: the code at ``--before-src`` (a checkout of the commit before the heartbeat;
  skipped without it): no heartbeat row at all;
* ``beat 5s``: this code with its default heartbeat (a statement every 5 s);
* ``beat 0.05s``: a heartbeat every 50 ms, 100 times the default, to make its cost visible.

Each measurement runs in a subprocess of its own on a fresh store (a new PostgreSQL database
``bench_heartbeat`` on ``--pg``, default ``JOBTRAIL_TEST_PG_URL``; a new SQLite file). The
table shows the median of ``--rounds`` and every round's figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DB = "bench_heartbeat"
PG = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def one(backend: str, n: int, beat: float | None, pg: str) -> tuple[float, float]:
    """One measurement in this process (``sys.path`` already points at the code to measure)."""
    import jobtrail
    from jobtrail.worker import Worker, WorkerOptions

    if backend == "pg":
        import psycopg

        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB}")
            conn.execute(f"CREATE DATABASE {DB}")
        url = pg.rsplit("/", 1)[0] + "/" + DB
    else:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='bench-heartbeat-')}/jobtrail.db"
    app = jobtrail.App(url)

    @app.task("noop", max_attempts=1)
    def noop(ctx: Any, payload: Any) -> None:
        pass

    app.migrate()
    for start in range(0, n, 1000):
        app.enqueue_many(
            [{"kind": "noop", "payload": {"i": i}} for i in range(start, min(n, start + 1000))]
        )
    extra: dict[str, Any] = {}
    if beat is not None:
        extra = {"beat_interval": beat, "stale_after": max(60.0, 4 * beat)}
    worker = Worker(
        app.worker_collaborators(),
        WorkerOptions(queues=["default"], concurrency=10, install_signals=False, **extra),
    )
    thread = threading.Thread(target=worker.run)
    began, cpu = time.perf_counter(), time.process_time()
    thread.start()
    while worker.processed < n:
        time.sleep(0.001)
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu
    worker.stop()
    thread.join()
    app.close()
    return n / elapsed, cpu * 1000 / (n / 1000)


def measure(src: Path, backend: str, n: int, beat: float | None, pg: str) -> tuple[float, float]:
    args = [sys.executable, __file__, "--one", backend, "--n", str(n), "--pg", pg]
    if beat is not None:
        args += ["--beat", str(beat)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return float(got["claims_per_s"]), float(got["cpu_ms_per_1000"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="pg,sqlite")
    parser.add_argument("--before-src", type=Path, default=None)
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--one", choices=["pg", "sqlite"], help=argparse.SUPPRESS)
    parser.add_argument("--beat", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        rate, cpu = one(args.one, args.n, args.beat, args.pg)
        print(json.dumps({"claims_per_s": rate, "cpu_ms_per_1000": cpu}))
        return
    settings: list[tuple[str, Path, float | None]] = []
    if args.before_src is not None:
        settings.append(("before", args.before_src, None))
    settings += [("beat 5s", ROOT / "src", None), ("beat 0.05s", ROOT / "src", 0.05)]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(args.rounds):
        for backend in args.backends.split(","):
            for name, src, beat in settings:
                rate, cpu = measure(src, backend, args.n, beat, args.pg)
                results.setdefault((backend, name), []).append((rate, cpu))
                print(
                    f"round {r + 1} {backend:6} {name:10} {rate:8.0f} claims/s "
                    f"{cpu:6.0f} CPU ms/1000",
                    flush=True,
                )
    print(f"\nN={args.n} no-op tasks, 1 worker, concurrency 10; median of {args.rounds} rounds")
    print("(claims/s; the worker process's CPU ms per 1,000 claims; then each round's claims/s)")
    for (backend, name), got in results.items():
        rates, cpus = [g[0] for g in got], [g[1] for g in got]
        rounds = ", ".join(f"{x:.0f}" for x in rates)
        print(
            f"{backend:6} {name:10} {statistics.median(rates):8.0f} claims/s "
            f"{statistics.median(cpus):6.0f} CPU ms/1000  ({rounds})"
        )


if __name__ == "__main__":
    main()
