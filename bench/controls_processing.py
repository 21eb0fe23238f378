"""Plain processing with the controls of enqueue present (the claim skips expired tasks and
clears the debounce key) against the code before them.

    git -C . archive <commit-before> src | tar -x -C /tmp/jt-before
    python bench/controls_processing.py --before-src /tmp/jt-before/src --n 5000 --rounds 3

For each backend, each setting (``before``: the code at ``--before-src``; ``now``: this
checkout) runs in a subprocess of its own on a fresh store (a new SQLite file; a new schema on
``--pg``, dropped after): N plain no-op tasks are enqueued in bulk, then one burst worker
(concurrency 10) works them off; the figure is tasks/s from its start to its return, checked
against the count of succeeded tasks. Settings alternate round by round; the median is shown.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

CHILD = """
import json, sys, time
import jobtrail

url, n = sys.argv[1], int(sys.argv[2])
app = jobtrail.App(url)
app.migrate()
app.task("k", max_attempts=1)(lambda ctx, p: None)
for lo in range(0, n, 1000):
    app.enqueue_many([{"kind": "k", "payload": {"i": i}} for i in range(lo, min(n, lo + 1000))])
t0 = time.perf_counter()
app.run_worker(burst=True, concurrency=10, poll_interval=0.05)
wall = time.perf_counter() - t0
done = len(app.list(state="succeeded", limit=n + 1))
app.close()
print(json.dumps({"rate": n / wall, "done": done}))
"""


def one(src: Path, backend: str, n: int, pg: str) -> float:
    drop = None
    if backend == "postgres":
        import psycopg

        schema = "bench_" + secrets.token_hex(4)
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in pg else "?"
        url = f"{pg}{sep}options={quote(f'-csearch_path={schema}')}"

        def drop() -> None:
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    else:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='jt-proc-')}/bench.db"
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, url, str(n)],
            env={**os.environ, "PYTHONPATH": str(src)},
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        ).stdout
    finally:
        if drop is not None:
            drop()
    got = json.loads(out.strip().splitlines()[-1])
    assert got["done"] == n, got
    return float(got["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-src", type=Path, required=True)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg", default=PG)
    args = parser.parse_args()
    settings = [("before", args.before_src), ("now", ROOT / "src")]
    for backend in args.backends.split(","):
        rates: dict[str, list[float]] = {name: [] for name, _ in settings}
        for r in range(args.rounds):
            for name, src in settings if r % 2 == 0 else settings[::-1]:
                rates[name].append(one(src, backend, args.n, args.pg))
        base = statistics.median(rates["before"])
        print(f"{backend}: {args.n} tasks, concurrency 10, {args.rounds} rounds (tasks/s)")
        for name, got in rates.items():
            med = statistics.median(got)
            rounds = ", ".join(f"{x:,.0f}" for x in got)
            print(f"  {name:<7} {med:>8,.0f}/s  {med / base:5.2f}x  [{rounds}]")


if __name__ == "__main__":
    main()
