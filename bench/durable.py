"""Durable handlers: what a sleep and an event wait cost against plain processing, and whether
many suspended tasks slow the claims of other work.

    python bench/durable.py resumes --n 10000 --rounds 1
    python bench/durable.py growth --suspended 100000 --n 10000 --rounds 3 --backends postgres

``resumes``: each setting runs in a subprocess of its own on a fresh store (a new SQLite file;
a new schema on ``--pg``, dropped after). ``plain``: N no-op tasks enqueued in bulk, then one
burst worker (concurrency 10) works them off. ``durable``: N tasks whose handler does
``ctx.sleep("nap", 0.2)`` then ``ctx.wait_for_event(f"go-{i}")``: a burst worker (``drain``)
runs each task twice (the first run suspends on the sleep, the second, after the wake, on the
wait) until all N wait; then ``app.send_event`` per key in a loop (no worker running); then a
burst worker resumes the N tasks to their end. Figures: tasks/s and the worker process's CPU
(``time.process_time``, all its threads) per run; ``resumes/s`` is the last phase (N resumes
from a recorded sleep and event), compared to the plain rate.

``growth``: one store with ``--suspended`` tasks suspended (half waiting for an event never
sent, half sleeping 30 days), made by a worker running their handlers, and one empty store; then
round by round, alternating, N plain no-op tasks enqueued and worked off by a burst worker
(concurrency 10) in each. The figure is tasks/s of the plain work with and without the
suspended tasks present.
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
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("JOBTRAIL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

CHILD = """
import json, sys, time
import jobtrail

url, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = jobtrail.App(url)
app.migrate()
app.task("plain", max_attempts=1)(lambda ctx, p: None)


@app.task("durable", max_attempts=1)
def durable(ctx, p):
    ctx.sleep("nap", 0.2)
    ctx.wait_for_event(f"go-{p['i']}")


@app.task("parked", max_attempts=1)
def parked(ctx, p):
    if p["i"] % 2:
        ctx.sleep("far", 30 * 86400)
    else:
        ctx.wait_for_event(f"never-{p['i']}")


def enqueue(kind, lo, hi):
    for a in range(lo, hi, 1000):
        app.enqueue_many([{"kind": kind, "payload": {"i": i}} for i in range(a, min(hi, a + 1000))])


def work(**kw):
    c0, t0 = time.process_time(), time.perf_counter()
    runs = app.run_worker(burst=True, concurrency=10, poll_interval=0.05, **kw)
    return {"runs": runs, "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def count(kind, state):
    q = [q for q in app.stats(exact=True)["queues"] if q["kind"] == kind]
    return sum(x["dead"] if state == "dead" else x["counts"][state] for x in q)


def left(kind):
    return sum(count(kind, s) for s in ("queued", "leased", "waiting", "dead"))


out = {}
if mode == "plain":
    base = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    enqueue("plain", base, base + n)
    out["plain"] = work()
    out["left"] = left("plain")
elif mode == "durable":
    enqueue("durable", 0, n)
    out["suspend"] = work(drain=1.0)
    out["waiting"] = count("durable", "waiting")
    t0 = time.perf_counter()
    woken = sum(app.send_event(f"go-{i}", {"i": i}) for i in range(n))
    out["send"] = {"wall": time.perf_counter() - t0, "woken": woken}
    out["resume"] = work()
    out["left"] = left("durable")
elif mode == "park":
    enqueue("parked", 0, n)
    out["park"] = work()
    out["waiting"] = count("parked", "waiting")
app.close()
print(json.dumps(out))
"""


def store(backend: str, pg: str) -> tuple[str, Callable[[], None]]:
    """A fresh store's URL and the function that drops it."""
    if backend == "postgres":
        import psycopg

        schema = "bench_" + secrets.token_hex(4)
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in pg else "?"

        def drop() -> None:
            with psycopg.connect(pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

        return f"{pg}{sep}options={quote(f'-csearch_path={schema}')}", drop
    return f"sqlite:///{tempfile.mkdtemp(prefix='jt-durable-')}/bench.db", lambda: None


def child(url: str, mode: str, n: int, *extra: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, mode, str(n), *extra],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    ).stdout
    got: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return got


def resumes(args: argparse.Namespace) -> None:
    n = args.n
    for backend in args.backends.split(","):
        print(f"{backend}: {n} tasks, 1 worker process, concurrency 10, {args.rounds} round(s)")
        for r in range(args.rounds):
            for mode in ("plain", "durable") if r % 2 == 0 else ("durable", "plain"):
                url, drop = store(backend, args.pg)
                try:
                    got = child(url, mode, n)
                finally:
                    drop()
                assert got["left"] == 0, got
                if mode == "plain":
                    p = got["plain"]
                    assert isinstance(p, dict)
                    print(
                        f"  plain    {n / p['wall']:8,.0f} tasks/s  "
                        f"{p['cpu'] / n * 1e3:.2f} ms CPU/task"
                    )
                else:
                    s, e, z = got["suspend"], got["send"], got["resume"]
                    assert isinstance(s, dict) and isinstance(e, dict) and isinstance(z, dict)
                    assert got["waiting"] == n and e["woken"] == n, got
                    print(
                        f"  durable  suspend: {s['runs']:,} runs {s['runs'] / s['wall']:8,.0f}/s "
                        f"{s['cpu'] / s['runs'] * 1e3:.2f} ms CPU/run | send_event "
                        f"{n / e['wall']:6,.0f}/s | resume: {n / z['wall']:8,.0f} resumes/s "
                        f"{z['cpu'] / n * 1e3:.2f} ms CPU/resume | whole "
                        f"{n / (s['wall'] + z['wall']):,.0f} tasks/s (send excluded)"
                    )


def growth(args: argparse.Namespace) -> None:
    for backend in args.backends.split(","):
        empty, drop_empty = store(backend, args.pg)
        grown, drop_grown = store(backend, args.pg)
        try:
            got = child(grown, "park", args.suspended)
            park = got["park"]
            assert isinstance(park, dict)
            assert got["waiting"] == args.suspended // 2, got
            print(
                f"{backend}: {args.suspended:,} suspended in {park['wall']:.0f} s "
                f"({args.suspended / park['wall']:,.0f}/s); plain {args.n} tasks per round, "
                "1 worker, concurrency 10"
            )
            rates: dict[str, list[float]] = {"empty": [], "suspended": []}
            settings = [("empty", empty), ("suspended", grown)]
            for r in range(args.rounds):
                for name, url in settings if r % 2 == 0 else settings[::-1]:
                    done = child(url, "plain", args.n, str(r * args.n))
                    plain = done["plain"]
                    assert isinstance(plain, dict)
                    assert done["left"] == 0, done
                    rates[name].append(args.n / plain["wall"])
            base = statistics.median(rates["empty"])
            for name, got_rates in rates.items():
                med = statistics.median(got_rates)
                rounds = ", ".join(f"{x:,.0f}" for x in got_rates)
                print(f"  {name:<10} {med:>8,.0f}/s  {med / base:5.2f}x  [{rounds}]")
        finally:
            drop_empty()
            drop_grown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["resumes", "growth"])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--suspended", type=int, default=100000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg", default=PG)
    args = parser.parse_args()
    resumes(args) if args.what == "resumes" else growth(args)


if __name__ == "__main__":
    main()
