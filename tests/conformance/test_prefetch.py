"""The adaptive prefetch (the default): a task is claimed ahead only behind handlers that run
short, so a long task never has a due task waiting behind it while another handler slot is
idle — and a fixed prefetch, which does not look, would hold one there."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import jobtrail

from .support import wait_for


@pytest.mark.parametrize("prefetch", [None, 1])
def test_a_long_task_never_delays_a_due_task_on_an_idle_handler_slot(
    app: jobtrail.App, prefetch: int | None
) -> None:
    short_started = threading.Event()
    seen: dict[str, bool] = {}

    @app.task("quick", max_attempts=1)
    def quick(ctx: jobtrail.Context, payload: Any) -> None:
        if payload.get("after_long"):
            short_started.set()

    @app.task("long", max_attempts=1)
    def long(ctx: jobtrail.Context, payload: Any) -> None:
        # runs until the due short task has started somewhere, for 2 s at most: a short task
        # held behind this one could start only after it
        seen["short ran meanwhile"] = short_started.wait(2.0)

    # two workers of one handler slot each, both warmed with short tasks (so that the
    # adaptive prefetch has seen "quick" run short), then idle
    workers = [app.start_worker(concurrency=1, prefetch=prefetch) for _ in range(2)]
    try:
        warm = app.enqueue_many([{"kind": "quick", "payload": {}} for _ in range(100)])
        wait_for(lambda: all(app.get(t.id).state == "succeeded" for t in warm[-5:]), what="warm-up")
        wait_for(lambda: not app.list(state="leased", limit=1), what="idle workers")
        long_task, short_task = app.enqueue_many(
            [{"kind": "long", "payload": {}}, {"kind": "quick", "payload": {"after_long": True}}]
        )
        wait_for(lambda: app.get(long_task.id).state == "succeeded", timeout=15, what="long task")
        wait_for(lambda: app.get(short_task.id).state == "succeeded", what="short task")
    finally:
        for worker in workers:
            worker.stop(grace=5)
    if prefetch is None:
        assert seen["short ran meanwhile"], "the due task waited behind the long one"
    else:
        # a fixed prefetch holds whatever comes next: when one worker claimed both, the short
        # task waited behind the long one (which worker claims first is a race: either way
        # the task ran, and its transitions say which worker held it)
        claims = {
            t.id: [r.actor for r in app.transitions(t.id) if r.reason == "claimed"]
            for t in (long_task, short_task)
        }
        same = claims[long_task.id] == claims[short_task.id]
        assert seen["short ran meanwhile"] is not same, (claims, seen)
