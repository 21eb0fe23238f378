"""Batched store operations (issue 8): bulk enqueue, a worker's batch of completions and the
transitions of a claim take a constant number of statements per batch. What they store and
return must be what the one-by-one paths store and return: the same rows, and the same
transition rows (seq, states, reason, actor, attempt, at, data)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jobtrail
from jobtrail.core import transition
from jobtrail.store.base import Claim


@pytest.fixture
def kapp(app: jobtrail.App) -> jobtrail.App:
    # long enough to outlast a test on a loaded machine (0.3 s once ran out in CI before
    # complete_many came: it moved nothing); only "short" is meant to expire
    app.task("k", lease_seconds=60, max_attempts=3)(lambda ctx, p: None)
    app.task("q", queue="other", lease_seconds=45)(lambda ctx, p: None)
    app.task("short", lease_seconds=0.05)(lambda ctx, p: None)
    return app


def _claim(app: jobtrail.App, owner: str, kinds: list[str], limit: int, **kw: Any) -> list[Any]:
    with app._driver.transaction() as tx:
        return transition.claim(
            app._driver,
            tx,
            Claim(
                owner=owner,
                queues=kw.get("queues", ["default", "other"]),
                kinds=kinds,
                limit=limit,
                version=kw.get("version"),
            ),
        )


def _log(app: jobtrail.App, task_id: Any) -> list[tuple[Any, ...]]:
    return [
        (x.seq, x.from_state, x.to_state, x.reason, x.actor, x.attempt, x.data)
        for x in app.transitions(str(task_id))
    ]


def test_bulk_enqueue_returns_in_input_order_what_get_reads(kapp: jobtrail.App) -> None:
    at = datetime(2021, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    items: list[dict[str, Any]] = []
    for i in range(60):
        item: dict[str, Any] = {
            "kind": "q" if i % 4 == 0 else "k",
            # key order, big and exponent floats, and text JSON escapes must all read back
            "payload": {"z": i, "a": [1.5, 1e16, -0.25], "s": 'é\u2028"\\', "bb": None},
            "priority": i % 5 - 2,
            "tenant": ["", "t1", "ü"][i % 3],
        }
        if i % 7 == 1:
            item["delay"] = 1000 + i / 3
        elif i % 7 == 2:
            item["run_at"] = at + timedelta(microseconds=i)
        elif i % 7 == 3:
            item["delay"] = 0
        items.append(item)
    tasks = kapp.enqueue_many(items)
    assert [t.payload["z"] for t in tasks] == list(range(60))
    ids = [int(t.id) for t in tasks]
    assert ids == sorted(ids) and len(set(ids)) == 60
    for t, item in zip(tasks, items, strict=True):
        got = kapp.get(t.id)
        assert t.created and not got.created
        assert dataclasses.replace(t, created=False) == got
        # the caller's key order (equal as dicts to what get reads: PostgreSQL's jsonb reads
        # an object's keys back shortest first)
        assert list(t.payload) == list(item["payload"])
        assert (t.kind, t.priority, t.tenant) == (item["kind"], item["priority"], item["tenant"])
        if "run_at" in item:
            assert t.run_at == item["run_at"]
        if "delay" in item:
            assert t.run_at == t.created_at + timedelta(seconds=item["delay"])
        assert t.created_at == t.updated_at
        log = kapp.transitions(t.id)
        assert _log(kapp, t.id) == [(1, None, "queued", "enqueued", "caller", 0, {})]
        assert log[0].at == t.created_at


def test_bulk_enqueue_of_one_kind_stores_every_payload_exactly(kapp: jobtrail.App) -> None:
    # tasks alike but for their payloads travel as a text array on PostgreSQL: quotes,
    # backslashes, braces, commas and JSON escapes must all arrive as they were
    tricky = ['a"b', "c\\d", "{x,y}", "NULL", "", " sp ", "é\u2028\t\n", '\\"', "}{"]
    at = datetime(2031, 7, 8, 9, 10, 11, 5, tzinfo=UTC)
    for extra in ({}, {"delay": 30.25}, {"run_at": at}, {"priority": 3, "tenant": "t"}):
        items = [
            {"kind": "k", "payload": {"s": tricky[i % len(tricky)], "i": i, "l": [tricky]}, **extra}
            for i in range(kapp._driver.insert_batch + 7)
        ]
        items.append({"kind": "k", "payload": None, **extra})
        items.append({"kind": "k", "payload": 'a plain "string"', **extra})
        tasks = kapp.enqueue_many(items)
        assert [t.payload for t in tasks] == [item["payload"] for item in items]
        for t in tasks[:: len(tricky) - 1] + tasks[-2:]:
            assert dataclasses.replace(t, created=False) == kapp.get(t.id)
        if "run_at" in extra:
            assert {t.run_at for t in tasks} == {at}
        if "delay" in extra:
            assert {t.run_at - t.created_at for t in tasks} == {timedelta(seconds=30.25)}


def test_bulk_enqueue_of_mixed_items_stores_awkward_and_large_values_exactly(
    kapp: jobtrail.App,
) -> None:
    # items that differ in more than their payloads travel as JSON rows on PostgreSQL: the
    # awkward texts in payloads, tenants and queues, and payloads of hundreds of kilobytes,
    # must arrive as they were, each with its creating transition
    awkward = ["c\\d", "\\", "\\N", "\t\n\r", 'q"\\"', "é\u2028😀", "{a,b}", "", " "]
    big = "\\x\t\n" * 40_000 + "é😀"  # 240,000 characters
    items: list[dict[str, Any]] = [
        {
            "kind": "k",
            "queue": f"q{i % 3}{awkward[i % len(awkward)]}.",
            "tenant": f"t{awkward[(i + 1) % len(awkward)]}.",
            "priority": i % 4,
            "payload": {awkward[i % len(awkward)]: awkward, "i": i},
        }
        for i in range(kapp._driver.insert_batch + 5)
    ]
    items[3]["payload"] = big
    items[-1]["payload"] = {"big": big, "list": [big[:1000]] * 3}
    tasks = kapp.enqueue_many(items)
    assert [t.payload for t in tasks] == [item["payload"] for item in items]
    assert [(t.queue, t.tenant, t.priority) for t in tasks] == [
        (item["queue"], item["tenant"], item["priority"]) for item in items
    ]
    assert [int(t.id) for t in tasks] == sorted(int(t.id) for t in tasks)
    for t in [*tasks[:10], tasks[-1]]:
        assert dataclasses.replace(t, created=False) == kapp.get(t.id)
        assert _log(kapp, t.id) == [(1, None, "queued", "enqueued", "caller", 0, {})]


def test_single_enqueue_returns_what_get_reads(kapp: jobtrail.App) -> None:
    # the drivers build the returned task from what they inserted plus the generated id and
    # times, without reading the row back: it must be the row get reads
    at = datetime(2022, 2, 3, 4, 5, 6, 654321, tzinfo=UTC)
    variants: list[dict[str, Any]] = [
        {},
        {"priority": -7, "tenant": "ü"},
        {"delay": 12.5},
        {"run_at": at},
        {"queue": "elsewhere", "max_attempts": 9},
        {"idempotency_key": "once"},
    ]
    payload = {"zz": 1, "a": [1.5, 1e16], "bbb": {"y": None, "x": "é\u2028"}, "": 0}
    for extra in variants:
        task = kapp.enqueue("k", payload, **extra)
        got = kapp.get(task.id)
        assert task.created and not got.created
        assert dataclasses.replace(task, created=False) == got, extra
        assert list(task.payload) == list(payload)  # the caller's key order
        assert _log(kapp, task.id) == [(1, None, "queued", "enqueued", "caller", 0, {})]
        assert kapp.transitions(task.id)[0].at == task.created_at == task.updated_at
    again = kapp.enqueue("k", payload, idempotency_key="once")
    assert not again.created
    assert dataclasses.replace(again, created=False) == kapp.get(again.id)


def test_bulk_enqueue_of_values_that_need_the_one_by_one_path(kapp: jobtrail.App) -> None:
    # a tiny fractional delay and a far-off run_at cannot travel exactly in one JSON batch on
    # SQLite: such a batch is stored one by one, with the same result
    far = datetime(2300, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)
    extras: list[dict[str, Any]] = [{"delay": 1e-5}, {"run_at": far}]
    for extra in extras:
        items = [{"kind": "k", "payload": {"n": 1}}, {"kind": "k", "payload": {"n": 2}, **extra}]
        tasks = kapp.enqueue_many(items)
        assert [dataclasses.replace(t, created=False) for t in tasks] == [
            kapp.get(t.id) for t in tasks
        ]
        if "run_at" in extra:
            assert tasks[1].run_at == far
        for t in tasks:
            assert _log(kapp, t.id) == [(1, None, "queued", "enqueued", "caller", 0, {})]


def test_claim_logs_each_claimed_task(kapp: jobtrail.App) -> None:
    kapp.enqueue_many([{"kind": "k", "payload": {"n": i}, "priority": i % 3} for i in range(30)])
    kapp.enqueue_many([{"kind": "q", "payload": {"n": i}} for i in range(5)])
    rows = _claim(kapp, "w1", ["k", "q"], 25, version="v1é")
    assert len(rows) == 25
    for row in rows:
        task = kapp.get(row["id"])
        log = kapp.transitions(row["id"])
        assert task.state == "leased" and task.lease_owner == "w1" and task.attempts == 1
        assert [(x.seq, x.from_state, x.to_state, x.reason, x.actor, x.attempt) for x in log] == [
            (1, None, "queued", "enqueued", "caller", 0),
            (2, "queued", "leased", "claimed", "w1", 1),
        ]
        assert log[1].at == task.updated_at == row["updated_at"]
        assert list(log[1].data) == ["waited", "version"] and log[1].data["version"] == "v1é"
        assert log[1].data["waited"] == round(float(row["waited"]), 6)
    rows = _claim(kapp, "w2", ["k", "q"], 25)
    assert len(rows) == 10
    assert all(list(kapp.transitions(r["id"])[1].data) == ["waited"] for r in rows)


def test_complete_many_moves_exactly_the_tasks_whose_guard_holds(kapp: jobtrail.App) -> None:
    tasks = kapp.enqueue_many([{"kind": "k", "payload": {"n": i}} for i in range(8)])
    kapp.enqueue("short", {"n": "expired"})
    mine = _claim(kapp, "w1", ["k"], 6)
    theirs = _claim(kapp, "w2", ["k"], 2)
    expired = _claim(kapp, "w1", ["short"], 1)
    time.sleep(0.15)  # the short lease has run out
    cancelled = mine[1]
    assert kapp.cancel(str(cancelled["id"]), by="op").outcome == "cancel_requested"
    good = [mine[0], mine[3], mine[4], mine[5]]
    pairs = [(int(r["id"]), r["attempts"]) for r in good]
    pairs += [
        (int(mine[2]["id"]), mine[2]["attempts"] + 1),  # another attempt
        (int(theirs[0]["id"]), theirs[0]["attempts"]),  # another holder
        (int(cancelled["id"]), cancelled["attempts"]),  # not leased any more
        (int(expired[0]["id"]), expired[0]["attempts"]),  # lease expired
        (10**9, 1),  # no such task
    ]
    untouched = [mine[1], mine[2], theirs[0], expired[0]]
    before = {r["id"]: (kapp.get(r["id"]), _log(kapp, r["id"])) for r in untouched}
    driver = kapp._driver
    with driver.transaction() as tx:
        moved = driver.task_complete_many(tx, "w1", "w1", list(reversed(pairs)))
    assert moved == {int(r["id"]) for r in good}
    for row in good:
        task = kapp.get(row["id"])
        log = kapp.transitions(row["id"])
        assert task.state == "succeeded" and task.last_reason == "completed"
        assert task.lease_owner is None and task.lease_expires_at is None
        assert task.attempts == 1 and task.receipt_deadline is None
        assert [
            (x.seq, x.from_state, x.to_state, x.reason, x.actor, x.attempt, x.data) for x in log
        ][2:] == [(3, "leased", "succeeded", "completed", "w1", 1, {})]
        assert log[2].at == task.updated_at == task.finished_at
    for task_id, (task, log) in before.items():
        assert (kapp.get(task_id), _log(kapp, task_id)) == (task, log)
    assert tasks  # the rest stay queued
    with driver.transaction() as tx:
        assert driver.task_complete_many(tx, "w1", "w1", []) == set()


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL runs each as one statement already
def test_sqlite_batches_take_a_constant_number_of_statements(kapp: jobtrail.App) -> None:
    driver = kapp._driver
    conn = driver._connect()  # type: ignore[attr-defined]
    statements: list[str] = []

    def count(fn: Any) -> int:
        statements.clear()
        conn.set_trace_callback(statements.append)
        try:
            fn()
        finally:
            conn.set_trace_callback(None)
        # the write lock's busy-timeout switch comes once per change between reads and
        # writes (store/sqlite/locking.py), and the wake-up's data version once per claim
        # round (the first claim after a wait), not per task
        once = ("PRAGMA busy_timeout", "PRAGMA data_version")
        return len([s for s in statements if not s.startswith(once)])

    def complete(rows: list[Any]) -> None:
        with driver.transaction() as tx:
            driver.task_complete_many(tx, "w", "w", [(r["id"], r["attempts"]) for r in rows])

    sizes = (3, 40)
    enqueued = [count(lambda n=n: kapp.enqueue_many([{"kind": "k"}] * n)) for n in sizes]
    claimed: list[list[Any]] = [[], []]
    claims = [
        count(lambda i=i, n=n: claimed[i].extend(_claim(kapp, "w", ["k"], n, queues=["default"])))
        for i, n in enumerate(sizes)
    ]
    completed = [count(lambda rows=rows: complete(rows)) for rows in claimed]
    assert [len(rows) for rows in claimed] == list(sizes)
    assert enqueued[0] == enqueued[1] and claims[0] == claims[1]
    assert completed[0] == completed[1]
