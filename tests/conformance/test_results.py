"""A handler's return value stored with its completing transition (the batch path
and the single path), ``Task.result``, ``app.result`` (waiting on the store's wake-ups) and
``TaskFailed``; values that cannot be stored refused as ``invalid_input``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import jobtrail

from .support import drain, last, reasons, run


def test_a_plain_success_stores_its_return_value_in_the_batch(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        return {"n": p["n"] * 2, "tags": ["a", "é"], "ok": True}

    ids = [app.enqueue("k", {"n": i}).id for i in range(5)]
    run(app, concurrency=4)
    for i, task_id in enumerate(ids):
        task = app.get(task_id)
        assert task.state is jobtrail.State.SUCCEEDED
        assert last(app, task_id).reason == "completed"
        assert task.result == {"n": i * 2, "tags": ["a", "é"], "ok": True}
        assert app.result(task_id) == task.result
        assert task.to_dict()["result"] == task.result
    # the list reads it too
    assert {t.id: t.result["n"] for t in app.list(kind="k")} == {
        t: i * 2 for i, t in enumerate(ids)
    }


def test_a_success_written_alone_stores_its_return_value(app: jobtrail.App) -> None:
    # an outbox message makes the success leave the batch: the single-task move writes it
    app.sink("topic")(lambda message: None)

    @app.task("k")
    def k(ctx, p):
        ctx.emit("topic", {"x": 1})
        return [1, 2.5, "three", None]

    task_id = app.enqueue("k").id
    drain(app, task_id)
    assert app.get(task_id).result == [1, 2.5, "three", None]
    assert app.result(task_id) == [1, 2.5, "three", None]


def test_a_handler_that_returns_nothing_has_no_result(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        return None

    task_id = app.enqueue("k").id
    drain(app, task_id)
    assert app.get(task_id).state is jobtrail.State.SUCCEEDED
    assert app.get(task_id).result is None
    assert app.result(task_id) is None


def test_scalar_results_come_back_as_they_were(app: jobtrail.App) -> None:
    values = {"s": "text 中文", "i": 12345678901234, "f": 0.1, "b": False, "z": 0}

    @app.task("k")
    def k(ctx, p):
        return values[p]

    ids = {name: app.enqueue("k", name).id for name in values}
    run(app)
    for name, task_id in ids.items():
        assert app.result(task_id) == values[name]
        assert type(app.result(task_id)) is type(values[name])


def test_an_async_handler_returns_a_result(app: jobtrail.App) -> None:
    @app.task("k")
    async def k(ctx, p):
        await asyncio.sleep(0)
        return {"async": True}

    task_id = app.enqueue("k").id
    drain(app, task_id)
    assert app.result(task_id) == {"async": True}


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (Opaque(), "test_results.Opaque is not JSON-serialisable"),
        ({"when": {1, 2}}, "set is not JSON-serialisable"),
        ([1, float("nan")], "nan is not a JSON number"),
        ({"x": float("inf")}, "inf is not a JSON number"),
    ],
)
def test_a_return_value_that_is_not_json_ends_dead_invalid_input(
    app: jobtrail.App, value: Any, named: str
) -> None:
    @app.task("k", max_attempts=5)
    def k(ctx, p):
        return value

    task_id = app.enqueue("k").id
    drain(app, task_id)
    task = app.get(task_id)
    assert task.state is jobtrail.State.DEAD
    assert task.last_reason == "permanent_error"
    assert task.last_error_category == "invalid_input"
    assert named in (task.last_error or "")
    assert task.attempts == 1  # not retried: the same code returns the same value
    assert task.result is None
    with pytest.raises(jobtrail.TaskFailed) as caught:
        app.result(task_id)
    assert caught.value.category == "invalid_input"


def test_a_return_value_over_the_limit_ends_dead_naming_the_size(store: Any) -> None:
    app = store.app(result_limit=100)

    @app.task("k")
    def k(ctx, p):
        return "x" * p

    small = app.enqueue("k", 98).id  # 100 bytes with its quotes: allowed
    big = app.enqueue("k", 99).id
    run(app)
    assert app.result(small) == "x" * 98
    task = app.get(big)
    assert (task.state, task.last_reason, task.last_error_category) == (
        jobtrail.State.DEAD,
        "permanent_error",
        "invalid_input",
    )
    assert "101 bytes" in (task.last_error or "") and "limit of 100 bytes" in (
        task.last_error or ""
    )
    assert task.result is None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "1", 10**12])
def test_a_bad_result_limit_is_refused(store: Any, bad: Any) -> None:
    with pytest.raises(ValueError, match="result_limit"):
        jobtrail.App(store.url, result_limit=bad)


def test_result_of_a_dead_task_raises_task_failed(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.PermanentError("no such account", category="not_found")

    task_id = app.enqueue("k").id
    drain(app, task_id)
    with pytest.raises(jobtrail.TaskFailed) as caught:
        app.result(task_id, timeout=1)
    failed = caught.value
    assert failed.task.id == task_id
    assert failed.state is jobtrail.State.DEAD
    assert failed.reason == "permanent_error"
    assert failed.category == failed.error_category == "not_found"
    assert failed.error == "PermanentError: no such account"
    assert f"task {task_id} ended dead" in str(failed)


def test_result_of_a_cancelled_task_raises_task_failed(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        return 1

    task_id = app.enqueue("k", delay=3600).id
    app.cancel(task_id, by="test")
    with pytest.raises(jobtrail.TaskFailed) as caught:
        app.result(task_id)
    assert caught.value.state is jobtrail.State.CANCELLED
    assert caught.value.reason == "cancelled_before_start"


def test_result_of_an_unfinished_task_without_timeout_does_not_wait(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        return 1

    task_id = app.enqueue("k", delay=3600).id
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"has not finished \(it is queued\); pass timeout="):
        app.result(task_id)
    with pytest.raises(TimeoutError, match=r"did not finish within 0.2s \(it is queued\)"):
        app.result(task_id, timeout=0.2)
    assert time.monotonic() - started >= 0.2  # it did wait for the timeout given


@pytest.mark.parametrize("bad", [-1, float("nan"), "5", True])
def test_a_bad_timeout_is_refused(app: jobtrail.App, bad: Any) -> None:
    app.task("k")(lambda ctx, p: None)
    task_id = app.enqueue("k").id
    with pytest.raises(ValueError, match="timeout"):
        app.result(task_id, timeout=bad)


def test_result_of_an_unknown_task_is_task_not_found(app: jobtrail.App) -> None:
    with pytest.raises(jobtrail.TaskNotFound):
        app.result("999999", timeout=0.1)


def test_result_waits_for_a_task_a_worker_finishes_later(store: Any) -> None:
    app = store.app()
    release = threading.Event()

    @app.task("k")
    def k(ctx, p):
        release.wait(10)
        return {"done": p}

    task_id = app.enqueue("k", "later").id
    worker = threading.Thread(target=run, args=(app,), daemon=True)
    worker.start()
    threading.Timer(0.3, release.set).start()
    # another App on the same store: the wake-up must cross connections (and processes)
    reader = store.app()
    assert reader.result(task_id, timeout=20) == {"done": "later"}
    worker.join(10)


def test_the_finish_watch_is_woken_by_a_completion(store: Any) -> None:
    """The wake-up itself (not the fallback poll): a watch opened before a task completes in
    another thread returns True from a long wait, on both backends."""
    app = store.app()

    @app.task("k")
    def k(ctx, p):
        return 7

    task_id = app.enqueue("k").id
    reader = store.app()
    with reader._driver.watch_finished() as wait:
        worker = threading.Thread(target=run, args=(app,), daemon=True)
        worker.start()
        woke = False
        deadline = time.monotonic() + 30
        while not woke and time.monotonic() < deadline:
            woke = wait(30)
        assert woke
        worker.join(10)
    assert reader.result(task_id) == 7


def test_a_replay_starts_without_the_old_result(app: jobtrail.App) -> None:
    outcome: dict[str, Any] = {"fail": True}

    @app.task("k", max_attempts=1)
    def k(ctx, p):
        if outcome["fail"]:
            raise jobtrail.PermanentError("bad")
        return "second"

    task_id = app.enqueue("k").id
    drain(app, task_id)
    outcome["fail"] = False
    app.replay(task_id, by="op", note="fixed")
    drain(app, task_id)
    assert app.result(task_id) == "second"
    assert reasons(app, task_id)[-1] == "completed"
