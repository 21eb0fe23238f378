"""The worker's pump: successes commit with the next claim, handlers run at most `concurrency` at
once, `prefetch` claims ahead without running more, and a success whose guard fails in the
batch is decided on its own path."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import jobtrail

from .support import background_worker, run, wait_for


class Gate:
    """Handlers block here; counts how many are inside at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.release = threading.Event()

    def __call__(self, ctx: jobtrail.Context, payload: Any) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            assert self.release.wait(10), "never released"
        finally:
            with self.lock:
                self.inside -= 1


def held(app: jobtrail.App) -> int:
    return len(app.list(state="leased", limit=100))


@pytest.mark.parametrize("prefetch", [0, 3])
def test_handlers_never_exceed_concurrency_and_prefetch_claims_ahead(
    app: jobtrail.App, prefetch: int
) -> None:
    gate = Gate()
    app.task("gated", max_attempts=1)(gate)
    tasks = [app.enqueue("gated", {"i": i}) for i in range(8)]
    with background_worker(app, gate.release, concurrency=2, prefetch=prefetch):
        # two handlers run; `prefetch` more are claimed (leased) and wait for a free handler
        wait_for(lambda: gate.inside == 2 and held(app) == 2 + prefetch, what="claimed")
        assert len(app.list(state="queued", limit=100)) == 8 - 2 - prefetch
        gate.release.set()
    assert gate.most == 2, f"{gate.most} handlers ran at once with concurrency 2"
    for task in tasks:
        assert app.get(task.id).state == "succeeded"
        reasons = [t.reason for t in app.transitions(task.id)]
        assert reasons == ["enqueued", "claimed", "completed"]


def test_a_prefetched_task_times_out_from_its_own_start(app: jobtrail.App) -> None:
    """A task claimed ahead waits for a handler; its timeout counts from when it starts."""
    release = threading.Event()

    @app.task("slowish", max_attempts=1, timeout=0.6)
    def slowish(ctx: jobtrail.Context, payload: Any) -> None:
        release.wait(0.4)  # 0.4 s each: under the timeout, but two in a row are over it

    first, second = app.enqueue("slowish"), app.enqueue("slowish")
    run(app, concurrency=1, prefetch=1)
    assert app.get(first.id).state == "succeeded"
    assert app.get(second.id).state == "succeeded"


def test_a_success_whose_guard_fails_in_the_batch_is_decided_alone(app: jobtrail.App) -> None:
    """A cancel requested while the handler runs: the batched completion's guard (state
    leased) fails, and the success is written from cancel_requested on its own path."""
    started, release = threading.Event(), threading.Event()

    @app.task("cancel_me", max_attempts=1)
    def cancel_me(ctx: jobtrail.Context, payload: Any) -> None:
        started.set()
        assert release.wait(10)

    task = app.enqueue("cancel_me")
    with background_worker(app, release, concurrency=2):
        assert started.wait(10)
        assert app.cancel(task.id, by="test").outcome == "cancel_requested"
        release.set()
    last = app.transitions(task.id)[-1]
    assert (last.from_state, last.to_state) == ("cancel_requested", "succeeded")
    assert last.reason == "cancel_too_late"


def test_prefetch_must_not_be_negative(app: jobtrail.App) -> None:
    with pytest.raises(ValueError, match="prefetch"):
        app.run_worker(burst=True, prefetch=-1)
