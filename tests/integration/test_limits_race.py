"""Concurrency limits hold across worker processes racing for the same queue.

Three worker processes (spawned, each with its own ``App``) claim from one queue limited to 3
leased in total and 2 per tenant, while the test samples the store every few milliseconds.
The limit must never be exceeded — and must actually be reached, or the test proves nothing.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from collections import Counter
from typing import Any

import psycopg

import jobtrail
from jobtrail.store.sqlite import path_from_url

TOTAL, PER_TENANT = 3, 2
TENANTS = ("t1", "t2", "t3")
TASKS = 60
WORKERS = 3
DEADLINE = 45.0

HELD_SQL = (
    "SELECT tenant, COUNT(*) FROM jobtrail_tasks "
    "WHERE state IN ('leased', 'cancel_requested') GROUP BY tenant"
)


def register(app: jobtrail.App) -> None:
    @app.task("limited")
    def limited(ctx: Any, payload: Any) -> None:
        time.sleep(0.05)


def worker_main(url: str, ready: Any, go: Any) -> None:
    """One worker process: burst workers, again and again, until nothing is left queued.

    A burst worker stops as soon as a claim finds nothing and it holds nothing — which happens
    whenever the other processes hold the whole limit — so it is restarted to keep racing.
    """
    app = jobtrail.App(url)
    register(app)
    ready.release()
    if not go.wait(30):
        raise SystemExit("never told to start")
    try:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            # two slots each: no process can hold the whole limit (3) alone, so reaching it
            # takes two processes claiming at once — the race this test is about (the pump
            # commits successes with its next claim, so one process with room for the whole
            # limit could otherwise keep it to itself)
            app.run_worker(concurrency=2, burst=True, poll_interval=0.02)
            if not app.list(state="queued", limit=1):
                return
            app._driver.wait_for_work(0.02)  # poll interval before the next burst
        raise SystemExit("tasks still queued at the deadline")
    finally:
        app.close()


class Sampler:
    """Counts of leased tasks per tenant, read on one connection of the test's own."""

    def __init__(self, store: Any) -> None:
        self.backend = store.backend
        if store.backend == "sqlite":
            self.conn: Any = sqlite3.connect(
                path_from_url(store.url), timeout=30, isolation_level=None
            )
        else:
            self.conn = psycopg.connect(store.direct_url, autocommit=True)

    def sample(self) -> Counter[str]:
        return Counter({tenant: n for tenant, n in self.conn.execute(HELD_SQL).fetchall()})

    def close(self) -> None:
        self.conn.close()


def test_limits_hold_across_racing_worker_processes(store: Any) -> None:
    app = store.app()
    register(app)
    app.set_limit("default", total=TOTAL, per_tenant=PER_TENANT, by="test", note="race")
    app.enqueue_many(
        [{"kind": "limited", "payload": i, "tenant": TENANTS[i % 3]} for i in range(TASKS)]
    )

    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [
        ctx.Process(target=worker_main, args=(store.url, ready, go), daemon=True)
        for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    sampler = Sampler(store)
    totals: list[int] = []
    max_tenant: Counter[str] = Counter()
    try:
        for _ in procs:  # every process imported and registered: start them together
            assert ready.acquire(timeout=30), "a worker process never became ready"
        go.set()
        deadline = time.monotonic() + DEADLINE
        while any(p.is_alive() for p in procs):
            assert time.monotonic() < deadline, "workers did not finish in time"
            held = sampler.sample()
            totals.append(sum(held.values()))
            for tenant, n in held.items():
                max_tenant[tenant] = max(max_tenant[tenant], n)
            time.sleep(0.003)  # sampling period, not a synchronisation
    finally:
        sampler.close()
        for p in procs:
            p.join(5)
            if p.is_alive():  # pragma: no cover - only on failure
                p.kill()
                p.join()

    assert [p.exitcode for p in procs] == [0] * WORKERS
    assert len(totals) > 50, f"too few samples ({len(totals)}) to say anything"
    assert max(totals) <= TOTAL, f"total limit exceeded: {Counter(totals)}"
    assert all(n <= PER_TENANT for n in max_tenant.values()), max_tenant
    assert max(totals) == TOTAL, f"the limit was never reached: {Counter(totals)}"

    states = Counter(t.state for t in app.list(limit=1000))
    assert states == {"succeeded": TASKS}
    pids = {  # owner ids are host:pid:boot
        tr.actor.split(":")[1]
        for t in app.list(limit=1000)
        for tr in app.transitions(t.id)
        if tr.reason == "claimed"
    }
    assert len(pids) >= 2, f"only process(es) {pids} claimed: the processes did not race"
