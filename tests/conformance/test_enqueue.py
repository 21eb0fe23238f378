"""Enqueue: idempotency, timing, priority, bulk, transactional enqueue on
the caller's own connection, and bad input that changes nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import sqlite3
import threading
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import psycopg.rows
import pytest

import jobtrail
from jobtrail.model.enqueue_options import DEFAULTS

from .support import reasons, run


@pytest.fixture
def kapp(app: jobtrail.App) -> jobtrail.App:
    """The fixture app with a do-nothing kind ``k`` registered."""
    app.task("k")(lambda ctx, p: None)
    return app


# -- idempotency -----------------------------------------------------------------------------


def test_same_key_returns_the_same_task(kapp: jobtrail.App) -> None:
    first = kapp.enqueue("k", {"note": 1}, idempotency_key="order-1")
    again = kapp.enqueue("k", {"note": 1}, idempotency_key="order-1")
    assert first.created is True and again.created is False
    assert again.id == first.id and again.state == "queued"
    assert len(kapp.list()) == 1
    assert reasons(kapp, first.id) == ["enqueued"]
    # the repeat answers with the *current* state
    run(kapp)
    later = kapp.enqueue("k", {"note": 1}, idempotency_key="order-1")
    assert (later.id, later.created, later.state) == (first.id, False, "succeeded")
    assert len(kapp.list()) == 1


def test_same_payload_in_another_key_order_is_the_same_intent(kapp: jobtrail.App) -> None:
    first = kapp.enqueue("k", {"a": 1, "b": [1, 2]}, idempotency_key="key")
    again = kapp.enqueue("k", {"b": [1, 2], "a": 1}, idempotency_key="key")
    assert again.id == first.id and again.created is False


def test_same_key_with_another_payload_conflicts(kapp: jobtrail.App) -> None:
    first = kapp.enqueue("k", {"note": 1}, idempotency_key="order-1")
    for changed in ({"note": 2}, {"note": 1, "extra": True}, None, [1], {"note": 1.5}):
        with pytest.raises(jobtrail.IdempotencyConflict, match="order-1") as info:
            kapp.enqueue("k", changed, idempotency_key="order-1")
        assert info.value.task_id == first.id
    assert [t.id for t in kapp.list()] == [first.id]
    assert kapp.get(first.id).payload == {"note": 1}
    assert reasons(kapp, first.id) == ["enqueued"]


def test_key_is_scoped_by_tenant_and_kind(kapp: jobtrail.App) -> None:
    kapp.task("other")(lambda ctx, p: None)
    a = kapp.enqueue("k", {"n": 1}, idempotency_key="same", tenant="acme")
    b = kapp.enqueue("k", {"n": 1}, idempotency_key="same", tenant="globex")
    c = kapp.enqueue("other", {"n": 1}, idempotency_key="same", tenant="acme")
    d = kapp.enqueue("k", {"n": 2}, idempotency_key="same")  # tenant "" is its own scope
    assert len({a.id, b.id, c.id, d.id}) == 4
    assert all(t.created for t in (a, b, c, d))
    assert (b.tenant, kapp.get(b.id).tenant) == ("globex", "globex")
    # and within each scope the key still collapses repeats
    assert kapp.enqueue("k", {"n": 1}, idempotency_key="same", tenant="globex").id == b.id
    assert len(kapp.list()) == 4


def test_tasks_without_a_key_are_never_collapsed(kapp: jobtrail.App) -> None:
    a = kapp.enqueue("k", {"n": 1})
    b = kapp.enqueue("k", {"n": 1})
    assert a.id != b.id and a.created and b.created


def test_intent_key_is_stable_opaque_and_high_entropy() -> None:
    email, token = "alice@example.com", "sk-live-SECRET-123"
    key = jobtrail.intent_key("publish", 42, email, {"token": token, "body": "hello"})
    assert key == jobtrail.intent_key("publish", 42, email, {"body": "hello", "token": token})
    for secret in (email, token, "hello", "publish", "alice"):
        assert secret not in key
    assert len(key) >= 32
    hexpart = key.split("_")[-1]
    assert len(set(hexpart)) >= 10  # not a short or constant string
    # any change in any part gives a different key, and order matters
    others = {
        jobtrail.intent_key("publish", 43, email, {"token": token, "body": "hello"}),
        jobtrail.intent_key("publish", 42, email, {"token": token, "body": "hello!"}),
        jobtrail.intent_key("publish", email, 42, {"token": token, "body": "hello"}),
        jobtrail.intent_key("publish", "42", email, {"token": token, "body": "hello"}),
    }
    assert key not in others and len(others) == 4
    with pytest.raises(ValueError):
        jobtrail.intent_key()


def test_intent_key_works_as_an_idempotency_key(kapp: jobtrail.App) -> None:
    payload = {"note": 7, "email": "bob@example.com"}
    key = jobtrail.intent_key("note", 7, payload)
    a = kapp.enqueue("k", payload, idempotency_key=key)
    b = kapp.enqueue("k", dict(payload), idempotency_key=jobtrail.intent_key("note", 7, payload))
    assert a.id == b.id and b.created is False
    assert kapp.get(a.id).idempotency_key == key


# -- timing and order ------------------------------------------------------------------------


def test_delay_makes_a_task_not_due(app: jobtrail.App) -> None:
    ran: list[str] = []
    app.task("k")(lambda ctx, p: ran.append(ctx.task_id))
    task = app.enqueue("k", delay=60)
    assert task.state == "queued" and task.run_at is not None
    # run_at is the database's now + delay
    assert abs((task.run_at - task.created_at).total_seconds() - 60) < 0.01
    run(app)
    assert ran == [] and app.get(task.id).state == "queued"
    assert reasons(app, task.id) == ["enqueued"]


def test_run_at_in_the_future_waits_and_in_the_past_runs_at_once(app: jobtrail.App) -> None:
    ran: list[str] = []
    app.task("k")(lambda ctx, p: ran.append(ctx.payload))
    now = datetime.now(UTC)
    future = app.enqueue("k", "future", run_at=now + timedelta(hours=1))
    past = app.enqueue("k", "past", run_at=now - timedelta(days=3))
    as_text = app.enqueue("k", "text", run_at="2001-02-03T04:05:06Z")
    assert future.run_at is not None
    assert abs((future.run_at - (now + timedelta(hours=1))).total_seconds()) < 0.001
    assert as_text.run_at == datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)
    run(app, concurrency=1)
    assert ran == ["text", "past"]  # both overdue, earlier run_at first
    assert app.get(future.id).state == "queued"
    assert app.get(past.id).state == "succeeded"


def test_priority_then_run_at_then_enqueue_order(app: jobtrail.App) -> None:
    order: list[str] = []
    app.task("k")(lambda ctx, p: order.append(p))
    old = datetime.now(UTC) - timedelta(minutes=5)
    app.enqueue("k", "p0-a")
    app.enqueue("k", "p5-a", priority=5)
    app.enqueue("k", "p0-b")
    app.enqueue("k", "p-1", priority=-1)
    app.enqueue("k", "p5-b", priority=5)
    app.enqueue("k", "p0-old", run_at=old)
    app.enqueue("k", "p9", priority=9, delay=3600)  # highest, but not due
    app.enqueue("k", "p5-old", priority=5, run_at=old)
    run(app, concurrency=1)
    assert order == ["p5-old", "p5-a", "p5-b", "p0-old", "p0-a", "p0-b", "p-1"]


# -- bulk ------------------------------------------------------------------------------------


def test_enqueue_many_stores_all_in_order(kapp: jobtrail.App) -> None:
    tasks = kapp.enqueue_many(
        [
            {"kind": "k", "payload": {"n": 1}, "idempotency_key": "a"},
            {"kind": "k", "payload": {"n": 2}, "priority": 3},
            {"kind": "k", "payload": {"n": 3}, "delay": 60, "tenant": "acme"},
        ]
    )
    assert [t.payload for t in tasks] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert all(t.created and t.state == "queued" for t in tasks)
    assert (tasks[1].priority, tasks[2].tenant) == (3, "acme")
    assert len(kapp.list()) == 3
    # a repeat of a keyed item inside a batch returns the existing task
    again = kapp.enqueue_many(
        [
            {"kind": "k", "payload": {"n": 1}, "idempotency_key": "a"},
            {"kind": "k", "payload": {"n": 4}},
        ]
    )
    assert again[0].id == tasks[0].id and again[0].created is False and again[1].created


def test_enqueue_many_without_keys_keeps_order_and_logs_each(kapp: jobtrail.App) -> None:
    # the keyless batch is one statement on PostgreSQL: each task still gets its own
    # ``enqueued`` transition and the results come back in input order
    at = datetime(2030, 1, 1, tzinfo=UTC)
    items: list[dict[str, Any]] = [
        {"kind": "k", "payload": {"n": i}, "priority": i % 3, "tenant": f"t{i % 2}"}
        for i in range(40)
    ]
    items[5]["delay"] = 60
    items[7]["run_at"] = at
    tasks = kapp.enqueue_many(items)
    assert [t.payload for t in tasks] == [{"n": i} for i in range(40)]
    assert [(t.priority, t.tenant) for t in tasks] == [(i % 3, f"t{i % 2}") for i in range(40)]
    assert tasks[7].run_at == at and tasks[5].run_at > tasks[4].run_at
    assert len({t.id for t in tasks}) == 40
    for t in (tasks[0], tasks[5], tasks[39]):
        log = kapp.transitions(t.id)
        assert [(x.to_state, x.reason, x.actor) for x in log] == [("queued", "enqueued", "caller")]


def test_enqueue_many_items_of_kind_and_payload_match_single_enqueues(app: jobtrail.App) -> None:
    # bulk items holding only a kind and a payload are built from the kind's settings, checked
    # once per kind: they must come out as the same items enqueued one by one
    app.task("mail", queue="emails", max_attempts=3)(lambda ctx, p: None)
    app.task("k")(lambda ctx, p: None)
    items: list[dict[str, Any]] = [
        {"kind": "mail", "payload": {"n": 1}},
        {"kind": "k"},
        {"kind": "mail", "payload": ["x", 2]},
        {"kind": "mail", "payload": {"n": 3}, "priority": 2},  # not only kind and payload
        {"kind": "k", "payload": None},
    ]
    bulk = app.enqueue_many(items)
    single = [
        app.enqueue(
            i["kind"],
            i.get("payload"),
            **{k: v for k, v in i.items() if k not in ("kind", "payload")},
        )
        for i in items
    ]

    def seen(t: jobtrail.Task) -> tuple[Any, ...]:
        return (t.kind, t.queue, t.tenant, t.state, t.payload, t.priority, t.max_attempts)

    assert [seen(t) for t in bulk] == [seen(t) for t in single]
    assert [seen(app.get(t.id)) for t in bulk] == [seen(t) for t in single]
    assert [t.queue for t in bulk] == ["emails", "default", "emails", "emails", "default"]


def test_a_bulk_enqueue_holds_off_the_collector_and_restores_it(kapp: jobtrail.App) -> None:
    # everything a bulk enqueue allocates lives until it returns: the cyclic collector is
    # paused meanwhile (it would run every 700 allocations, ~35 times for 5,000 tasks)
    runs: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    items: list[dict[str, Any]] = [{"kind": "k", "payload": {"n": i}} for i in range(5000)]
    gc.callbacks.append(seen)
    try:
        tasks = kapp.enqueue_many(items)
    finally:
        gc.callbacks.remove(seen)
    assert len(tasks) == 5000 and len(runs) <= 2, runs
    assert gc.isenabled()
    with pytest.raises(TypeError, match="item 1"):
        kapp.enqueue_many([{"kind": "k"}, {"kind": "k", "payload": {1}}])
    assert gc.isenabled()
    gc.disable()  # paused by someone else: left paused
    try:
        kapp.enqueue_many([{"kind": "k"}])
        assert not gc.isenabled()
    finally:
        gc.enable()


BAD_ITEMS: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"kind": "nope"}, jobtrail.UnknownKind),
    ({"kind": "k", "payload": {1, 2}}, TypeError),
    ({"kind": "k", "payload": math.nan}, ValueError),
    ({"kind": "k", "delay": -1}, ValueError),
    ({"kind": "k", "priority": "high"}, TypeError),
    ({"kind": "k", "bogus": 1}, TypeError),
    ({"payload": {}}, TypeError),
]


def test_enqueue_many_is_all_or_nothing(kapp: jobtrail.App) -> None:
    for bad, error in BAD_ITEMS:
        items = [
            {"kind": "k", "payload": {"n": 0}},
            {"kind": "k", "payload": {"n": 1}},
            bad,
            {"kind": "k", "payload": {"n": 3}},
        ]
        with pytest.raises(error, match=r"\b2\b"):  # the error names the item
            kapp.enqueue_many(items)
        assert kapp.list() == [], bad


def test_enqueue_many_names_the_item_and_the_unknown_kind_once(kapp: jobtrail.App) -> None:
    with pytest.raises(jobtrail.UnknownKind) as caught:
        kapp.enqueue_many([{"kind": "k"}, {"kind": "nope"}])
    assert str(caught.value) == (
        "enqueue_many item 1: unknown task kind 'nope'; registered kinds: k"
    )
    assert caught.value.kind == "nope"
    assert kapp.list() == []


def test_enqueue_many_in_several_batches_is_all_or_nothing(kapp: jobtrail.App) -> None:
    # keyless items go to the store a batch at a time (pipelined on PostgreSQL), validated as
    # they go: an item that fails in a later batch rolls back the batches already inserted
    size = kapp._driver.insert_batch
    n = 2 * size + 10
    items: list[dict[str, Any]] = [{"kind": "k", "payload": {"n": i}} for i in range(n)]
    bad = 2 * size + 3
    items[bad] = {"kind": "k", "payload": {"n": math.inf}}
    with pytest.raises(ValueError, match=rf"item {bad}\b"):
        kapp.enqueue_many(items)
    assert kapp.list() == []
    items[bad] = {"kind": "k", "payload": {"n": bad}}
    tasks = kapp.enqueue_many(items)
    ids = [int(t.id) for t in tasks]
    assert ids == sorted(ids) and len(set(ids)) == n
    assert [t.payload["n"] for t in tasks] == list(range(n))
    for i in (0, size - 1, size, 2 * size, n - 1):
        assert dataclasses.replace(tasks[i], created=False) == kapp.get(tasks[i].id)


def test_enqueue_many_rolls_back_on_a_conflict_in_the_store(kapp: jobtrail.App) -> None:
    existing = kapp.enqueue("k", {"n": 1}, idempotency_key="taken")
    with pytest.raises(jobtrail.IdempotencyConflict):
        kapp.enqueue_many(
            [
                {"kind": "k", "payload": {"n": 10}},
                {"kind": "k", "payload": {"n": 11}},
                {"kind": "k", "payload": {"n": 2}, "idempotency_key": "taken"},
            ]
        )
    assert [t.id for t in kapp.list()] == [existing.id]


# -- transactional enqueue on the caller's connection -----------------------------------------


def _caller_connection(store) -> Any:
    if store.backend == "sqlite":
        return sqlite3.connect(store.url[len("sqlite:///") :])
    return psycopg.connect(store.url)


def _orders(store, conn: Any) -> None:
    conn.execute("CREATE TABLE shop_orders (id INTEGER PRIMARY KEY, note TEXT)")
    conn.commit()


def _insert_order(store, conn: Any, order_id: int) -> None:
    if store.backend == "sqlite":
        conn.execute("INSERT INTO shop_orders (id, note) VALUES (?, 'x')", (order_id,))
    else:
        conn.execute("INSERT INTO shop_orders (id, note) VALUES (%s, 'x')", (order_id,))


def _order_ids(store, conn: Any) -> list[int]:
    rows = conn.execute("SELECT id FROM shop_orders ORDER BY id").fetchall()
    conn.commit()
    return [r[0] for r in rows]


def test_enqueue_on_the_callers_connection_follows_its_transaction(store, kapp) -> None:
    with closing(_caller_connection(store)) as conn:
        _orders(store, conn)
        # rollback: neither the order nor the task exists
        _insert_order(store, conn, 1)
        gone = kapp.enqueue("k", {"order": 1}, connection=conn)
        assert gone.created and gone.state == "queued"
        assert kapp.list() == []  # not visible before the caller commits
        conn.rollback()
        assert kapp.list() == []
        with pytest.raises(jobtrail.TaskNotFound):
            kapp.get(gone.id)
        # commit: both exist, with the task's history
        _insert_order(store, conn, 2)
        kept = kapp.enqueue("k", {"order": 2}, connection=conn)
        conn.commit()
        assert [t.id for t in kapp.list()] == [kept.id]
        assert reasons(kapp, kept.id) == ["enqueued"]
        assert _order_ids(store, conn) == [2]
        # and it runs like any other task
        run(kapp)
        assert kapp.get(kept.id).state == "succeeded"


def test_enqueue_many_on_the_callers_connection(store, kapp) -> None:
    with closing(_caller_connection(store)) as conn:
        kapp.enqueue_many([{"kind": "k"}, {"kind": "k"}], connection=conn)
        conn.rollback()
        assert kapp.list() == []
        kapp.enqueue_many([{"kind": "k"}, {"kind": "k"}], connection=conn)
        conn.commit()
        assert len(kapp.list()) == 2


def test_enqueue_many_in_batches_on_the_callers_connection(store, kapp) -> None:
    # several pipelined batches in the caller's transaction, whatever rows its connection makes;
    # an item that fails in a later batch undoes only the enqueue, not the caller's own work
    n = 2 * kapp._driver.insert_batch + 1
    with closing(_caller_connection(store)) as conn:
        if store.backend != "sqlite":
            conn.row_factory = psycopg.rows.dict_row
        _orders(store, conn)
        _insert_order(store, conn, 1)
        items: list[dict[str, Any]] = [{"kind": "k", "payload": {"n": i}} for i in range(n)]
        with pytest.raises(TypeError, match=rf"item {n - 1}\b"):
            kapp.enqueue_many([*items[:-1], {"kind": "k", "payload": {"n": {1}}}], connection=conn)
        tasks = kapp.enqueue_many(items, connection=conn)
        single = kapp.enqueue("k", {"n": -1}, connection=conn)
        assert kapp.list() == []  # not visible before the caller commits
        conn.commit()
        if store.backend != "sqlite":
            conn.row_factory = psycopg.rows.tuple_row
        assert _order_ids(store, conn) == [1]
        assert [t.payload["n"] for t in tasks] == list(range(n))
        assert len({t.id for t in tasks}) == n
        for task in (tasks[0], tasks[-1], single):
            assert dataclasses.replace(task, created=False) == kapp.get(task.id)
            assert task.created_at.utcoffset() == timedelta(0)


def test_failed_enqueue_leaves_the_callers_transaction_usable(store, kapp) -> None:
    with closing(_caller_connection(store)) as conn:
        _orders(store, conn)
        _insert_order(store, conn, 1)
        kapp.enqueue("k", {"n": 1}, idempotency_key="once", connection=conn)
        with pytest.raises(jobtrail.IdempotencyConflict):
            kapp.enqueue("k", {"n": 2}, idempotency_key="once", connection=conn)
        _insert_order(store, conn, 2)
        conn.commit()
        assert _order_ids(store, conn) == [1, 2]
        assert len(kapp.list()) == 1


def test_wrong_connection_type_is_refused(store, kapp) -> None:
    with pytest.raises(TypeError, match="connection"):
        kapp.enqueue("k", connection=object())
    assert kapp.list() == []


# -- bad input changes nothing ---------------------------------------------------------------

NAIVE = datetime(2030, 1, 1, 12, 0, 0)


BAD_INPUT: list[tuple[tuple[Any, ...], dict[str, Any], type[Exception], str]] = [
    (("nope",), {}, jobtrail.UnknownKind, "nope"),
    (("",), {}, TypeError, "kind"),
    (("k", object()), {}, TypeError, "object"),
    (("k", {"s": {1, 2}}), {}, TypeError, "set"),
    (("k", {1: "x"}), {}, TypeError, "key"),
    (("k", (1, 2)), {}, TypeError, "tuple"),
    (("k", b"bytes"), {}, TypeError, "bytes"),
    (("k", {"x": math.nan}), {}, ValueError, "nan"),
    (("k", [math.inf]), {}, ValueError, "inf"),
    (("k", {"x": "a\x00b"}), {}, ValueError, "NUL"),
    (("k", {"x\x00": 1}), {}, ValueError, "NUL"),
    (("k", {"x": "\ud800"}), {}, ValueError, "surrogate"),
    (("k", "x" * (1024 * 1024 + 1)), {}, ValueError, "limit"),
    (("k",), {"run_at": NAIVE}, ValueError, "run_at"),
    (("k",), {"run_at": "not a time"}, ValueError, "run_at"),
    (("k",), {"run_at": datetime.now(UTC), "delay": 5}, ValueError, "delay"),
    (("k",), {"delay": -1}, ValueError, "delay"),
    (("k",), {"delay": math.nan}, ValueError, "delay"),
    (("k",), {"delay": "5"}, ValueError, "delay"),
    (("k",), {"priority": "high"}, TypeError, "priority"),
    (("k",), {"priority": 1.5}, TypeError, "priority"),
    (("k",), {"priority": True}, TypeError, "priority"),
    (("k",), {"priority": 2**40}, TypeError, "priority"),
    (("k",), {"max_attempts": 0}, ValueError, "max_attempts"),
    (("k",), {"idempotency_key": ""}, ValueError, "idempotency_key"),
    (("k",), {"idempotency_key": "x" * 256}, ValueError, "idempotency_key"),
    (("k",), {"queue": " padded "}, ValueError, "queue"),
    (("k",), {"tenant": 5}, TypeError, "tenant"),
    # PostgreSQL text cannot hold NUL: refused on every backend alike
    (("k",), {"tenant": "a\x00b"}, ValueError, "tenant contains a NUL"),
    (("k",), {"idempotency_key": "a\x00"}, ValueError, "idempotency_key contains a NUL"),
    (("k",), {"queue": "q\x00"}, ValueError, "queue contains a NUL"),
    (("k",), {"parent": "no-such-task"}, jobtrail.TaskNotFound, "no-such-task"),
]


def test_bad_input_raises_and_stores_nothing(kapp: jobtrail.App) -> None:
    for args, kwargs, error, names in BAD_INPUT:
        with pytest.raises(error) as info:
            kapp.enqueue(*args, **kwargs)
        assert names.lower() in str(info.value).lower(), (names, str(info.value))
        assert kapp.list() == [], (args, kwargs)


def test_a_kind_name_with_a_nul_character_is_refused_at_registration(app: jobtrail.App) -> None:
    with pytest.raises(ValueError, match="NUL"):
        app.task("k\x00x")(lambda ctx, p: None)
    with pytest.raises(jobtrail.UnknownKind):
        app.enqueue("k\x00x")
    assert app.list() == []


def test_payload_at_the_limit_is_accepted_and_read_back_equal(kapp: jobtrail.App) -> None:
    payload = {"text": "é" * 1000, "nested": [{"a": None, "b": True, "c": 1.5}], "big": 2**53}
    task = kapp.enqueue("k", payload)
    assert kapp.get(task.id).payload == payload
    limit = 1024 * 1024
    exact = "y" * (limit - 2)  # a JSON string adds two quotes
    assert kapp.get(kapp.enqueue("k", exact).id).payload == exact


def test_unknown_numeric_parent_is_task_not_found(kapp: jobtrail.App) -> None:
    with pytest.raises(jobtrail.TaskNotFound, match="999999"):
        kapp.enqueue("k", parent="999999")
    assert kapp.list() == []


def test_concurrent_enqueues_with_one_key_make_one_task(store, kapp: jobtrail.App) -> None:
    apps = [kapp] + [store.app() for _ in range(3)]
    for other in apps[1:]:
        other.task("k")(lambda ctx, p: None)
    barrier = threading.Barrier(8)
    results: list[jobtrail.Task] = []
    errors: list[BaseException] = []

    def enqueue(app: jobtrail.App) -> None:
        try:
            barrier.wait(5)
            results.append(app.enqueue("k", {"order": 9}, idempotency_key="order-9"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=enqueue, args=(apps[i % 4],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert errors == []
    assert len(results) == 8 and len({t.id for t in results}) == 1
    assert sum(t.created for t in results) == 1
    assert len(kapp.list()) == 1
    assert reasons(kapp, results[0].id) == ["enqueued"]


@pytest.mark.parametrize("backend", ["postgres", "pgbouncer-tx"])  # SQLite stores epoch seconds
def test_times_from_a_callers_connection_in_another_time_zone_read_back_in_utc(store, kapp) -> None:
    """Our own connections run in UTC; a caller's may not — its rows are converted."""
    with closing(_caller_connection(store)) as conn:
        conn.execute("SET TIME ZONE 'Asia/Kathmandu'")  # +05:45
        task = kapp.enqueue("k", {"n": 1}, connection=conn)
        conn.commit()
    assert task.created_at.utcoffset() == timedelta(0)
    assert task.created_at == kapp.get(task.id).created_at


# -- the options (model/enqueue_options.py) ---------------------------------------------------


@pytest.mark.parametrize(
    "path", ["enqueue", "aenqueue", "handle.enqueue", "handle.aenqueue", "many", "handle.many"]
)
def test_an_unknown_option_is_a_type_error_naming_it(kapp: jobtrail.App, path: str) -> None:
    """Each way in refuses a keyword that ``EnqueueOptions`` does not define, as a signature
    without it would, and writes nothing."""
    handle = kapp.task("h")(lambda ctx, p: None)
    bad: dict[str, Any] = {"priority": 1, "prority": 2}
    calls = {
        "enqueue": lambda: kapp.enqueue("k", {}, **bad),
        "aenqueue": lambda: asyncio.run(kapp.aenqueue("k", {}, **bad)),
        "handle.enqueue": lambda: handle.enqueue({}, **bad),
        "handle.aenqueue": lambda: asyncio.run(handle.aenqueue({}, **bad)),
        "many": lambda: kapp.enqueue_many([{"kind": "k", **bad}]),
        "handle.many": lambda: handle.enqueue_many([{}], **bad),
    }
    message = {
        "many": r"item 0 has unknown keys: \['prority'\]",
        "handle.many": r"unknown enqueue options \['prority'\]",
    }.get(path, "unexpected keyword argument 'prority'")
    with pytest.raises(TypeError, match=message):
        calls[path]()
    assert kapp.list() == []


def test_an_option_left_out_means_its_default(kapp: jobtrail.App) -> None:
    """``DEFAULTS`` says what the code does: passing every option at its default stores the
    same task as passing none."""
    fields = ("queue", "tenant", "priority", "max_attempts", "idempotency_key", "parent_id")
    bare = kapp.enqueue("k", {"n": 1})
    spelled = kapp.enqueue("k", {"n": 1}, **DEFAULTS)
    assert [getattr(spelled, f) for f in fields] == [getattr(bare, f) for f in fields]
    assert abs((spelled.run_at - bare.run_at).total_seconds()) < 60
    many = kapp.enqueue_many([{"kind": "k"}, {"kind": "k", **DEFAULTS}])
    assert [getattr(many[1], f) for f in fields] == [getattr(many[0], f) for f in fields]
