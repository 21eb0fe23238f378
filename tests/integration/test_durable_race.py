"""An event sent while its handler is suspending, with real concurrency, on both backends.

Each round a handler announces that it is about to wait for its own key; a sender thread sends
that key after a random pause of 0 to 3 ms, so the send lands before the handler looks for the
event, between its look and the commit of its suspension, or after it. Whatever the order, the
task is woken exactly once and ends with the event's payload: never left ``waiting`` with its
event stored, never woken twice. The three paths are told apart by the timeline and counted.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

import jobtrail

ROUNDS = 120


def test_an_event_racing_the_suspension_wakes_the_task_exactly_once(store: Any) -> None:
    app = store.app()
    about_to_wait: dict[str, threading.Event] = {}
    lock = threading.Lock()

    @app.task("racer")
    def racer(ctx: jobtrail.Context, p: Any) -> Any:
        with lock:
            about_to_wait.setdefault(p["key"], threading.Event()).set()
        return ctx.wait_for_event(p["key"])

    sent: dict[str, int] = {}
    rng = random.Random(42)
    worker = app.start_worker(concurrency=4, poll_interval=0.05, sweep_interval=0.5)
    try:
        ids: dict[str, str] = {}
        for i in range(ROUNDS):
            key = f"race-{i}"
            with lock:
                announced = about_to_wait.setdefault(key, threading.Event())
            ids[key] = app.enqueue("racer", {"key": key}).id
            assert announced.wait(10), f"round {i}: the handler never started"
            time.sleep(rng.uniform(0, 0.003))
            sent[key] = app.send_event(key, {"round": i})

        deadline = time.monotonic() + 30
        while any(app.get(t).state != "succeeded" for t in ids.values()):
            stuck = {k: app.get(t).state for k, t in ids.items() if app.get(t).terminal is False}
            assert time.monotonic() < deadline, f"{len(stuck)} not finished: {list(stuck)[:5]}"
            time.sleep(0.05)
    finally:
        worker.stop(grace=5)

    paths: Counter[str] = Counter()
    for i, (key, task_id) in enumerate(ids.items()):
        task = app.get(task_id)
        assert task.result == {"round": i}
        log = app.transitions(task_id)
        rs = [t.reason for t in log]
        woken = [t for t in log if t.reason == "event_received"]
        assert len(woken) <= 1, (key, rs)
        if not woken:  # the event was there when the handler looked
            assert rs == ["enqueued", "claimed", "completed"], rs
            assert sent[key] == 0
            paths["before the look"] += 1
        elif sent[key] == 1:  # the send found the task waiting and woke it
            assert woken[0].actor == "caller", rs
            paths["after the suspension"] += 1
        else:  # the suspension found the event stored meanwhile and woke itself
            assert woken[0].actor != "caller", rs
            paths["during the suspension"] += 1
        if woken:
            assert rs == [
                "enqueued",
                "claimed",
                "waiting_for_event",
                "event_received",
                "claimed",
                "completed",
            ], rs
    assert sum(paths.values()) == ROUNDS
    print(dict(paths))  # noqa: T201 - the distribution, for the report (-s)
    # the pauses spread the sends: more than one ordering happened
    assert len(paths) >= 2, paths
