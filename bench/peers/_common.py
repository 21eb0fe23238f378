"""Shared by the bench drivers (stdlib only: each driver runs in its own virtualenv).

A driver is ``python <driver>.py URL PHASE N`` with PHASE one of ``setup``, ``enqueue_single``,
``enqueue_bulk``, ``work`` (a worker process, run until killed) and ``latency``. Phases that
measure print one JSON line last. Handlers receive ``t`` (the enqueue time, ``time.time()``) in
latency runs and append ``now - t`` to ``$BENCH_LAT_FILE``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable

CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "10"))


def record_latency(t: float | None) -> None:
    if t is None:
        return
    path = os.environ.get("BENCH_LAT_FILE")
    if path:
        with open(path, "a") as f:
            f.write(f"{time.time() - t}\n")


def timed(fn: Callable[[], None], n: int) -> None:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    print(json.dumps({"seconds": elapsed, "rate": n / elapsed}))


def latency(driver: str, url: str, samples: int, enqueue_one: Callable[[float], None]) -> None:
    """Start a worker of this driver, then enqueue one job at a time to the idle worker and
    time until its handler runs."""
    path = f"/tmp/bench-lat-{os.getpid()}.txt"
    open(path, "w").close()
    env = dict(os.environ, BENCH_LAT_FILE=path)
    proc = subprocess.Popen([sys.executable, driver, url, "work", "0"], env=env)
    try:
        out: list[float] = []
        seen = 0
        for i in range(samples + 5):
            enqueue_one(time.time())
            deadline = time.time() + (30 if i == 0 else 5)
            while True:
                with open(path) as f:
                    lines = f.read().split()
                if len(lines) > seen:
                    break
                if time.time() > deadline:
                    raise SystemExit(f"no handler ran within the deadline (sample {i})")
                time.sleep(0.0002)
            seen = len(lines)
            if i >= 5:  # the first ones warm the worker up
                out.append(float(lines[-1]))
            time.sleep(random.uniform(0.05, 0.1))  # let the worker go idle again
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.unlink(path)
    out.sort()
    print(
        json.dumps(
            {
                "p50_ms": out[len(out) // 2] * 1000,
                "p99_ms": out[min(len(out) - 1, int(len(out) * 0.99))] * 1000,
            }
        )
    )
