"""Debounced enqueue/s against plain enqueue/s, one client thread, on a fresh store.

    python bench/debounce.py                       # SQLite, 2,000 enqueues a phase, 3 rounds
    python bench/debounce.py --pg postgresql://postgres@127.0.0.1:5432/test --n 2000

Phases, interleaved round by round (the median of the rounds is printed):

- ``plain``: ``app.enqueue("k", {"n": i})`` (the single-statement insert);
- ``debounce-fold``: every enqueue with one ``debounce_key`` (each after the first replaces
  the queued task's payload and appends a ``debounced`` annotation: the common burst);
- ``debounce-new``: a new ``debounce_key`` per enqueue (each inserts a task: the open-key
  index and the controls' insert without a fold);
- ``unique-for``: an ``idempotency_key`` with ``unique_for`` per enqueue (new keys);
- ``expires-in``: ``expires_in=3600``.

On PostgreSQL the store is a new schema, dropped afterwards. Timings on a shared machine are
noisy: compare phases of one run.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jobtrail

PHASES: dict[str, Callable[[jobtrail.App, int, int], Any]] = {
    "plain": lambda app, r, i: app.enqueue("k", {"n": i}),
    "debounce-fold": lambda app, r, i: app.enqueue(
        "k", {"n": i}, debounce_key=f"fold-{r}", debounce=3600
    ),
    "debounce-new": lambda app, r, i: app.enqueue(
        "k", {"n": i}, debounce_key=f"new-{r}-{i}", debounce=3600
    ),
    "unique-for": lambda app, r, i: app.enqueue(
        "k", {"n": i}, idempotency_key=f"u-{r}-{i}", unique_for=3600
    ),
    "expires-in": lambda app, r, i: app.enqueue("k", {"n": i}, expires_in=3600),
}


def measure(app: jobtrail.App, n: int, rounds: int) -> dict[str, float]:
    got: dict[str, list[float]] = {name: [] for name in PHASES}
    for r in range(rounds):
        for name, fn in PHASES.items():
            for i in range(50):  # warm up (statements prepared, pages in memory)
                fn(app, r + 1000, i)
            t0 = time.perf_counter()
            for i in range(n):
                fn(app, r, i)
            got[name].append(n / (time.perf_counter() - t0))
    return {name: statistics.median(rates) for name, rates in got.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="enqueues a phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg", metavar="URL", help="PostgreSQL (a new schema in it)")
    args = parser.parse_args()
    drop: Callable[[], None] = lambda: None  # noqa: E731
    if args.pg:
        import psycopg

        schema = "bench_" + secrets.token_hex(4)
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in args.pg else "?"
        url = f"{args.pg}{sep}options={quote(f'-csearch_path={schema}')}"

        def drop() -> None:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    else:
        folder = Path(tempfile.mkdtemp(prefix="jobtrail-debounce-"))
        url = f"sqlite:///{folder / 'bench.db'}"
    app = jobtrail.App(url)
    try:
        app.migrate()
        app.task("k")(lambda ctx, p: None)
        rates = measure(app, args.n, args.rounds)
    finally:
        app.close()
        drop()
    backend = "postgres" if args.pg else "sqlite"
    print(f"{backend}: {args.n} enqueues a phase, {args.rounds} rounds, median enqueue/s")
    base = rates["plain"]
    for name, rate in rates.items():
        print(f"  {name:<14} {rate:>9,.0f}/s  {rate / base:5.2f}x plain")


if __name__ == "__main__":
    main()
