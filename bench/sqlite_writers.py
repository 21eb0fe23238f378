# ruff: noqa: S603
"""Several processes writing one SQLite file: how long a writer waits for the write lock.

    python bench/sqlite_writers.py                    # 4 workers x 4 slots, 20,000 tiny tasks
    python bench/sqlite_writers.py --workers 2 --n 10000 --rounds 3

On a fresh file, N no-op tasks are queued (queue ``work``); ``--workers`` worker processes of
``--concurrency`` slots (``run_worker(burst=True)``, the library's defaults otherwise) drain
them, while this process, as a web server would, sends one single enqueue every
``--every`` ms to queue ``side`` (no worker serves it) and times each call. Reported per round:

- **jobs/s**: N over the time from the workers' start to the last one's exit;
- **share**: the fewest and most tasks one worker process ran (of N / workers each if fair);
- **enqueue ms p50 / p99 / max**: the single enqueues' call times during the drain: a call
  that waits for the write lock behind the draining workers shows here.

The medians over ``--rounds`` close the table. Each worker process's runs are counted from the
log (``claimed`` transitions by owner), and every task must have succeeded exactly once.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import jobtrail  # noqa: E402

WORKER = """
import sys, jobtrail
app = jobtrail.App(sys.argv[1])
app.task("noop")(lambda ctx, payload: None)
app.task("side")(lambda ctx, payload: None)
sys.stdout.write(str(app.run_worker(queues=["work"], concurrency=int(sys.argv[2]), burst=True)))
"""


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def one_round(folder: Path, args: argparse.Namespace, r: int) -> dict[str, Any]:
    path = folder / f"writers-{r}.db"
    url = f"sqlite:///{path}"
    with jobtrail.App(url) as app:
        app.migrate()
        app.task("noop", queue="work")(lambda ctx, payload: None)
        app.task("side", queue="side")(lambda ctx, payload: None)
        for lo in range(0, args.n, 1000):
            app.enqueue_many([{"kind": "noop", "payload": {}}] * min(1000, args.n - lo))
        app.enqueue("side", {})  # this thread's connection and statements are ready
        times: list[float] = []
        stop = threading.Event()

        def send() -> None:
            while not stop.is_set():
                t0 = time.perf_counter()
                app.enqueue("side", {})
                times.append((time.perf_counter() - t0) * 1000)
                stop.wait(args.every / 1000)

        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, url, str(args.concurrency)],
                env=env,
                stdout=subprocess.PIPE,
            )
            for _ in range(args.workers)
        ]
        sender = threading.Thread(target=send)
        sender.start()
        outs = [p.communicate(timeout=600)[0] for p in procs]
        wall = time.perf_counter() - t0
        stop.set()
        sender.join()
    if any(p.returncode for p in procs):
        raise SystemExit("a worker failed")
    ran = [int(out.decode().strip() or 0) for out in outs]
    conn = sqlite3.connect(path)
    try:
        done, claims = conn.execute(
            "SELECT (SELECT COUNT(*) FROM jobtrail_tasks WHERE queue = 'work' AND "
            "state = 'succeeded'), (SELECT COUNT(*) FROM jobtrail_transitions t JOIN "
            "jobtrail_tasks k ON k.id = t.task_id WHERE k.queue = 'work' AND "
            "t.reason = 'claimed')"
        ).fetchone()
    finally:
        conn.close()
    if done != args.n or claims != args.n or sum(ran) != args.n:
        raise SystemExit(f"lost or repeated tasks: {done} done, {claims} claims, {sum(ran)} ran")
    return {
        "jobs_s": args.n / wall,
        "fewest": min(ran),
        "most": max(ran),
        "p50": pct(times, 0.5),
        "p99": pct(times, 0.99),
        "max": max(times),
        "sent": len(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--every", type=float, default=10.0, help="ms between single enqueues")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for r in range(args.rounds):
            row = one_round(Path(tmp), args, r)
            rows.append(row)
            print(
                f"round {r + 1}: {row['jobs_s']:,.0f} jobs/s, share {row['fewest']}-"
                f"{row['most']}, enqueue ms p50 {row['p50']:.2f} p99 {row['p99']:.2f} max "
                f"{row['max']:.2f} ({row['sent']} sent)",
                flush=True,
            )
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(
        f"{args.workers} workers x {args.concurrency}, N={args.n}, an enqueue every "
        f"{args.every:g} ms, median of {args.rounds}: {med['jobs_s']:,.0f} jobs/s, share "
        f"{med['fewest']:.0f}-{med['most']:.0f}, enqueue ms p50 {med['p50']:.2f} p99 "
        f"{med['p99']:.2f} max {med['max']:.2f}"
    )


if __name__ == "__main__":
    main()
