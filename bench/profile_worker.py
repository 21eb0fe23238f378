# ruff: noqa: S603, S608
"""Where a worker's CPU goes: py-spy samples one worker draining N no-op tasks (issue 21).

    python bench/profile_worker.py                       # PostgreSQL, N=20,000
    python bench/profile_worker.py --url sqlite:///x.db  # SQLite
    python bench/profile_worker.py --prefetch 10         # a fixed prefetch instead of auto

Run with the project's environment; ``pip install py-spy`` first (it samples a child
process, so it needs no privileges beyond ptrace of one's own children). Only samples that
hold the GIL are counted (``--gil``): what the Python side spends, not what it waits for.
Prints the worker's rate and CPU per job, then the frames with the most samples of their own
and the most samples under them, as shares of the worker's samples.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import sys, time
import jobtrail
url, n, prefetch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
app = jobtrail.App(url)
app.migrate()

@app.task("noop", max_attempts=1)
def noop(ctx, payload):
    return None

for i in range(0, n, 1000):
    app.enqueue_many([{"kind": "noop", "payload": {}}] * min(1000, n - i))
t0, c0 = time.perf_counter(), time.process_time()
ahead = None if prefetch == "auto" else int(prefetch)
done = app.run_worker(concurrency=10, burst=True, prefetch=ahead)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(f"worker: {done} tasks in {wall:.2f} s = {done / wall:,.0f}/s;"
      f" {cpu / done * 1e6:.0f} us CPU per task")
app.close()
"""


def fresh_pg(url: str) -> str:
    import psycopg

    base, _, _db = url.rpartition("/")
    name = "bench_profile_" + str(os.getpid())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="a PostgreSQL server (a fresh database is made on it) or sqlite:///file",
    )
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--prefetch", default="auto")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")
    url = args.url if args.url.startswith("sqlite") else fresh_pg(args.url)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "samples.txt"
        script = Path(tmp) / "child.py"
        script.write_text(CHILD)
        env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
        cmd = [spy, "record", "--gil", "-r", "1000", "-f", "raw", "-o", str(raw), "--"]
        cmd += [sys.executable, str(script), url, str(args.n), args.prefetch]
        subprocess.run(cmd, env=env, check=True)
        own: Counter[str] = Counter()
        under: Counter[str] = Counter()
        total = 0
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            if not any("run_worker" in f for f in frames):
                continue  # the setup's samples
            total += int(count)
            own[frames[-1]] += int(count)
            for frame in set(frames):
                under[frame] += int(count)
    print(f"\n{total} samples holding the GIL in the worker; own time:")
    for frame, count in own.most_common(args.top):
        print(f"{count * 100 / total:5.1f}%  {frame[:120]}")
    print("\nwith what they call:")
    for frame, count in under.most_common(args.top):
        print(f"{count * 100 / total:5.1f}%  {frame[:120]}")


if __name__ == "__main__":
    main()
