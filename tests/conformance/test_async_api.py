"""The async API — ``aenqueue``, ``aenqueue_many``, ``aget``, ``alist``,
``atransitions``, ``aexplain``, ``acancel``, ``areplay`` — takes the sync methods' arguments,
gives their answers and raises their errors, on both backends; on PostgreSQL it runs on psycopg
async connections and ``connection=`` takes the caller's ``AsyncConnection``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import pytest

import jobtrail

from .support import drain, reasons, run

T = TypeVar("T")


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(fn())  # type: ignore[arg-type]


def _kinds(app: jobtrail.App) -> None:
    app.task("ok")(lambda ctx, p: None)

    @app.task("boom", max_attempts=1)
    def boom(ctx: jobtrail.Context, p: Any) -> None:
        raise jobtrail.PermanentError("bad input", category="invalid_input")


def test_aenqueue_stores_what_enqueue_stores(app: jobtrail.App) -> None:
    _kinds(app)

    async def go() -> tuple[jobtrail.Task, jobtrail.Task]:
        made = await app.aenqueue("ok", {"n": 1}, priority=3, tenant="t1", delay=60)
        return made, await app.aget(made.id)

    made, read = arun(go)
    sync = app.get(made.id)
    assert made.created and made.state == "queued"
    assert (read.payload, read.priority, read.tenant) == ({"n": 1}, 3, "t1")
    assert read == sync
    assert reasons(app, made.id) == ["enqueued"]


def test_aenqueue_idempotency_is_the_same(app: jobtrail.App) -> None:
    _kinds(app)

    async def go() -> tuple[jobtrail.Task, jobtrail.Task]:
        first = await app.aenqueue("ok", {"a": 1}, idempotency_key="k")
        again = await app.aenqueue("ok", {"a": 1}, idempotency_key="k")
        with pytest.raises(jobtrail.IdempotencyConflict):
            await app.aenqueue("ok", {"a": 2}, idempotency_key="k")
        return first, again

    first, again = arun(go)
    assert first.created and not again.created and first.id == again.id
    assert len(app.list()) == 1


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        (("nope", None), jobtrail.UnknownKind, "nope"),
        (("ok", {"x": float("nan")}), ValueError, "non-finite"),
        (("ok", {1: 2}), TypeError, "keys must be strings"),
        (("webhook.github", None), ValueError, "webhook kind"),
    ],
)
def test_aenqueue_refuses_what_enqueue_refuses_and_writes_nothing(
    app: jobtrail.App, args: tuple[Any, ...], error: type[Exception], words: str
) -> None:
    _kinds(app)
    with pytest.raises(error) as sync:
        app.enqueue(*args)

    async def go() -> None:
        await app.aenqueue(*args)

    with pytest.raises(error) as async_:
        arun(go)
    assert words in str(async_.value) and str(async_.value) == str(sync.value)
    assert app.list() == []


def test_aenqueue_many_is_all_or_nothing(app: jobtrail.App) -> None:
    _kinds(app)

    async def go() -> list[jobtrail.Task]:
        with pytest.raises(ValueError, match="item 2"):
            await app.aenqueue_many(
                [{"kind": "ok"}, {"kind": "ok", "payload": 1}, {"kind": "ok", "delay": -1}]
            )
        assert await app.alist() == []
        return await app.aenqueue_many(
            [{"kind": "ok", "payload": i} for i in range(5)]
            + [{"kind": "ok", "idempotency_key": "x"}]
        )

    made = arun(go)
    assert [t.payload for t in made] == [0, 1, 2, 3, 4, None]
    assert sorted(t.id for t in app.list()) == sorted(t.id for t in made)


def test_the_reads_answer_as_the_sync_ones(app: jobtrail.App) -> None:
    _kinds(app)
    done, dead = app.enqueue("ok", {"v": 1}), app.enqueue("boom")
    run(app)

    async def go() -> tuple[Any, ...]:
        return (
            await app.alist(state="succeeded"),
            await app.alist(kind="boom", limit=1),
            await app.atransitions(dead.id),
            await app.aexplain(dead.id),
            await app.aexplain(dead.id, lang="zh"),
        )

    listed, boom, log, text, zh = arun(go)
    assert [t.id for t in listed] == [done.id]
    assert [t.id for t in boom] == [dead.id]
    assert log == app.transitions(dead.id)
    assert text == app.explain(dead.id) and "permanent_error" in text
    assert zh == app.explain(dead.id, lang="zh")


def test_the_reads_raise_what_the_sync_ones_raise(app: jobtrail.App) -> None:
    async def go() -> None:
        with pytest.raises(jobtrail.TaskNotFound):
            await app.aget("999")
        with pytest.raises(jobtrail.TaskNotFound):
            await app.atransitions("x1")
        with pytest.raises(ValueError, match="unknown state"):
            await app.alist(state="sleeping")
        with pytest.raises(ValueError, match="unknown language"):
            await app.aexplain("1", lang="fr")

    arun(go)


def test_acancel_and_areplay_move_tasks_as_cancel_and_replay_do(app: jobtrail.App) -> None:
    _kinds(app)
    waiting = app.enqueue("ok", delay=3600)
    dead = app.enqueue("boom")
    run(app)

    async def go() -> tuple[Any, ...]:
        cancelled = await app.acancel(waiting.id, by="ann", note="not needed")
        again = await app.acancel(waiting.id, by="ann")
        with pytest.raises(jobtrail.IllegalTransition):
            await app.areplay(waiting.id, by="ann", note="no")
        with pytest.raises(ValueError, match="by is required"):
            await app.acancel(waiting.id, by="")
        replayed = await app.areplay(dead.id, by="ann", note="fixed the input")
        return cancelled, again, replayed

    cancelled, again, replayed = arun(go)
    assert (cancelled.outcome, cancelled.state) == ("cancelled", "cancelled")
    assert again.outcome == "already_terminal"
    assert replayed.state == "queued" and replayed.replay_count == 1
    assert reasons(app, waiting.id) == ["enqueued", "cancelled_before_start"]
    assert reasons(app, dead.id)[-1] == "replayed"


def test_concurrent_aenqueues_on_one_loop_all_land(app: jobtrail.App) -> None:
    _kinds(app)

    async def go() -> list[jobtrail.Task]:
        return await asyncio.gather(*(app.aenqueue("ok", i) for i in range(40)))

    made = arun(go)
    assert sorted(t.payload for t in made) == list(range(40))
    assert len({t.id for t in made}) == 40
    assert len(app.list(limit=100)) == 40


def test_the_async_api_works_from_a_second_event_loop(app: jobtrail.App) -> None:
    """psycopg's async pool belongs to one loop: a later ``asyncio.run`` gets its own."""
    _kinds(app)
    first = arun(lambda: app.aenqueue("ok", 1))
    second = arun(lambda: app.aenqueue("ok", 2))
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            arun(lambda: app.aenqueue("ok", 3))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert errors == []
    assert int(second.id) > int(first.id)
    assert sorted(t.payload for t in app.list()) == [1, 2, 3]


def test_a_task_made_by_aenqueue_runs(app: jobtrail.App) -> None:
    _kinds(app)
    made = arun(lambda: app.aenqueue("ok", {"x": 1}))
    assert drain(app, made.id).state == "succeeded"


# -- PostgreSQL: the caller's async transaction -------------------------------------------------


def test_aenqueue_in_the_callers_async_transaction(pg: Any) -> None:
    app = pg.app()
    _kinds(app)

    async def go() -> tuple[str, str]:
        async with await psycopg.AsyncConnection.connect(pg.url) as conn:
            kept = await app.aenqueue("ok", {"k": 1}, connection=conn)
            # not visible outside the caller's transaction until it commits
            with pytest.raises(jobtrail.TaskNotFound):
                await app.aget(kept.id)
            await conn.commit()
            async with conn.transaction():
                dropped = await app.aenqueue("ok", {"k": 2}, connection=conn)
                many = await app.aenqueue_many([{"kind": "ok"}] * 3, connection=conn)
                assert len(many) == 3
                raise_in = conn.transaction(force_rollback=True)
                async with raise_in:
                    await app.aenqueue("ok", {"k": 3}, connection=conn)
            # committed: the savepoint's task rolled back with it
            await conn.execute("SELECT 1")
            await conn.rollback()
            async with conn.transaction(force_rollback=True):
                gone = await app.aenqueue("ok", {"k": 4}, connection=conn)
        return kept.id, gone.id + "," + dropped.id

    kept, rest = arun(go)
    gone, dropped = rest.split(",")
    assert app.get(kept).payload == {"k": 1}
    assert app.get(dropped).payload == {"k": 2}
    with pytest.raises(jobtrail.TaskNotFound):
        app.get(gone)
    assert sorted(str(t.payload) for t in app.list()) == sorted(
        ["{'k': 1}", "{'k': 2}", "None", "None", "None"]
    )


def test_an_async_connection_on_the_sync_api_is_a_clear_error(pg: Any) -> None:
    app = pg.app()
    _kinds(app)

    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(pg.url) as conn:
            with pytest.raises(TypeError, match="aenqueue"):
                app.enqueue("ok", connection=conn)
            with pytest.raises(TypeError, match="AsyncConnection"):
                await app.aenqueue("ok", connection=object())

    arun(go)
    assert app.list() == []


def test_aenqueue_on_postgres_starts_no_thread(pg: Any) -> None:
    """No thread per call: the statements run on the loop's async connections."""
    app = pg.app()
    _kinds(app)

    async def go() -> set[str]:
        await app.aenqueue("ok")  # opens the pool
        before = {t.name for t in threading.enumerate()}
        await asyncio.gather(*(app.aenqueue("ok", i) for i in range(20)))
        await app.aget("1")
        return {t.name for t in threading.enumerate()} - before

    assert arun(go) == set()


def test_cancelled_aenqueues_leave_the_store_and_the_pool_whole(app: jobtrail.App) -> None:
    """A caller that gives up (a request timeout) cancels the await mid-flight: the task
    exists or not, whole (the invariant check after the test), and no connection is lost to
    the pool — later calls still run."""
    _kinds(app)

    async def go() -> tuple[int, int]:
        await app.aenqueue("ok")
        gave_up = 0
        for i in range(60):
            try:
                await asyncio.wait_for(app.aenqueue("ok", i), timeout=0.0002 * (i % 10))
            except TimeoutError:
                gave_up += 1
        done = await asyncio.gather(*(app.aenqueue("ok", -1) for _ in range(30)))
        return gave_up, len(done)

    gave_up, later = arun(go)
    assert later == 30
    stored = [t for t in app.list(limit=1000) if t.payload != -1]
    assert 1 <= len(stored) <= 61 and gave_up >= 1
    assert all(t.state == "queued" for t in stored)
    assert all(len(app.transitions(t.id)) == 1 for t in stored)


def test_an_unreachable_postgres_is_store_unavailable_as_for_enqueue(tmp_path: Any) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    app = jobtrail.App(f"postgresql://postgres@127.0.0.1:{port}/x", connect_timeout=1)
    try:
        app.task("ok")(lambda ctx, p: None)
        with pytest.raises(jobtrail.StoreUnavailable):
            app.enqueue("ok")
        with pytest.raises(jobtrail.StoreUnavailable, match="PostgreSQL is unreachable"):
            arun(lambda: app.aenqueue("ok"))
    finally:
        app.close()


def test_aresult_answers_as_result(app: jobtrail.App) -> None:
    """Results from a coroutine: the result of a succeeded task, ``TaskFailed`` for a dead one,
    ``TimeoutError`` at once without ``timeout`` and after it with one, bad input refused."""
    app.task("answer")(lambda ctx, p: {"double": p["n"] * 2})
    _kinds(app)
    done = app.enqueue("answer", {"n": 21})
    dead = app.enqueue("boom", {})
    waiting = app.enqueue("ok", {}, delay=3600)
    drain(app, done.id)
    drain(app, dead.id)

    async def go() -> None:
        assert await app.aresult(done.id) == {"double": 42} == app.result(done.id)
        with pytest.raises(jobtrail.TaskFailed) as failed:
            await app.aresult(dead.id, timeout=5)
        assert failed.value.state == "dead" and failed.value.category == "invalid_input"
        with pytest.raises(TimeoutError, match="has not finished"):
            await app.aresult(waiting.id)
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError, match="did not finish within 0.3s"):
            await app.aresult(waiting.id, timeout=0.3)
        assert asyncio.get_running_loop().time() - started >= 0.3
        with pytest.raises(ValueError, match="timeout"):
            await app.aresult(waiting.id, timeout=-1)
        with pytest.raises(jobtrail.TaskNotFound):
            await app.aresult("999999")

    arun(go)


def test_aresult_waits_for_a_worker_without_blocking_the_loop(app: jobtrail.App) -> None:
    """A task finished by a background worker while ``aresult`` waits: the waiting coroutine
    gets its result, and another coroutine on the same loop keeps ticking meanwhile."""
    app.task("slow")(lambda ctx, p: (threading.Event().wait(0.3), "late")[1])

    async def go() -> tuple[Any, int]:
        task = await app.aenqueue("slow", {})
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        worker = app.start_worker(burst=False, concurrency=1)
        try:
            value = await app.aresult(task.id, timeout=20)
        finally:
            ticker.cancel()
            await worker.astop()
        return value, ticks

    value, ticks = arun(go)
    assert value == "late"
    assert ticks >= 10  # the loop ran other work during the >= 0.3 s wait
