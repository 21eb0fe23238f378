"""``run_worker(burst=True, drain=S)`` (drain for tests and CI), on both backends:
a burst worker also waits for its tasks that become due within ``S`` seconds, and returns once
nothing is due within that horizon and nothing it holds is running."""

from __future__ import annotations

import time
from typing import Any

import pytest

import jobtrail
from jobtrail import TransientError

FAST: dict[str, Any] = {"poll_interval": 0.05, "sweep_interval": 0.05}


def test_a_draining_burst_worker_waits_for_a_retry_due_soon(app: jobtrail.App) -> None:
    """It returned while a retry 0.3 s away was pending (a test then waited for the result)."""
    failures = iter([True])

    @app.task("flaky_later")
    def flaky_later(ctx: jobtrail.Context, payload: Any) -> str:
        if next(failures, False):
            raise TransientError("busy", category="unavailable", retry_after=0.3)
        return "ok"

    task = app.enqueue("flaky_later")
    started = time.monotonic()
    finished = app.run_worker(burst=True, drain=5, **FAST)
    took = time.monotonic() - started
    done = app.get(task.id)
    assert (done.state, done.attempts, finished) == ("succeeded", 2, 2)
    assert 0.25 <= took < 5, took  # waited for the retry, not for the horizon


def test_without_drain_a_burst_worker_leaves_a_retry_that_is_not_due_yet(
    app: jobtrail.App,
) -> None:
    failures = iter([True])

    @app.task("flaky_later")
    def flaky_later(ctx: jobtrail.Context, payload: Any) -> None:
        if next(failures, False):
            raise TransientError("busy", category="unavailable", retry_after=30)

    task = app.enqueue("flaky_later")
    assert app.run_worker(burst=True, **FAST) == 1
    assert app.get(task.id).state == "queued"


def test_a_draining_worker_does_not_wait_for_what_is_due_beyond_its_horizon(
    app: jobtrail.App,
) -> None:
    @app.task("later")
    def later(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    far = app.enqueue("later", delay=60)
    near = app.enqueue("later", delay=0.2)
    elsewhere = jobtrail.App(app.url)  # a kind only another worker registers
    try:
        elsewhere.task("elsewhere")(lambda ctx, payload: None)
        other = elsewhere.enqueue("elsewhere")
    finally:
        elsewhere.close()
    started = time.monotonic()
    assert app.run_worker(burst=True, drain=2, **FAST) == 1
    assert time.monotonic() - started < 2  # it did not sit out the horizon
    assert app.get(near.id).state == "succeeded"
    assert app.get(far.id).state == "queued"
    assert app.get(other.id).state == "queued"


def test_a_draining_worker_does_not_wait_for_a_paused_queue(app: jobtrail.App) -> None:
    @app.task("held", queue="held_q")
    def held(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    task = app.enqueue("held")
    app.pause("held_q", by="ops", note="maintenance")
    started = time.monotonic()
    assert app.run_worker(burst=True, drain=30, **FAST) == 0
    assert time.monotonic() - started < 5
    assert app.get(task.id).state == "queued"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"burst": True, "drain": -1}, "drain must be at least 0"),
        ({"burst": True, "drain": float("inf")}, "drain must be at least 0"),
        ({"burst": True, "drain": float("nan")}, "drain must be at least 0"),
        ({"burst": True, "drain": "5"}, "drain must be a number of seconds"),
        ({"burst": True, "drain": True}, "drain must be a number of seconds"),
        ({"drain": 5}, "drain is for a burst worker"),
    ],
)
def test_bad_drain_values_are_refused_before_anything_runs(
    app: jobtrail.App, options: dict[str, Any], message: str
) -> None:
    @app.task("never")
    def never(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("must not run")

    task = app.enqueue("never")
    with pytest.raises(ValueError, match=message):
        app.run_worker(**options)
    with pytest.raises(ValueError, match=message):
        app.start_worker(**options)
    assert app.get(task.id).state == "queued"


def test_start_worker_drains_too(app: jobtrail.App) -> None:
    failures = iter([True])

    @app.task("flaky_later")
    def flaky_later(ctx: jobtrail.Context, payload: Any) -> None:
        if next(failures, False):
            raise TransientError("busy", category="unavailable", retry_after=0.2)

    task = app.enqueue("flaky_later")
    handle = app.start_worker(burst=True, drain=5, **FAST)
    deadline = time.monotonic() + 10
    while handle.running and time.monotonic() < deadline:  # a burst worker ends by itself
        time.sleep(0.02)
    assert handle.stop() == 2
    assert app.get(task.id).state == "succeeded"
