"""Rate limits and ramps hold across worker processes claiming the same queue.

Several worker processes (spawned, each with its own ``App``) claim from one rate-limited
queue with a deep backlog; the claim times come from the transitions log afterwards. A token
bucket of ``burst`` tokens refilled at ``per_second`` lets no 1-second window hold more than
``per_second + burst`` claims — and the rate must actually be reached, or the test proves
nothing. The ramp test builds a backlog during a pause and resumes with a ramp: claims per
second must rise over the ramp instead of all waking at once.
"""

from __future__ import annotations

import bisect
import multiprocessing
import os
import signal
import sqlite3
import time
from collections import Counter
from typing import Any

import psycopg

import jobtrail
from jobtrail.store.sqlite import path_from_url

RATE, BURST = 20, 5
RUN_SECONDS = 10.0
WORKERS = 3


def register(app: jobtrail.App) -> None:
    @app.task("paced")
    def paced(ctx: Any, payload: Any) -> None:
        time.sleep(0.005)  # the handler's own work


def worker_main(url: str, ready: Any, go: Any) -> None:
    """One worker process: a long-running worker until SIGTERM (its graceful stop)."""
    app = jobtrail.App(url)
    register(app)
    ready.release()
    if not go.wait(30):
        raise SystemExit("never told to start")
    try:
        app.run_worker(concurrency=8, poll_interval=0.5, sweep_interval=0.5, grace=5)
    finally:
        app.close()


def claim_times(store: Any) -> list[float]:
    """Every ``claimed`` transition's time, seconds since the epoch, sorted (database clock)."""
    if store.backend == "sqlite":
        conn: Any = sqlite3.connect(path_from_url(store.url), timeout=30)
        sql = "SELECT at FROM jobtrail_transitions WHERE reason = 'claimed'"
        times = [float(r[0]) for r in conn.execute(sql).fetchall()]
    else:
        conn = psycopg.connect(store.direct_url, autocommit=True)
        sql = (
            "SELECT EXTRACT(EPOCH FROM at)::float8 FROM jobtrail_transitions"
            " WHERE reason = 'claimed'"
        )
        times = [float(r[0]) for r in conn.execute(sql).fetchall()]
    conn.close()
    return sorted(times)


def max_in_window(times: list[float], width: float = 1.0) -> int:
    """The most claims any window of ``width`` seconds holds (windows start at each claim)."""
    return max(bisect.bisect_left(times, t + width) - i for i, t in enumerate(times))


def per_second(times: list[float], start: float | None = None) -> list[int]:
    """Claims in each second from ``start`` (default: the first claim). A claim stamped a
    little before ``start`` (its transaction began before the resume committed) counts in
    the first second."""
    start = times[0] if start is None else start
    counts = Counter(max(0, int(t - start)) for t in times)
    return [counts[s] for s in range(int(times[-1] - start) + 1)]


class Workers:
    def __init__(self, url: str, n: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ready, self.go = ctx.Semaphore(0), ctx.Event()
        self.procs = [
            ctx.Process(target=worker_main, args=(url, self.ready, self.go), daemon=True)
            for _ in range(n)
        ]
        for p in self.procs:
            p.start()
        for _ in self.procs:  # every process imported and registered: start them together
            assert self.ready.acquire(timeout=60), "a worker process never became ready"

    def start(self) -> None:
        self.go.set()

    def stop(self) -> list[int | None]:
        for p in self.procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)
        for p in self.procs:
            p.join(20)
            if p.is_alive():  # pragma: no cover - only on failure
                p.kill()
                p.join()
        return [p.exitcode for p in self.procs]


def test_rate_holds_across_worker_processes(store: Any) -> None:
    app = store.app()
    register(app)
    app.set_rate("default", per_second=RATE, burst=BURST, by="test", note="provider quota")
    # more than the run can take, so the queue stays backlogged the whole time
    app.enqueue_many([{"kind": "paced", "payload": i} for i in range(int(RATE * 14))])
    workers = Workers(store.url, WORKERS)
    try:
        workers.start()
        deadline = time.monotonic() + 30
        while not claim_times(store):
            assert time.monotonic() < deadline, "no worker claimed anything"
            time.sleep(0.05)  # polling for the first claim, not a synchronisation
        first = time.monotonic()
        while time.monotonic() - first < RUN_SECONDS:
            time.sleep(0.1)  # the run's length: the workers claim meanwhile
    finally:
        codes = workers.stop()
    assert codes == [0] * WORKERS
    times = claim_times(store)
    times = [t for t in times if t < times[0] + RUN_SECONDS]
    counts = per_second(times)
    print(f"claims per second at {RATE}/s burst {BURST}: {counts}")  # shown with -s
    worst = max_in_window(times)
    assert worst <= RATE + BURST, f"a 1-second window held {worst} claims: {counts}"
    # the limit is reached, not merely respected by workers that are too slow
    assert len(times) >= RATE * RUN_SECONDS * 0.8, f"only {len(times)} claims: {counts}"
    assert worst >= RATE, f"the rate was never reached: {counts}"
    owners = {
        tr.actor.split(":")[1]
        for t in app.list(state="succeeded", limit=1000)
        for tr in app.transitions(t.id)
        if tr.reason == "claimed"
    }
    assert len(owners) >= 2, f"only process(es) {owners} claimed: they did not share the rate"


BACKLOG, RAMP = 2000, 5.0


def test_resume_with_ramp_grows_the_claim_rate(store: Any) -> None:
    app = store.app()
    register(app)
    app.pause("default", by="test", note="provider down")
    app.enqueue_many([{"kind": "paced", "payload": i} for i in range(BACKLOG)])
    workers = Workers(store.url, WORKERS)
    try:
        workers.start()
        time.sleep(0.5)  # the workers poll the paused queue (nothing may be claimed)
        assert claim_times(store) == []
        resumed = app.resume("default", by="test", note="provider back", ramp=RAMP)
        # no rate of its own: the ramp's full rate is the backlog spread over the ramp
        assert resumed["rate_per_second"] == BACKLOG / RAMP
        assert resumed["rate_until"] is not None
        deadline = time.monotonic() + 60
        while len(claim_times(store)) < BACKLOG:
            assert time.monotonic() < deadline, "the backlog did not drain"
            time.sleep(0.2)
    finally:
        codes = workers.stop()
    assert codes == [0] * WORKERS
    # seconds from the resume (database clock), not from the first claim: on a loaded
    # machine the first claim comes later in the ramp, when more is already allowed
    started = resumed["ramp_started_at"].timestamp()
    counts = per_second(claim_times(store), started)
    print(f"claims per second after resume(ramp={RAMP}) of {BACKLOG}: {counts}")
    full = BACKLOG / RAMP
    # the first second: at most the bucket as it is at the first claim (a tenth of the rate,
    # growing) plus the refill to the second's end — under 0.31 of the rate wherever in the
    # second the first claim falls — not the backlog
    assert counts[0] <= 0.35 * full, counts
    # the rate rises over the ramp: each second above the one two before, and the fourth
    # second well above the first
    ramp = counts[: int(RAMP)]
    assert all(ramp[i] > ramp[i - 2] for i in range(2, len(ramp))), ramp
    assert ramp[3] >= 2 * ramp[0], ramp
    # never above the ramp's allowance: a window of 1 s holds at most the full rate plus the
    # bucket — within the ramp, which ends RAMP seconds after the resume (rate_until, by the
    # database clock), not after the first claim: past it the queue has no rate at all
    times = claim_times(store)
    ramp_end = min(times[0] + RAMP, resumed["rate_until"].timestamp())
    assert max_in_window([t for t in times if t < ramp_end]) <= 2 * full
    history = app.queue_history("default")
    assert history[0]["action"] == "resume" and history[0]["data"]["ramp"] == RAMP
