"""Serial per key: ``enqueue(..., concurrency_key=K)`` with the kind's ``concurrency_per_key``,
decided in the claim, the same on both backends.

Claims go through the claim seam (``transition.claim``) as a worker's do, so a test can count
what one claim takes; completions through ``transition.complete_many``.
"""

from __future__ import annotations

from typing import Any

import pytest

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim

from .support import sweep_until_moved, wait_lease_expired

OWNER = "w:1:a"


def register(app: jobtrail.App, per_key: int | None = None) -> None:
    @app.task("job", concurrency_per_key=per_key)
    def job(ctx: Any, payload: Any) -> None:
        return None

    @app.task("other")
    def other(ctx: Any, payload: Any) -> None:
        return None


def claim(app: jobtrail.App, limit: int, kinds: tuple[str, ...] = ("job",)) -> list[dict[str, Any]]:
    request = Claim(owner=OWNER, queues=["default"], kinds=list(kinds), limit=limit, version=None)
    with app._driver.transaction() as tx:
        return transition.claim(app._driver, tx, request)


def complete(app: jobtrail.App, rows: list[dict[str, Any]]) -> None:
    with app._driver.transaction() as tx:
        done = transition.complete_many(
            app._driver, tx, OWNER, OWNER, [(r["id"], r["attempts"]) for r in rows]
        )
    assert done == {r["id"] for r in rows}


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [str(r["id"]) for r in rows]


def test_one_task_per_key_runs_at_once_in_due_order(app: jobtrail.App) -> None:
    register(app)
    a = [app.enqueue("job", i, concurrency_key="account:1").id for i in range(3)]
    b = [app.enqueue("job", i, concurrency_key="account:2").id for i in range(2)]
    first = claim(app, 10)
    assert sorted(ids(first)) == sorted([a[0], b[0]])  # one of each key, each key's first
    assert claim(app, 10) == []  # both keys are held
    complete(app, [r for r in first if str(r["id"]) == a[0]])
    second = claim(app, 10)
    assert ids(second) == [a[1]]  # the next of account:1 only; account:2 still held
    complete(app, second + [r for r in first if str(r["id"]) == b[0]])
    third = claim(app, 10)
    assert sorted(ids(third)) == sorted([a[2], b[1]])


def test_concurrency_per_key_lets_n_run_and_other_tasks_are_unaffected(
    app: jobtrail.App,
) -> None:
    register(app, per_key=2)
    keyed = [app.enqueue("job", i, concurrency_key="k").id for i in range(5)]
    plain = [app.enqueue("job", i).id for i in range(3)]
    rows = claim(app, 10)
    assert set(ids(rows)) == {keyed[0], keyed[1], *plain}
    assert claim(app, 10) == []
    complete(app, [r for r in rows if str(r["id"]) == keyed[0]])
    assert ids(claim(app, 10)) == [keyed[2]]


def test_a_key_is_per_queue_and_tenant(app: jobtrail.App) -> None:
    register(app)
    t1 = app.enqueue("job", 1, concurrency_key="k", tenant="t1").id
    t2 = app.enqueue("job", 2, concurrency_key="k", tenant="t2").id
    assert sorted(ids(claim(app, 10))) == sorted([t1, t2])


def test_a_head_that_is_not_due_or_not_served_holds_the_key_back(app: jobtrail.App) -> None:
    register(app)
    app.enqueue("other", 0, concurrency_key="k")
    later = app.enqueue("job", 1, concurrency_key="k").id
    assert claim(app, 10) == []  # the key's first task is of a kind this worker does not run
    rows = claim(app, 10, kinds=("job", "other"))
    assert len(rows) == 1 and rows[0]["kind"] == "other"
    complete(app, rows)
    rows = claim(app, 10)
    assert ids(rows) == [later]
    complete(app, rows)
    app.enqueue("job", 2, concurrency_key="d", delay=3600)
    due = app.enqueue("job", 3, concurrency_key="d").id
    rows = claim(app, 10)  # due order: the one due now goes before the one due in an hour
    assert ids(rows) == [due]
    complete(app, rows)
    assert claim(app, 10) == []


def test_cancel_requested_holds_the_key_until_the_holder_ends(app: jobtrail.App) -> None:
    @app.task("short", lease_seconds=0.3, max_attempts=1)
    def short(ctx: Any, payload: Any) -> None:
        return None

    first = app.enqueue("short", 0, concurrency_key="k").id
    second = app.enqueue("short", 1, concurrency_key="k").id
    rows = claim(app, 10, kinds=("short",))
    assert ids(rows) == [first]
    app.cancel(first, by="op", note="stop")  # leased -> cancel_requested: still holds the key
    assert claim(app, 10, kinds=("short",)) == []
    wait_lease_expired(app, first)
    sweep_until_moved(app, first)  # the lease ran out: the holder ends, the key is free
    assert ids(claim(app, 10, kinds=("short",))) == [second]


def test_the_keyed_task_says_why_it_waits(app: jobtrail.App) -> None:
    register(app)
    holder = app.enqueue("job", 0, concurrency_key="account:42").id
    waiting = app.enqueue("job", 1, concurrency_key="account:42").id
    claim(app, 10)
    text = app.explain(waiting)
    assert f"key account:42 has 1 of 1 running (task {holder})" in text
    zh = app.explain(waiting, lang="zh")
    assert "account:42" in zh and holder in zh


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (42, TypeError, "concurrency_key must be a string"),
        ("", ValueError, "concurrency_key must be a non-empty"),
        ("x" * 256, ValueError, "at most 255"),
        ("a\x00b", ValueError, "concurrency_key contains a NUL"),
    ],
)
def test_a_bad_key_is_refused_and_nothing_is_written(
    app: jobtrail.App, value: Any, error: type[Exception], words: str
) -> None:
    register(app)
    with pytest.raises(error, match=words):
        app.enqueue("job", 1, concurrency_key=value)
    with pytest.raises(error, match=words):
        app.enqueue_many([{"kind": "job", "payload": 1, "concurrency_key": value}])
    assert app.list() == []


@pytest.mark.parametrize("value", [0, -1, 1001, 1.5, "2", True])
def test_a_bad_concurrency_per_key_is_refused(app: jobtrail.App, value: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="concurrency_per_key"):

        @app.task("bad", concurrency_per_key=value)
        def bad(ctx: Any, payload: Any) -> None:
            return None

    assert "bad" not in app.kinds


def test_the_handle_and_the_async_api_take_the_key(app: jobtrail.App) -> None:
    import asyncio

    @app.task("handled", concurrency_per_key=1)
    def handled(ctx: Any, payload: Any) -> None:
        return None

    first = handled.enqueue(1, concurrency_key="h").id
    second = asyncio.run(handled.aenqueue(2, concurrency_key="h")).id
    third = asyncio.run(app.aenqueue("handled", 3, concurrency_key="h")).id
    rows = claim(app, 10, kinds=("handled",))
    assert ids(rows) == [first]
    complete(app, rows)
    assert ids(claim(app, 10, kinds=("handled",))) == [second]
    assert third not in (first, second)
