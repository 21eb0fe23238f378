"""Async handlers get ``await ctx.astep`` / ``await ctx.aeffect`` (once per task,
as ``step``/``effect``); an async function handed to the sync ``step``/``effect`` is a clear
``TypeError`` naming the async method, before anything is stored; ``app.start_worker`` runs a
worker on a thread and ``stop(grace=)`` stops it as SIGTERM does. Both backends."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from typing import Any

import pytest

import jobtrail

from .support import drain, wait_for


def test_astep_and_aeffect_run_once_per_task(app: jobtrail.App) -> None:
    calls: list[str] = []

    async def fetch() -> dict[str, int]:
        calls.append("fetch")
        await asyncio.sleep(0)
        return {"n": 2}

    async def charge(key: str) -> dict[str, str]:
        calls.append("charge")
        await asyncio.sleep(0)
        return {"receipt": key}

    @app.task("flow", backoff_base=0, max_attempts=3)
    async def flow(ctx: jobtrail.Context, payload: Any) -> None:
        got = await ctx.astep("fetch", fetch)
        receipt = await ctx.aeffect("charge", charge)
        assert got == {"n": 2} and receipt == {"receipt": f"{ctx.task_id}/charge"}
        if ctx.attempt == 1:
            raise jobtrail.TransientError("flaky after both", category="unavailable")

    task = app.enqueue("flow")
    assert drain(app, task.id).state == "succeeded"
    assert calls == ["fetch", "charge"]  # the retry resumed after both
    steps = {s["name"]: s for s in app.steps(task.id)}
    assert steps["fetch"]["result"] == {"n": 2} and not steps["fetch"]["effect"]
    assert steps["charge"]["effect"] and steps["charge"]["status"] == "confirmed"


def test_a_stopping_worker_lets_the_coroutines_left_on_its_loop_end(
    app: jobtrail.App, caplog: pytest.LogCaptureFixture
) -> None:
    """A burst worker stops as soon as every outcome is recorded; coroutines still on its
    event loop then (an attempt's own last step after its outcome was written on a thread, or
    one a handler started) end before the loop stops, instead of being destroyed pending."""
    ended: list[str] = []
    keep: list[asyncio.Task[None]] = []

    async def flush(task_id: str) -> None:
        await asyncio.sleep(0.05)  # outlives the attempt: the worker is stopping by then
        ended.append(task_id)

    @app.task("fire", max_attempts=1)
    async def fire(ctx: jobtrail.Context, payload: Any) -> None:
        keep.append(asyncio.get_running_loop().create_task(flush(ctx.task_id)))
        if payload["fail"]:
            raise ValueError("async failure")

    tasks = [app.enqueue("fire", {"fail": i % 2 == 0}) for i in range(4)]
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        app.run_worker(burst=True)
        keep.clear()
        gc.collect()
    assert sorted(ended) == sorted(t.id for t in tasks)
    assert [app.get(t.id).state for t in tasks] == ["dead", "succeeded", "dead", "succeeded"]
    assert not [r for r in caplog.records if "destroyed" in r.getMessage()]


@pytest.mark.parametrize("method", ["step", "effect"])
def test_an_async_function_on_the_sync_method_names_the_async_one(
    app: jobtrail.App, method: str
) -> None:
    errors: list[str] = []

    async def work(*_: Any) -> int:
        return 1

    @app.task("wrong", max_attempts=1)
    async def wrong(ctx: jobtrail.Context, payload: Any) -> None:
        call = getattr(ctx, method)
        for fn in (work, lambda *a: work()):  # an async def, and a lambda returning its coroutine
            try:
                call("s", fn)
            except TypeError as exc:
                errors.append(str(exc))

    task = app.enqueue("wrong")
    with warnings_as_errors():
        assert drain(app, task.id).state == "succeeded"
    assert len(errors) == 2
    assert all(f"await ctx.a{method}(name, fn)" in e for e in errors)
    assert app.steps(task.id) == []  # nothing stored, no intent left behind


def test_astep_refuses_a_plain_function(app: jobtrail.App) -> None:
    errors: list[str] = []

    @app.task("plain", max_attempts=1)
    async def plain(ctx: jobtrail.Context, payload: Any) -> None:
        try:
            await ctx.astep("s", lambda: 1)
        except TypeError as exc:
            errors.append(str(exc))

    task = app.enqueue("plain")
    assert drain(app, task.id).state == "succeeded"
    assert errors and "for a plain function use ctx.step()" in errors[0]
    assert app.steps(task.id) == []


class warnings_as_errors:  # noqa: N801 - reads as a statement
    """``coroutine ... was never awaited`` would be a RuntimeWarning: none may be raised."""

    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.collect()
        self._catch.__exit__(*exc)
        assert [str(w.message) for w in self.caught] == []


# -- start_worker ---------------------------------------------------------------------------


def test_start_worker_runs_tasks_in_the_background_until_stopped(app: jobtrail.App) -> None:
    done: list[int] = []

    @app.task("bg")
    def bg(ctx: jobtrail.Context, payload: int) -> None:
        done.append(payload)

    handle = app.start_worker(concurrency=2, poll_interval=0.05)
    try:
        assert handle.running
        for i in range(5):
            bg.enqueue(i)
        wait_for(lambda: len(done) == 5, what="five tasks done by the background worker")
    finally:
        processed = handle.stop()
    assert not handle.running and processed == 5
    assert {t.state for t in app.list()} == {"succeeded"}
    later = bg.enqueue(99)
    time.sleep(0.3)  # a stopped worker claims nothing: the task stays queued
    assert app.get(later.id).state == "queued"


def test_stop_gives_running_handlers_the_grace_then_returns(app: jobtrail.App) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task("slow")
    def slow(ctx: jobtrail.Context, payload: Any) -> None:
        started.set()
        release.wait(5)

    handle = app.start_worker(poll_interval=0.05, grace=30)
    task = slow.enqueue()
    assert started.wait(5)
    threading.Timer(0.2, release.set).start()
    t0 = time.monotonic()
    handle.stop(grace=5)  # like SIGTERM: no new claims, the running one finishes
    assert 0.1 < time.monotonic() - t0 < 5
    assert app.get(task.id).state == "succeeded"


def test_stop_with_a_short_grace_leaves_the_task_to_the_lease_rules(app: jobtrail.App) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task("stuck", lease_seconds=30)
    def stuck(ctx: jobtrail.Context, payload: Any) -> None:
        started.set()
        release.wait(10)

    handle = app.start_worker(poll_interval=0.05)
    task = stuck.enqueue()
    assert started.wait(5)
    t0 = time.monotonic()
    handle.stop(grace=0.2)
    assert time.monotonic() - t0 < 3
    assert app.get(task.id).state == "leased"  # held until its lease expires, as after SIGTERM
    release.set()
    # Python cannot stop a thread: the abandoned handler ends on its own and, still holding
    # the lease, writes its outcome (fenced like any write); the App is closed only after it
    wait_for(lambda: app.get(task.id).state == "succeeded", what="the abandoned handler's end")


def test_start_worker_refuses_unknown_options(app: jobtrail.App) -> None:
    with pytest.raises(TypeError, match="unknown options \\['colour'\\]"):
        app.start_worker(colour="red")
    with pytest.raises(TypeError, match="install_signals"):
        app.start_worker(install_signals=True)
    with pytest.raises(ValueError, match="concurrency"):
        app.start_worker(concurrency=0)


def test_start_worker_inside_a_running_event_loop(app: jobtrail.App) -> None:
    """The lifespan case: started and stopped from a coroutine, tasks made by aenqueue."""

    @app.task("ping")
    async def ping(ctx: jobtrail.Context, payload: Any) -> None:
        await asyncio.sleep(0)

    async def go() -> str:
        handle = app.start_worker(poll_interval=0.05)
        try:
            task = await ping.aenqueue()
            for _ in range(200):
                if (await app.aget(task.id)).state == "succeeded":
                    return task.id
                await asyncio.sleep(0.02)
            raise AssertionError("not done")
        finally:
            await handle.astop()

    assert app.get(asyncio.run(go())).state == "succeeded"


def test_an_async_handler_that_blocks_the_loop_is_logged(
    app: jobtrail.App, caplog: pytest.LogCaptureFixture
) -> None:
    """A blocked event loop is reported: an ``async def`` handler calling ``time.sleep`` stalled the
    other async handlers of its worker and nothing was logged. Now one WARNING names it (task id,
    kind, how long); a well-behaved neighbour is not named."""
    neighbour_done = threading.Event()

    @app.task("blocks_loop")
    async def blocks_loop(ctx: jobtrail.Context, payload: Any) -> None:
        await asyncio.sleep(0)
        time.sleep(1.2)  # the mistake under test: a blocking call on the loop

    @app.task("polite")
    async def polite(ctx: jobtrail.Context, payload: Any) -> None:
        await asyncio.sleep(0.01)
        neighbour_done.set()

    blocker = app.enqueue("blocks_loop")
    app.enqueue("polite")
    with caplog.at_level(logging.WARNING, logger="jobtrail.worker"):
        app.run_worker(burst=True, concurrency=2, poll_interval=0.05)
    assert neighbour_done.is_set()
    lines = [r for r in caplog.records if "blocked the event loop" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.WARNING
    text = lines[0].getMessage()
    assert f"task {blocker.id} (blocks_loop)" in text
    seconds = float(text.split("blocked the event loop for ")[1].split(" s")[0])
    assert 1.1 <= seconds < 5, text
