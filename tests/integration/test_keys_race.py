"""Serial per key holds across worker processes racing for one queue.

Four worker processes (spawned, each with its own ``App``) claim from one queue of tasks under
many concurrency keys (limit 1 per key, and 2 for the kind ``pair``). Each handler appends its
enter and exit times to a file of its process; afterwards no key may have had more of its
tasks running at once than its limit, each key's tasks must have started in due order (FIFO),
every task must have run exactly once, and the processes must really have overlapped (tasks of
different keys at once, in more than one process) — or the test proves nothing.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import jobtrail

KEYS = 24
PER_KEY = 6
PAIR_KEYS = 4
WORKERS = 4
DEADLINE = 60.0


def register(app: jobtrail.App, log: Path | None = None) -> None:
    def record(payload: Any, pause: float) -> None:
        entered = time.time()
        time.sleep(pause + 0.01 * (payload["seq"] % 3))
        left = time.time()
        if log is not None:
            line = json.dumps({**payload, "enter": entered, "exit": left, "pid": os.getpid()})
            with log.open("a") as f:
                f.write(line + "\n")

    @app.task("serial")
    def serial(ctx: Any, payload: Any) -> None:
        record(payload, 0.01)

    @app.task("pair", concurrency_per_key=2)
    def pair(ctx: Any, payload: Any) -> None:
        # slower than the serial kind: its keys are the last to drain, when there is room for
        # both of a key's running tasks
        record(payload, 0.06)


def worker_main(url: str, folder: str, ready: Any, go: Any) -> None:
    app = jobtrail.App(url)
    register(app, Path(folder) / f"log-{os.getpid()}.jsonl")
    ready.release()
    if not go.wait(30):
        raise SystemExit("never told to start")
    try:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            app.run_worker(concurrency=4, burst=True, poll_interval=0.02)
            if not app.list(state="queued", limit=1) and not app.list(state="leased", limit=1):
                return
            app._driver.wait_for_work(0.02)
        raise SystemExit("tasks still queued at the deadline")
    finally:
        app.close()


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of ``spans`` (enter, exit) open at one time."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    now = peak = 0
    for _, step in events:  # an exit at the same instant as an enter sorts first
        now += step
        peak = max(peak, now)
    return peak


def test_keys_hold_across_racing_worker_processes(store: Any, tmp_path: Path) -> None:
    app = store.app()
    register(app)
    # the pair keys first, each key's tasks together: a claim with room for two finds both of
    # a key's first tasks first in due order, so two of a key do run at once
    items: list[dict[str, Any]] = [
        {"kind": "pair", "payload": {"key": f"p{k}", "seq": seq}, "concurrency_key": f"p{k}"}
        for k in range(PAIR_KEYS)
        for seq in range(PER_KEY)
    ]
    for seq in range(PER_KEY):  # interleaved: each key's tasks are spread over the queue
        for k in range(KEYS):
            items.append(
                {
                    "kind": "serial",
                    "payload": {"key": f"k{k}", "seq": seq},
                    "concurrency_key": f"k{k}",
                }
            )
    app.enqueue_many(items)
    total = len(items)

    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [
        ctx.Process(target=worker_main, args=(store.url, str(tmp_path), ready, go), daemon=True)
        for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            assert ready.acquire(timeout=30), "a worker process never became ready"
        go.set()
        for p in procs:
            p.join(DEADLINE + 10)
    finally:
        for p in procs:
            if p.is_alive():  # pragma: no cover - only on failure
                p.kill()
                p.join()
    assert [p.exitcode for p in procs] == [0] * WORKERS

    runs = [json.loads(line) for f in tmp_path.glob("log-*.jsonl") for line in f.open()]
    assert len(runs) == total, f"{len(runs)} runs of {total} tasks"
    assert len({(r["key"], r["seq"]) for r in runs}) == total, "a task ran twice"
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by_key[r["key"]].append(r)
    for key, mine in by_key.items():
        limit = 2 if key.startswith("p") else 1
        peak = most_at_once([(r["enter"], r["exit"]) for r in mine])
        assert peak <= limit, f"key {key}: {peak} at once (limit {limit})"
        started = [r["seq"] for r in sorted(mine, key=lambda r: r["enter"])]
        if limit == 1:
            assert started == sorted(started), f"key {key} started out of order: {started}"
    # the race happened: tasks of different keys ran at once, in several processes
    assert most_at_once([(r["enter"], r["exit"]) for r in runs]) >= 4
    assert len({r["pid"] for r in runs}) >= 2
    assert (
        max(
            most_at_once([(r["enter"], r["exit"]) for r in by_key[f"p{k}"]])
            for k in range(PAIR_KEYS)
        )
        == 2
    ), "no pair key ever ran two at once"
    assert {t.state for t in app.list(limit=1000)} == {"succeeded"}
