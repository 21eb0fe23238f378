"""Shared by the bench drivers (stdlib only: each driver runs in its own virtualenv).

A driver is ``python <driver>.py URL PHASE N`` with PHASE one of ``setup``, ``enqueue_single``,
``enqueue_bulk``, ``work`` (a worker process, run until killed) and ``latency``. Phases that
measure print one JSON line last. Handlers receive ``t`` (the enqueue time, ``time.time()``) in
latency runs and append ``now - t`` to ``$BENCH_LAT_FILE``.

The steady-arrival benchmark (``bench/steady.py``) adds two phases: ``steady_work`` (a worker
at the library's defaults, see each driver) and ``steady_enqueue`` (N jobs at
``$BENCH_RATE`` per second, open loop, from ``$BENCH_SENDERS`` threads: ``open_loop``). Its jobs
carry ``t`` (the scheduled enqueue time) and ``s`` (when the enqueue call began); with
``$BENCH_STEADY_FILE`` set the handler appends ``<id> <t> <s> <handler start>`` to it
(``record_steady``).

The peers whose store keeps no row of a finished job at their defaults (Celery, RQ, Dramatiq)
count their jobs instead: their handler calls ``record_done``, which appends one byte to
``$BENCH_DONE_DIR/<pid>`` (one ``write`` on an ``O_APPEND`` descriptor of the process's own),
and the runner adds up the files' sizes: a job counts once its handler has run.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import threading
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


_done_fd: dict[int, int] = {}  # pid -> descriptor: a forked child opens its own


def record_done() -> None:
    """One byte appended to ``$BENCH_DONE_DIR/<pid>``: this job's handler ran (no-op unset)."""
    where = os.environ.get("BENCH_DONE_DIR")
    if not where:
        return
    pid = os.getpid()
    fd = _done_fd.get(pid)
    if fd is None:
        path = os.path.join(where, str(pid))
        fd = _done_fd[pid] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, b".")


_steady_fd: list[int] = []


def record_steady(task_id: object, t: float | None, s: float | None) -> None:
    """One line ``<id> <scheduled enqueue time> <enqueue call start> <now>`` appended to
    ``$BENCH_STEADY_FILE`` with a single ``write`` on an ``O_APPEND`` descriptor, so lines from
    several handler threads never interleave (and the runner may truncate the file)."""
    now = time.time()
    if t is None:
        return
    if not _steady_fd:
        path = os.environ["BENCH_STEADY_FILE"]
        _steady_fd.append(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    os.write(_steady_fd[0], f"{task_id} {t!r} {s!r} {now!r}\n".encode())


def steady_mode() -> bool:
    return bool(os.environ.get("BENCH_STEADY_FILE"))


def open_loop(n: int, make_sender: Callable[[], Callable[[float, float], None]]) -> None:
    """Send ``n`` jobs at ``$BENCH_RATE`` per second from ``$BENCH_SENDERS`` threads (default
    16), open loop: job i is due at ``t0 + i / rate`` whatever happened before it, and a sender
    that is late sends at once (its lateness is the send lag), so a slow enqueue does not lower
    the offered rate as long as a sender is free. ``make_sender()`` is called once per thread
    before the clock starts (connected) and returns ``send(t, s)``: enqueue one job carrying
    its due time ``t`` and the time ``s`` its enqueue call began. Sending stops a second after
    the last job's due time (``n / rate``), so a system that cannot take the rate has its
    run's length bounded: the jobs left are not sent, and the achieved rate says so. Prints one
    JSON line: the jobs sent, the achieved rate (sent over the time from the first due time to
    the last enqueue's return), and the send lag and enqueue call percentiles in ms."""
    rate = float(os.environ["BENCH_RATE"])
    senders = [make_sender() for _ in range(int(os.environ.get("BENCH_SENDERS", "16")))]
    counter = itertools.count()
    lags: list[list[float]] = [[] for _ in senders]
    calls: list[list[float]] = [[] for _ in senders]
    ends = [0.0] * len(senders)
    errors: list[BaseException] = []
    t0 = time.time() + 0.1
    stop = t0 + n / rate + 1.0  # the run's length and a second: later jobs are not sent

    def run(k: int) -> None:
        send = senders[k]
        try:
            while (i := next(counter)) < n:
                due = t0 + i / rate
                wait = due - time.time()
                if wait > 0:
                    time.sleep(wait)
                start = time.time()
                if start > stop:
                    return
                send(due, start)
                end = time.time()
                lags[k].append(start - due)
                calls[k].append(end - start)
                ends[k] = end
        except BaseException as exc:  # reported below: a lost send must fail the run
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(senders))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    lag = sorted(x for xs in lags for x in xs)
    call = sorted(x for xs in calls for x in xs)

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(len(xs) * q))] * 1000

    print(
        json.dumps(
            {
                "sent": len(lag),
                "offered": rate,
                "achieved": len(lag) / max(max(ends) - t0, 1e-9),
                "send_lag_p50_ms": pct(lag, 0.5),
                "send_lag_p99_ms": pct(lag, 0.99),
                "send_lag_max_ms": lag[-1] * 1000,
                "call_p50_ms": pct(call, 0.5),
                "call_p99_ms": pct(call, 0.99),
            }
        )
    )


THREADS = int(os.environ.get("BENCH_THREADS", "16"))


def threaded(n: int, make_sender: Callable[[], Callable[[], None]]) -> None:
    """The ``enqueue_threads`` phase: ``n`` jobs enqueued one at a time by ``$BENCH_THREADS``
    threads (default 16) at once, as fast as each call returns (closed loop: the callers of a
    web application under load). ``make_sender()`` is called once per thread before the clock
    starts (connected) and returns ``send()``, which enqueues one job. Prints one JSON line:
    jobs/s over the time from the start to the last thread's end."""
    senders = [make_sender() for _ in range(THREADS)]
    counter = itertools.count()
    errors: list[BaseException] = []

    def run(send: Callable[[], None]) -> None:
        try:
            while next(counter) < n:
                send()
        except BaseException as exc:  # reported below: a lost send must fail the run
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in senders]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    print(json.dumps({"seconds": elapsed, "rate": n / elapsed, "threads": THREADS}))
