"""The driver conformance suite (River's ``riverdrivertest``): every public method of the
driver seam (``store.base.Driver`` and its named statements, ``store.statements``) run on both
dialects through the shared ``app`` fixture (SQLite and PostgreSQL, tests/conftest.py), with
the invariant check after each test. ``test_every_public_method_has_a_test`` fails when a
driver method is added without a test here.

Writes run inside a transaction that is rolled back (``rolled_back``) unless the test is about
committing, so a test leaves the store as it found it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from conftest import POOLED_BACKENDS, Store
from psycopg import sql

import jobtrail
from jobtrail.core import transition
from jobtrail.model.machine import State
from jobtrail.store.base import Claim, Driver, Move, Tx, dumps

COVERED: set[str] = set()
OWNER = "driver-test"

F = Callable[..., None]


def covers(*names: str) -> Callable[[F], F]:
    def mark(fn: F) -> F:
        COVERED.update(names)
        return fn

    return mark


class _Rollback(Exception):
    pass


@contextmanager
def rolled_back(driver: Driver) -> Iterator[Tx]:
    try:
        with driver.transaction() as tx:
            yield tx
            raise _Rollback
    except _Rollback:
        pass


@pytest.fixture
def world(app: jobtrail.App) -> dict[str, Any]:
    """An app with kind ``k``, a queued task and a leased one (claimed by ``OWNER``)."""

    @app.task("k")
    def k(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    leased = app.enqueue("k", {"n": 1})
    with app._driver.transaction() as tx:
        rows = transition.claim(app._driver, tx, claim())
    assert [str(r["id"]) for r in rows] == [leased.id]
    queued = app.enqueue("k", {"n": 2})
    return {"app": app, "d": app._driver, "queued": int(queued.id), "leased": int(leased.id)}


def claim(limit: int = 1) -> Claim:
    return Claim(owner=OWNER, queues=["default"], kinds=["k"], limit=limit, version=None)


def ago(d: Driver, tx: Tx, seconds: float = 3600) -> Any:
    return d.encode_time(d.db_now(tx) - timedelta(seconds=seconds))


def test_every_public_method_has_a_test() -> None:
    public = {
        name for name in dir(Driver) if not name.startswith("_") and callable(getattr(Driver, name))
    }
    assert public - COVERED == set()


# -- transactions, lifecycle ---------------------------------------------------------------------
@covers("transaction", "single_statement", "batch_transaction", "db_now", "encode_time")
def test_transactions(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with d.transaction(write=False) as tx:
        now = d.db_now(tx)
    assert isinstance(now, datetime) and now.tzinfo is not None
    with d.transaction(write=False) as tx:  # a big read: no JIT for the rest of it
        assert d.db_now(tx, big_read=True) >= now
        if d.dialect == "postgres":  # behind a transaction pooler too (no session setting)
            assert tx.conn.execute("SHOW jit").fetchone() == ("off",)
    with d.single_statement() as tx:
        assert d.task_get(tx, world["queued"]) is not None
    with d.batch_transaction() as tx:
        assert d.task_get(tx, world["queued"]) is not None
    assert d.encode_time(now) is not None


@covers("run_async", "aclose")
def test_run_async_runs_driver_code_off_the_loop_and_aclose(world: dict[str, Any]) -> None:
    """``run_async`` awaits synchronous code that uses the driver (the async API's path):
    it sees the store, its writes commit, its errors come back as raised."""
    import asyncio

    d: Driver = world["d"]

    def read(task_id: int) -> Any:
        with d.transaction(write=False) as tx:
            return d.task_get(tx, task_id)

    def fail() -> None:
        with d.transaction() as tx:
            d.task_get(tx, world["queued"])
            raise KeyError("inside")

    async def go() -> Any:
        row = await d.run_async(read, world["queued"])
        with pytest.raises(KeyError, match="inside"):
            await d.run_async(fail)
        return row

    row = asyncio.run(go())
    assert row is not None and row["id"] == world["queued"]
    other = jobtrail.App(world["app"].url)
    other.task("k")(lambda ctx, p: None)
    asyncio.run(other._driver.aclose())
    with pytest.raises(RuntimeError, match="closed"):
        other.enqueue("k")


@covers("migrate", "close")
def test_migrate_is_idempotent_and_close(world: dict[str, Any]) -> None:
    app: jobtrail.App = world["app"]
    other = jobtrail.App(app.url)
    assert other._driver.migrate() == []
    other._driver.close()


@covers("wait_for_work", "wake", "notify_queued", "is_outage", "check_wakeups")
def test_wake_ups(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    # SQLite has no LISTEN to check, nor a transaction pooler without listen_url (it polls);
    # PostgreSQL's listener hears a NOTIFY of its own
    polls = d.dialect == "sqlite" or d.polls_only
    assert d.check_wakeups() is (None if polls else True)
    d.wake()
    assert isinstance(d.wait_for_work(0.01), bool)
    with d.transaction() as tx:
        d.notify_queued(tx, "default")
    assert d.is_outage(ValueError("no")) is False


@covers("idle_register", "idle_unregister", "take_handed")
def test_idle_registry_and_handed_tasks(world: dict[str, Any]) -> None:
    """A registered idle owner is handed the next single enqueue it could claim (PostgreSQL
    with a LISTEN connection); elsewhere the registry does nothing."""
    app: jobtrail.App = world["app"]
    d: Driver = world["d"]
    assert d.take_handed(OWNER) == []
    with d.transaction() as tx:  # the world's queued task would stop a hand-off: run it off
        transition.claim(d, tx, claim())
    if not d.hands_off:
        d.idle_register(OWNER, ["default"], ["k"], None)
        assert d.idle_unregister(OWNER) is None
        assert app.get(app.enqueue("k", {"n": 3}).id).state == "queued"
        return
    assert d.check_wakeups() is True  # the listener is up and holds the driver's lock
    d.idle_register(OWNER, ["default"], ["k"], "v1")
    task = app.enqueue("k", {"n": 3})
    row = app.get(task.id)
    assert (row.state, row.attempts) == ("leased", 1)
    deadline = time.monotonic() + 5
    handed: list[dict[str, Any]] = []
    while not handed and time.monotonic() < deadline:
        handed = d.take_handed(OWNER)
        time.sleep(0.005)
    assert [(str(r["id"]), r["lease_owner"], r["attempts"]) for r in handed] == [
        (task.id, OWNER, 1)
    ]
    assert handed[0]["payload"] == {"n": 3}
    assert isinstance(handed[0]["lease_expires_at"], datetime)
    assert d.take_handed(OWNER) == []  # taken once
    assert d.take_handed("someone-else") == []
    assert d.idle_unregister(OWNER) == int(task.id)
    assert d.idle_unregister(OWNER) is None  # gone
    # not registered: the next one is queued as before
    assert app.get(app.enqueue("k", {"n": 4}).id).state == "queued"


# -- tasks: the state writers (called through transition.py elsewhere) ---------------------------
@covers("task_insert", "task_insert_many", "task_insert_alone", "task_insert_batches")
def test_inserts(world: dict[str, Any]) -> None:
    app: jobtrail.App = world["app"]
    d: Driver = world["d"]
    new = app._new_task({"kind": "k", "payload": {"x": 1}})
    with rolled_back(d) as tx:
        row, created = d.task_insert(tx, new)
        assert created and row["state"] == State.QUEUED
        assert [c for _, c in d.task_insert_many(tx, [new, new])] == [True, True]
        ids = d.task_insert_batches(tx, [[new, new]], lambda n, i, c, r, p: i)
        assert len(ids) == 2
    row, created = d.task_insert_alone(new)
    assert created
    with d.transaction() as tx:  # committed: cancel it so the store stays tidy
        moved = d.task_move(
            tx,
            Move(
                task_id=row["id"],
                from_state=State.QUEUED,
                to_state=State.CANCELLED,
                reason="cancelled_before_start",
                actor="test",
            ),
        )
    assert moved is not None


@covers("task_claim", "task_claim_unlimited", "queues_limited")
def test_claims(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        assert d.queues_limited(tx, ["default"]) == []
        rows = d.task_claim(tx, claim())
        assert [r["id"] for r in rows] == [world["queued"]]
    with rolled_back(d) as tx:
        if d.claims_in_one_statement:
            assert [r["id"] for r in d.task_claim_unlimited(tx, claim())] == [world["queued"]]
        else:
            with pytest.raises(NotImplementedError):
                d.task_claim_unlimited(tx, claim())


@covers("task_next_due")
def test_next_due(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    world["app"].enqueue("k", {"n": 3}, delay=10)
    with rolled_back(d) as tx:
        due_now = d.task_next_due(tx, ["default"], ["k"], 0.0)
        assert due_now is not None and due_now <= 0  # the queued task is due
        assert d.task_next_due(tx, ["default"], ["other"], 60.0) is None
        assert d.task_next_due(tx, ["elsewhere"], ["k"], 60.0) is None
        assert len(d.task_claim(tx, claim())) == 1  # the due one: the delayed one is left
        assert d.task_next_due(tx, ["default"], ["k"], 5.0) is None
        wait = d.task_next_due(tx, ["default"], ["k"], 20.0)
        assert wait is not None and 5 < wait <= 10


@covers("task_complete_many", "task_complete_and_claim")
def test_batch_completion(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    pairs = [(world["leased"], 1)]
    with rolled_back(d) as tx:
        assert d.task_complete_many(tx, OWNER, OWNER, pairs) == {world["leased"]}
    with rolled_back(d) as tx:
        assert d.task_complete_many(tx, "someone-else", "x", pairs) == set()
    with rolled_back(d) as tx:
        if d.claims_in_one_statement:
            moved, rows = d.task_complete_and_claim(tx, pairs, claim(), "default", 1)
            assert moved == {world["leased"]}
            assert [r["id"] for r in rows] == [world["queued"]]
        else:
            with pytest.raises(NotImplementedError):
                d.task_complete_and_claim(tx, pairs, claim(), "default", 1)


def test_batch_completion_stores_the_return_values(world: dict[str, Any]) -> None:
    """Each completed task's result (JSON text) is written by the batch statement; a
    task without one keeps none; a JSON null is none."""
    d: Driver = world["d"]
    leased = world["leased"]
    for results, expected in (
        ({leased: '{"a":[1,"é"]}'}, {"a": [1, "é"]}),
        ({leased: "null"}, None),
        ({}, None),
        (None, None),
    ):
        with rolled_back(d) as tx:
            assert d.task_complete_many(tx, OWNER, OWNER, [(leased, 1)], results) == {leased}
            row = d.task_get(tx, leased)
            assert row is not None and row["result"] == expected
        if d.claims_in_one_statement:
            with rolled_back(d) as tx:
                moved, _ = d.task_complete_and_claim(
                    tx, [(leased, 1)], claim(), "default", 1, results
                )
                assert moved == {leased}
                row = d.task_get(tx, leased)
                assert row is not None and row["result"] == expected


@covers("watch_finished")
def test_watch_finished(world: dict[str, Any]) -> None:
    """A terminal move committed after the watch began wakes its wait; without one the wait
    runs to its timeout."""
    d: Driver = world["d"]
    with d.watch_finished() as wait:
        assert wait(0.05) is False
        with d.transaction() as tx:
            moved = d.task_move(
                tx,
                Move(
                    task_id=world["queued"],
                    from_state=State.QUEUED,
                    to_state=State.CANCELLED,
                    reason="cancelled_before_start",
                    actor="test",
                ),
            )
        assert moved is not None
        assert wait(10) is True


@covers("task_move", "transition_insert", "transition_list")
def test_move_and_transitions(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    move = Move(
        task_id=world["queued"],
        from_state=State.QUEUED,
        to_state=State.CANCELLED,
        reason="cancelled_before_start",
        actor="test",
    )
    with rolled_back(d) as tx:
        row = d.task_move(tx, move)
        assert row is not None and row["state"] == State.CANCELLED
        assert d.task_move(tx, move) is None  # the guard no longer matches
        reasons = [t["reason"] for t in d.transition_list(tx, world["queued"])]
        assert reasons == ["enqueued", "cancelled_before_start"]
        seq = len(reasons) + 1
        d.transition_insert(
            tx,
            world["queued"],
            seq,
            State.CANCELLED,
            State.CANCELLED,
            "annotated",
            "test",
            attempt=0,
            at=d.encode_time(d.db_now(tx)),
            note="a note",
        )
        assert len(d.transition_list(tx, world["queued"])) == seq


def test_a_move_keeps_result_traceback_and_error_class(world: dict[str, Any]) -> None:
    """Results and tracebacks through the single-task move: a success stores its result; a failure's
    transition its traceback and error class (and a plain transition has neither)."""
    d: Driver = world["d"]
    leased = world["leased"]
    base = {"task_id": leased, "from_state": State.LEASED, "actor": OWNER, "owner": OWNER}
    with rolled_back(d) as tx:
        row = d.task_move(
            tx,
            Move(
                **base,
                to_state=State.SUCCEEDED,
                reason="completed",
                attempt=1,
                set_result=True,
                result='{"ok":1}',
            ),
        )
        assert row is not None
        assert d.task_get(tx, leased)["result"] == {"ok": 1}  # type: ignore[index]
        last = d.transition_list(tx, leased)[-1]
        assert (last["traceback"], last["error_class"]) == (None, None)
    with rolled_back(d) as tx:
        text = 'Traceback (most recent call last):\n  File "x.py", line 3, in f\nKeyError: 1\n'
        row = d.task_move(
            tx,
            Move(
                **base,
                to_state=State.DEAD,
                reason="permanent_error",
                attempt=1,
                set_error=True,
                error_category="invalid_input",
                error="KeyError: 1",
                traceback=text,
                error_class="builtins.KeyError",
            ),
        )
        assert row is not None
        last = d.transition_list(tx, leased)[-1]
        assert (last["traceback"], last["error_class"]) == (text, "builtins.KeyError")
        assert d.task_get(tx, leased)["result"] is None  # type: ignore[index]


@covers("task_release_next", "task_set_after", "children_list")
def test_workflow_statements(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        assert d.task_set_after(tx, id=world["queued"], after_id=world["leased"]) == 1
        released = d.task_release_next(tx, world["leased"])
        assert [r["id"] for r in released] == [world["queued"]]
        assert d.children_list(tx, id=world["leased"]) == []


# -- tasks: reads and lease --------------------------------------------------------------------
@covers("task_get", "task_list", "task_holder", "task_lock", "lease_extend", "task_expired")
def test_task_reads(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        assert d.task_get(tx, world["queued"])["state"] == State.QUEUED  # type: ignore[index]
        assert d.task_get(tx, 10**12) is None
        assert {r["id"] for r in d.task_list(tx)} == {world["queued"], world["leased"]}
        assert [r["id"] for r in d.task_list(tx, state="leased")] == [world["leased"]]
        holder = d.task_holder(tx, id=world["leased"])
        assert holder is not None and holder["lease_owner"] == OWNER
        assert d.task_lock(tx, id=world["queued"]) is not None
        assert d.lease_extend(tx, world["leased"], OWNER, 1, 60) is not None
        assert d.lease_extend(tx, world["leased"], "someone-else", 1, 60) is None
        assert d.task_expired(tx, 10) == []


@covers("task_held_by")
def test_task_held_by(world: dict[str, Any]) -> None:
    """The tasks leased to an owner, as a claim returns them (a worker's look after a round
    trip whose answer was lost: it starts them from these rows)."""
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        rows = d.task_held_by(tx, owner=OWNER, limit=10)
        assert [r["id"] for r in rows] == [world["leased"]]
        assert rows[0]["attempts"] == 1 and rows[0]["kind"] == "k"
        assert rows[0]["lease_seconds"] > 0 and rows[0]["payload"] is not None
        assert d.task_held_by(tx, owner="someone-else", limit=10) == []
        assert d.task_held_by(tx, owner=OWNER, limit=0) == []
        # an expired lease is the sweeper's to decide, not the worker's to start
        assert d.lease_extend(tx, world["leased"], OWNER, 1, 0) is not None
        assert d.task_held_by(tx, owner=OWNER, limit=10) == []


@covers("task_by_receipt", "task_receipt_expired", "task_dead_select", "dead_groups")
def test_receipts_and_dead(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        assert d.task_by_receipt(tx, receipt_id="none", kind=None, tenant=None) == []
        assert d.task_receipt_expired(tx, limit=10) == []
        none = d.task_dead_select(tx, reason=None, kind=None, since=None, until=None, limit=10)
        assert list(none) == []
        assert d.dead_groups(tx) == []


@covers("dead_tasks_evidence", "effect_list_for_tasks")
def test_dead_evidence_and_effects_of_tasks(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    held = {"id": world["leased"], "owner": OWNER, "attempt": 1}
    with rolled_back(d) as tx:
        assert d.dead_tasks_evidence(tx, reason=None, kind=None, per_group=5) == []
        assert d.effect_intent(tx, {**held, "name": "e", "effect_key": "k1"}) is not None
        ids = json.dumps([world["leased"], world["queued"]])
        rows = d.effect_list_for_tasks(tx, ids=ids)
        assert [(int(r["task_id"]), r["name"], r["status"]) for r in rows] == [
            (world["leased"], "e", "intent")
        ]
        assert d.effect_list_for_tasks(tx, ids=json.dumps([world["queued"]])) == []


def beat(d: Driver, owner: str, stale_after: float = 60.0, kinds: str = '["k"]') -> int:
    with d.transaction() as tx:
        return d.worker_beat(
            tx,
            id=owner,
            host="h",
            pid=7,
            version="v1",
            queues='["default"]',
            kinds=kinds,
            concurrency=3,
            stale_after=stale_after,
        )


@covers("worker_beat", "worker_forget", "worker_list", "worker_held_tasks", "worker_due_groups")
def test_worker_rows(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    assert beat(d, OWNER) == 1
    assert beat(d, OWNER, kinds='["changed"]') == 1  # a beat moves last_seen_at only
    with d.transaction(write=False) as tx:
        [row] = d.worker_list(tx)
        held = d.worker_held_tasks(tx)
        due = d.worker_due_groups(tx)
    assert (row["id"], row["host"], row["pid"], row["version"]) == (OWNER, "h", 7, "v1")
    assert (row["queues"], row["kinds"], row["concurrency"]) == (["default"], ["k"], 3)
    assert row["started_at"] <= row["last_seen_at"] <= row["db_now"]
    assert row["started_at"].tzinfo is not None and row["stale_after"] == 60.0
    assert [(int(h["id"]), h["lease_owner"], h["tenant"]) for h in held] == [
        (world["leased"], OWNER, "")
    ]
    assert [(g["queue"], g["kind"], g["n"]) for g in due] == [("default", "k", 1)]
    # silent past its stale_after: not listed, and deleted by the next beat of another worker
    beat(d, "quiet:1:aa", stale_after=0.05)
    time.sleep(0.2)
    with d.transaction(write=False) as tx:
        assert [r["id"] for r in d.worker_list(tx)] == [OWNER]
    beat(d, OWNER)
    # Had its row survived, this beat would only move last_seen_at (stale_after stays 0.05,
    # and it stays unlisted); inserted anew, it is listed with the new stale_after.
    beat(d, "quiet:1:aa", stale_after=60.0)
    with d.transaction(write=False) as tx:
        listed = {r["id"]: r["stale_after"] for r in d.worker_list(tx)}
    assert listed == {OWNER: 60.0, "quiet:1:aa": 60.0}
    with d.transaction() as tx:
        assert d.worker_forget(tx, id="quiet:1:aa") == 1
        assert d.worker_forget(tx, id=OWNER) == 1
        assert d.worker_forget(tx, id=OWNER) == 0
        assert d.worker_list(tx) == []


@covers("replay_run_insert", "replay_run_tasks_insert", "replay_run_task_mark")
@covers("replay_run_progress", "replay_run_observe", "replay_run_finish", "replay_run_list")
@covers("replay_run_tasks_next", "replay_run_get", "replay_run_beat")
def test_replay_runs(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        row = d.replay_run_insert(
            tx,
            actor="ops",
            note="n",
            data=dumps({"kind": "k"}),
            batch_size=1,
            stop_after_failures=1,
            total=2,
            driver="me",
            detached=False,
        )
        assert row is not None
        run = int(row["id"])
        ids = json.dumps([world["queued"], world["leased"]])
        assert d.replay_run_tasks_insert(tx, run_id=run, ids=ids) == 2
        nexts = d.replay_run_tasks_next(tx, run_id=run, after=1, limit=5)
        assert [(r["position"], int(r["task_id"])) for r in nexts] == [(2, world["leased"])]
        assert d.replay_run_task_mark(tx, run_id=run, position=1, seq=1) == 1
        # only the run's driver moves it on
        assert (
            d.replay_run_progress(tx, id=run, driver="other", replayed=1, skipped=0, batches=1) == 0
        )
        assert d.replay_run_beat(tx, id=run, driver="other") == 0
        assert d.replay_run_progress(tx, id=run, driver="me", replayed=1, skipped=0, batches=1)
        assert d.replay_run_beat(tx, id=run, driver="me") == 1
        got = d.replay_run_get(tx, id=run)
        assert got is not None and got["batch_at"] is not None and got["heartbeat_at"] is not None
        assert 0 <= got["batch_age"] < 60 and 0 <= got["progress_age"] < 60
        assert got["driver"] == "me" and got["detached"] is False
        seen = d.replay_run_observe(tx, id=run)
        assert seen is not None and (int(seen["died"]), int(seen["open"])) == (0, 1)
        assert (
            d.replay_run_finish(
                tx, id=run, driver="other", state="completed", stop_code=None, died=0
            )
            == 0
        )
        assert d.replay_run_finish(
            tx, id=run, driver="me", state="stopped", stop_code="died_again", died=0
        )
        # a finished run is never finished again
        assert (
            d.replay_run_finish(tx, id=run, driver="me", state="completed", stop_code=None, died=0)
            == 0
        )
        [listed] = d.replay_run_list(tx, id=run, limit=5)
        assert (listed["state"], listed["replayed"], listed["batches"]) == ("stopped", 1, 1)
        assert listed["data"] == {"kind": "k"} and listed["died_now"] == 0
        assert listed["finished_at"] is not None and listed["finished_at"].tzinfo is not None
        assert listed["stopped_by"] == "me"


@covers("replay_run_due", "replay_run_take", "replay_run_release", "replay_run_interrupt")
def test_replay_runs_without_a_live_driver(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        runs = {}
        for detached in (False, True):
            row = d.replay_run_insert(
                tx,
                actor="ops",
                note="n",
                data=dumps({}),
                batch_size=None,
                stop_after_failures=None,
                total=0,
                driver="gone",
                detached=detached,
            )
            assert row is not None
            runs[detached] = int(row["id"])
        # both beat just now: only a detached run nobody holds is due, and neither is held free
        assert d.replay_run_due(tx, stale=60, limit=5) == []
        assert d.replay_run_take(tx, id=runs[True], driver="s1", stale=60) == 0
        assert d.replay_run_release(tx, id=runs[True], driver="s1") == 0
        assert d.replay_run_release(tx, id=runs[True], driver="gone") == 1
        assert [int(r["id"]) for r in d.replay_run_due(tx, stale=60, limit=5)] == [runs[True]]
        assert d.replay_run_take(tx, id=runs[True], driver="s1", stale=60) == 1
        assert d.replay_run_take(tx, id=runs[True], driver="s2", stale=60) == 0  # held
        assert d.replay_run_take(tx, id=runs[False], driver="s2", stale=60) == 0  # attached
        # a beat that is not stale yet keeps an attached run; a stale one stops it
        assert d.replay_run_interrupt(tx, id=runs[False], by="s2", died=0, stale=60) == 0
        assert d.replay_run_interrupt(tx, id=runs[True], by="s2", died=0, stale=-1) == 0
        due = d.replay_run_due(tx, stale=-1, limit=5)
        assert sorted((int(r["id"]), bool(r["detached"])) for r in due) == sorted(
            [(runs[False], False), (runs[True], True)]
        )
        assert d.replay_run_take(tx, id=runs[True], driver="s2", stale=-1) == 1  # taken over
        assert d.replay_run_interrupt(tx, id=runs[False], by="s2", died=0, stale=-1) == 1
        [stopped] = d.replay_run_list(tx, id=runs[False], limit=1)
        assert (stopped["state"], stopped["stop_code"]) == ("stopped", "interrupted")
        assert (stopped["driver"], stopped["stopped_by"]) == ("gone", "s2")


@covers("effect_intent", "step_confirm", "step_list", "effect_confirmed_count", "effect_forget")
@covers("effect_note_error", "effect_refuse")
def test_steps_and_effects(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    held = {"id": world["leased"], "owner": OWNER, "attempt": 1}
    with rolled_back(d) as tx:
        row = d.effect_intent(tx, {**held, "name": "e", "effect_key": "k1"})
        assert row is not None
        other = {**held, "owner": "x", "name": "f", "effect_key": "k2"}
        assert d.effect_intent(tx, other) is None  # not the holder: nothing written
        step = {**held, "name": "s", "effect_key": None, "is_effect": False, "result": dumps(1)}
        assert d.step_confirm(tx, step) is not None
        assert [s["name"] for s in d.step_list(tx, id=world["leased"])] == ["e", "s"]
        count = d.effect_confirmed_count(tx, id=world["leased"])
        assert count is not None and int(count["n"]) == 0
        assert d.effect_note_error(tx, id=world["leased"], name="e", error="boom") == 1
        # a refusal keeps the row as 'refused'; the next intent takes it back
        assert d.effect_refuse(tx, id=world["leased"], name="e", error="HTTP 503") == 1
        assert d.effect_refuse(tx, id=world["leased"], name="e", error="again") == 0
        [e] = [s for s in d.step_list(tx, id=world["leased"]) if s["name"] == "e"]
        assert (e["status"], e["error"]) == ("refused", "HTTP 503")
        assert d.effect_intent(tx, {**held, "name": "e", "effect_key": "k1"}) is not None
        [e] = [s for s in d.step_list(tx, id=world["leased"]) if s["name"] == "e"]
        assert (e["status"], e["error"]) == ("intent", None)
        assert d.effect_forget(tx, id=world["leased"], name="e") == 1
        assert [s["name"] for s in d.step_list(tx, id=world["leased"])] == ["s"]


@covers("durable_record_put", "durable_wait_set", "durable_wait_get", "durable_children")
@covers("durable_event_lock", "durable_event_put", "durable_event_get", "durable_event_waiters")
@covers("durable_wait_expired", "durable_record_time_out")
def test_durable_handlers(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    leased = world["leased"]
    held = {"id": leased, "owner": OWNER, "attempt": 1}
    record = {"name": "event/k", "record": "event", "status": "intent", "call_order": 1}
    with rolled_back(d) as tx:
        now = d.db_now(tx)
        assert d.durable_record_put(tx, {**held, **record, "result": dumps({})}) is not None
        stranger = {**held, "owner": "x", **record, "name": "n", "result": None}
        assert d.durable_record_put(tx, stranger) is None  # not the holder: nothing written
        [r] = [s for s in d.step_list(tx, id=leased) if s["name"] == "event/k"]
        assert (r["record"], r["status"], r["call_order"]) == ("event", "intent", 1)
        # the task waits for the event (its move is the worker's, not tested here)
        until = now - timedelta(seconds=1)
        assert d.durable_wait_set(
            tx, id=leased, kind="event", name="event/k", key="k", until=until, ids=None
        )
        wait = d.durable_wait_get(tx, id=leased)
        assert wait is not None and (wait["wait_kind"], wait["wait_key"]) == ("event", "k")
        assert d.durable_event_waiters(tx, tenant="", key="k") == []  # still leased
        d.durable_event_lock(tx, tenant="", key="k")
        assert d.durable_event_put(tx, tenant="", key="k", payload=dumps({"a": 1})) is True
        assert d.durable_event_put(tx, tenant="", key="k", payload=dumps(2)) is False
        event = d.durable_event_get(tx, tenant="", key="k")
        assert event is not None and event["payload"] == {"a": 1}
        assert d.durable_event_get(tx, tenant="other", key="k") is None
        assert d.durable_wait_expired(tx, limit=10) == []  # only waiting tasks time out
        assert d.durable_record_time_out(tx, id=leased, name="event/k") == 1
        [r] = [s for s in d.step_list(tx, id=leased) if s["name"] == "event/k"]
        assert (r["status"], r["result"]) == ("confirmed", {"timed_out": True})
        assert d.durable_children(tx, id=leased) == []


@covers("durable_look", "durable_records")
def test_durable_look_reads_the_holder_the_clock_and_the_records(world: dict[str, Any]) -> None:
    """What ``ctx`` reads at a cancel check: ``task_holder``'s row, the clock and
    ``step_list``'s rows, as those statements give them; no holder for a task that is gone.
    ``durable_records``: the rows of several tasks at once, each task's as ``step_list``'s."""
    d: Driver = world["d"]
    leased = world["leased"]
    held = {"id": leased, "owner": OWNER, "attempt": 1}
    bare = d.durable_look(id=leased, clock=True, steps=True)
    assert bare[2] == []  # no records yet
    with d.transaction() as tx:
        for order, name in enumerate(("b", "a"), start=1):
            record = {"name": name, "record": "sleep", "status": "confirmed", "call_order": order}
            assert d.durable_record_put(tx, {**held, **record, "result": dumps({"n": order})})
    holder, now, steps = d.durable_look(id=leased, clock=True, steps=True)
    with d.transaction(write=False) as tx:
        assert holder == d.task_holder(tx, id=leased)
        assert steps == d.step_list(tx, id=leased) and len(steps) == 2
        assert isinstance(now, datetime) and bare[1] is not None and bare[1] <= now <= d.db_now(tx)
    assert holder is not None and (holder["state"], holder["lease_valid"]) == ("leased", True)
    assert d.durable_look(id=leased, clock=False, steps=False)[1:] == (None, None)
    assert d.durable_look(id=-1, clock=False, steps=True) == (None, None, [])
    assert d.durable_records(ids=[world["queued"], leased, -1]) == steps
    assert d.durable_records(ids=[world["queued"]]) == []


@covers("step_list_recorded", "step_supersede", "step_forget", "step_superseded_list")
@covers("prune_steps_superseded")
def test_steps_forgotten_by_a_replay(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    leased = world["leased"]
    held = {"id": leased, "owner": OWNER, "attempt": 1}
    with rolled_back(d) as tx:
        for order, name in enumerate(("a", "b"), start=1):
            step = {**held, "name": name, "effect_key": None, "is_effect": False}
            assert d.step_confirm(tx, {**step, "result": dumps(order)}) is not None
        assert [s["name"] for s in d.step_list_recorded(tx, id=leased)] == ["a", "b"]
        assert d.step_superseded_list(tx, id=leased) == []
        assert d.step_supersede(tx, id=leased, name="b", replay_seq=1, position=1) == 1
        assert d.step_forget(tx, id=leased, name="b") == 1
        assert d.step_forget(tx, id=leased, name="b") == 0  # forgotten once
        assert [s["name"] for s in d.step_list_recorded(tx, id=leased)] == ["a"]
        [gone] = d.step_superseded_list(tx, id=leased)
        assert gone["name"] == "b"
        assert d.prune_steps_superseded(tx, ids=d._list([leased])) == 1
        assert d.step_superseded_list(tx, id=leased) == []


@covers("stats_suspended")
def test_suspended_counts(world: dict[str, Any]) -> None:
    app: jobtrail.App = world["app"]
    d: Driver = world["d"]

    @app.task("nap")
    def nap(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.sleep("nap", 3600)

    with rolled_back(d) as tx:
        assert d.stats_suspended(tx) == []
    napping = app.enqueue("nap", {})
    app.run_worker(burst=True)
    assert app.get(napping.id).last_reason == "sleeping"
    with rolled_back(d) as tx:
        rows = d.stats_suspended(tx)
    assert [(r["queue"], r["kind"], r["wait_kind"], int(r["n"])) for r in rows] == [
        ("default", "nap", "sleep", 1)
    ]


@covers("task_expired_queued", "task_debounce_count", "children_results")
def test_controls_statements(world: dict[str, Any]) -> None:
    app: jobtrail.App = world["app"]
    d: Driver = world["d"]
    first = app.enqueue("k", {"n": 3}, debounce_key="d", debounce=60)
    again = app.enqueue("k", {"n": 4}, debounce_key="d", debounce=60)
    assert again.id == first.id and again.debounced
    expiring = app.enqueue("k", {"n": 5}, expires_in=0.05)
    parent = app.enqueue_workflow("flow", [("k", {"n": 6}), ("k", {"n": 7})], sequential=True)
    deadline = time.monotonic() + 10
    while True:  # the expiry is the store's clock's: wait until it has passed there
        with rolled_back(d) as tx:
            expired = d.task_expired_queued(tx, 10)
        if expired or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    with rolled_back(d) as tx:
        assert expired == [int(expiring.id)]
        assert d.task_debounce_count(tx, int(first.id)) == 1
        assert d.task_debounce_count(tx, world["queued"]) == 0
        assert d.children_results(tx, int(parent.id)) == [None, None]


@covers("durable_record_event", "prune_events")
def test_event_payload_kept_and_old_events_pruned(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    leased = world["leased"]
    held = {"id": leased, "owner": OWNER, "attempt": 1}
    record = {"name": "event/k", "record": "event", "status": "intent", "call_order": 1}
    with rolled_back(d) as tx:
        assert d.durable_record_put(tx, {**held, **record, "result": None}) is not None
        assert d.durable_event_put(tx, tenant="", key="k", payload=dumps({"a": 1})) is True
        assert d.durable_record_event(tx, id=leased, name="event/k", tenant="", key="k") == 1
        assert d.durable_record_event(tx, id=leased, name="event/k", tenant="", key="k") == 0
        [r] = [s for s in d.step_list(tx, id=leased) if s["name"] == "event/k"]
        assert (r["status"], r["result"]) == ("confirmed", {"payload": {"a": 1}})
        assert d.prune_events(tx, older_than=3600, limit=10) == 0  # sent just now: kept
        assert d.prune_events(tx, older_than=-3600, limit=10) == 1  # "older" than the future
        assert d.durable_event_get(tx, tenant="", key="k") is None


# -- the outbox ----------------------------------------------------------------------------------
@covers("outbox_insert", "outbox_list", "outbox_claim", "outbox_delivered", "outbox_failed")
def test_outbox(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        d.outbox_insert(tx, task_id=world["leased"], topic="t", payload=dumps({"a": 1}))
        listed = d.outbox_list(tx, id=world["leased"])
        assert [m["topic"] for m in listed] == ["t"]
        claimed = d.outbox_claim(
            tx, limit=10, lock_seconds=30.0, any_topic=False, topics=d._list(["t"])
        )
        assert [m["id"] for m in claimed] == [listed[0]["id"]]
        d.outbox_failed(tx, id=listed[0]["id"], error="later", delay=1.0)
        d.outbox_delivered(tx, id=listed[0]["id"])
        assert d.outbox_list(tx, id=world["leased"])[0]["delivered_at"] is not None


# -- rates ---------------------------------------------------------------------------------------
@covers("queue_rate_set", "queue_claims_between", "queue_due_count", "tenant_rate_list")
def test_rates(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        d.queue_upsert(
            tx,
            name="default",
            paused=False,
            paused_by=None,
            paused_note=None,
            limit_total=None,
            limit_per_tenant=None,
        )
        row = d.queue_rate_set(
            tx, name="default", per_second=5.0, burst=2, per_tenant=1.0, ramp=10.0, until=10.0
        )
        assert row is not None
        assert (row["rate_per_second"], row["rate_burst"], row["rate_per_tenant"]) == (5, 2, 1)
        assert row["ramp_started_at"] is not None and row["rate_until"] > row["ramp_started_at"]
        assert row["tokens"] is None  # a new rate starts with a full bucket
        claimed = d.queue_claims_between(
            tx, queue="default", since=ago(d, tx), until=ago(d, tx, -60)
        )
        assert claimed is not None and int(claimed["n"]) == 1  # the world's leased task
        due = d.queue_due_count(tx, queue="default")
        assert due is not None and int(due["n"]) == 1
        assert d.tenant_rate_list(tx, queue="default", since=ago(d, tx)) == []


# -- queues --------------------------------------------------------------------------------------
@covers("queue_get", "queue_upsert", "queue_list", "queue_history_insert", "queue_history_list")
@covers("queue_held_count", "queue_tenant_held")
def test_queues(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        assert d.queue_get(tx, name="default") is None
        row = d.queue_upsert(
            tx,
            name="default",
            paused=True,
            paused_by="ops",
            paused_note="why",
            limit_total=None,
            limit_per_tenant=None,
        )
        assert row is not None and row["paused"]
        assert [q["name"] for q in d.queue_list(tx)] == ["default"]
        d.queue_history_insert(
            tx, queue="default", action="pause", actor="ops", note="why", data=dumps({})
        )
        assert [h["action"] for h in d.queue_history_list(tx, queue="default", limit=5)] == [
            "pause"
        ]
        held = d.queue_held_count(tx, queue="default")
        assert held is not None and int(held["n"]) == 1
        tenant = d.queue_tenant_held(tx, queue="default", tenant="")
        assert tenant is not None and int(tenant["n"]) == 1


# -- cron ----------------------------------------------------------------------------------------
@covers("cron_schedule_upsert", "cron_schedules", "cron_schedule_get", "cron_window_insert")
@covers("cron_window_set_task", "cron_window_list")
def test_cron(world: dict[str, Any]) -> None:
    app: jobtrail.App = world["app"]
    d: Driver = world["d"]

    @app.periodic("*/5 * * * *", kind="tick")
    def tick(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    with rolled_back(d) as tx:
        d.cron_schedule_upsert(tx, app._periodic["tick"].to_row())
        assert [s["kind"] for s in d.cron_schedules(tx)] == ["tick"]
        assert d.cron_schedule_get(tx, kind="tick") is not None
        window = d.encode_time(datetime(2026, 1, 1, 0, 5, tzinfo=d.db_now(tx).tzinfo))
        row = d.cron_window_insert(
            tx, kind="tick", window_at=window, state="enqueued", reason=None, earlier_skipped=0
        )
        assert row is not None
        d.cron_window_set_task(tx, kind="tick", window_at=window, task_id=world["queued"])
        listed = d.cron_window_list(tx, kind="tick", state=None, limit=10)
        assert [w["task_id"] for w in listed] == [world["queued"]]


# -- webhook deliveries --------------------------------------------------------------------------
@covers("webhook_delivery_insert", "webhook_delivery_get", "webhook_delivery_set_task")
def test_webhook_deliveries(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    key = {"source": "gh", "delivery_id": "d1"}
    with rolled_back(d) as tx:
        fresh = {**key, "event_type": "push", "bad_body": None}
        assert d.webhook_delivery_insert(tx, fresh) is not None
        assert d.webhook_delivery_insert(tx, fresh) is None  # a repeat
        d.webhook_delivery_set_task(tx, {**key, "task_id": world["queued"]})
        row = d.webhook_delivery_get(tx, key)
        assert row is not None and row["task_id"] == world["queued"]


# -- stats and views -----------------------------------------------------------------------------
@covers("stats_open", "stats_dead", "stats_finished", "stats_reasons", "stats_waits")
@covers("stats_runs")
def test_stats(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        since = ago(d, tx)
        assert {r["state"] for r in d.stats_open(tx)} == {"queued", "leased"}
        assert d.stats_dead(tx) == []
        assert d.stats_finished(tx, since=since) == []
        assert "claimed" in {r["reason"] for r in d.stats_reasons(tx, since=since)}
        assert isinstance(d.stats_waits(tx, since=since), list)
        assert d.stats_runs(tx, since=since) == []


@covers("stats_open_bounded", "stats_window_start")
def test_bounded_stats(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    app: jobtrail.App = world["app"]
    app.enqueue("k", {"n": 3})  # two queued of one (queue, kind), one leased
    with rolled_back(d) as tx:
        rows = {(r["state"], int(r["n"])) for r in d.stats_open_bounded(tx, upto=10)}
        assert rows == {("queued", 2), ("leased", 1)}
        assert {(r["state"], int(r["n"])) for r in d.stats_open_bounded(tx, upto=1)} == {
            ("queued", 1),
            ("leased", 1),
        }
        exact = {r["state"]: r["oldest_due"] for r in d.stats_open(tx)}
        bounded = {r["state"]: r["oldest_due"] for r in d.stats_open_bounded(tx, upto=1)}
        assert bounded == exact and bounded["queued"] is not None
        # four transitions: enqueued, claimed (the leased task), enqueued, enqueued
        since = ago(d, tx)
        assert d.stats_window_start(tx, since=since, skip=4) is None
        oldest = d.stats_window_start(tx, since=since, skip=3)
        newest = d.stats_window_start(tx, since=since, skip=0)
        assert oldest is not None and newest is not None and oldest["at"] <= newest["at"]


@covers("view_state_counts_upto", "view_dead_count_upto")
def test_counts_up_to_a_bound(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    world["app"].enqueue("k", {"n": 3})
    with rolled_back(d) as tx:
        counts = {r["state"]: int(r["n"]) for r in d.view_state_counts_upto(tx, upto=10)}
        assert counts == {
            "queued": 2,
            "leased": 1,
            "cancel_requested": 0,
            "awaiting_receipt": 0,
            "waiting": 0,
        }
        assert {r["state"]: int(r["n"]) for r in d.view_state_counts_upto(tx, upto=1)} == {
            **counts,
            "queued": 1,
        }
        dead = d.view_dead_count_upto(tx, upto=5)
        assert dead is not None and int(dead["n"]) == 0


@covers("view_state_counts", "view_dead_count", "view_task_by_key", "view_tasks_by_ids")
@covers("view_activity")
def test_views(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        counts = {r["state"]: int(r["n"]) for r in d.view_state_counts(tx)}
        assert counts == {"queued": 1, "leased": 1}
        dead = d.view_dead_count(tx)
        assert dead is not None and int(dead["n"]) == 0
        assert d.view_task_by_key(tx, tenant="", kind="k", key="nope") == []
        ids = [world["queued"], world["leased"]]
        rows = d.view_tasks_by_ids(tx, ids=json.dumps(ids))
        assert {r["id"] for r in rows} == set(ids)
        assert isinstance(d.view_activity(tx, since=ago(d, tx), bucket=60.0), list)


@covers("view_counts_between", "view_runs_between", "view_waits_between")
def test_what_the_log_gained_in_a_span(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        span = {"after": ago(d, tx), "upto": d.encode_time(d.db_now(tx))}
        counts = {
            (r["reason"], r["to_state"]): int(r["n"]) for r in d.view_counts_between(tx, **span)
        }
        assert counts == {("enqueued", "queued"): 2, ("claimed", "leased"): 1}
        assert len(d.view_waits_between(tx, **span)) == 1  # the one claim
        assert d.view_runs_between(tx, **span) == []  # no attempt has ended
        empty = {"after": span["upto"], "upto": span["upto"]}
        assert d.view_counts_between(tx, **empty) == []


# -- the invariant check and pruning -------------------------------------------------------------
@covers("check_read_only", "check_transitions_page", "check_parents", "check_state_projection")
@covers("check_seq_contiguous", "check_log_chain", "check_terminal_finished", "check_effect_keys")
@covers("check_held_lease", "check_queued_lease", "check_row_evidence")
@covers("invariant_violations")
def test_check_statements(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with d.transaction(write=False) as tx:
        d.check_read_only(tx)
        for rule in (
            d.check_state_projection,
            d.check_seq_contiguous,
            d.check_log_chain,
            d.check_terminal_finished,
            d.check_effect_keys,
            d.check_held_lease,
            d.check_queued_lease,
            d.check_row_evidence,
        ):
            assert rule(tx) == []
        page = d.check_transitions_page(tx, after_task=0, after_seq=0, limit=10)
        assert len(page) == 3  # two enqueued, one claimed
        assert d.check_parents(tx) == []
        assert d.invariant_violations(tx) == []


@covers("prune_select", "prune_guard", "prune_transitions", "prune_steps", "prune_outbox")
@covers("prune_tasks")
def test_prune_statements(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        assert d.prune_select(tx, older_than=0, limit=10) == []
        listed = d._list([])
        d.prune_guard(tx, on=True)
        assert d.prune_transitions(tx, ids=listed) == 0
        d.prune_steps(tx, ids=listed)
        d.prune_outbox(tx, ids=listed)
        assert d.prune_tasks(tx, ids=listed) == 0
        d.prune_guard(tx, on=False)


@covers("retention_select", "retention_delete_tasks", "pruned_add", "pruned_list")
def test_retention_statements(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        # the world holds a queued and a leased task: nothing finished to select
        assert d.retention_select(tx, state="succeeded", older_than=0, limit=10) == []
        assert d.retention_delete_tasks(tx, ids=d._list([world["queued"]]), state="dead") == 0
        assert d.pruned_list(tx) == []
        d.pruned_add(tx, state="cancelled", tasks=3, transitions=9)
        d.pruned_add(tx, state="cancelled", tasks=2, transitions=6)
        assert [dict(r) for r in d.pruned_list(tx)] == [
            {"state": "cancelled", "tasks": 5, "transitions": 15}
        ]


@covers("trace_contexts")
def test_trace_contexts(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with d.transaction(write=False) as tx:
        # enqueued without a recording tracer: no context stored
        assert d.trace_contexts(tx, ids=d._list([world["queued"], world["leased"]])) == []


@covers("task_set_key", "queue_mark_keyed", "key_holders", "key_ahead_count")
def test_concurrency_keys(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        d.task_set_key(tx, id=world["leased"], key="acct", limit=1)
        d.task_set_key(tx, id=world["queued"], key="acct", limit=1)
        d.queue_mark_keyed(tx, name="default")
        d.queue_mark_keyed(tx, name="default")  # again: no change, no error
        queue = d.queue_get(tx, name="default")
        assert queue is not None and queue["keyed"]
        holders = d.key_holders(tx, queue="default", tenant="", key="acct")
        assert [h["id"] for h in holders] == [world["leased"]]
        row = d.task_get(tx, world["queued"])
        assert row is not None and row["ckey"] == "acct"
        ahead = d.key_ahead_count(
            tx,
            queue="default",
            tenant="",
            key="acct",
            run_at=d.encode_time(row["run_at"]),
            id=row["id"],
        )
        assert ahead is not None and int(ahead["n"]) == 0


@covers("kind_rate_set", "kind_rate_list", "kind_rate_delete", "queue_kind_rated_sync")
@covers("kind_tokens_set")
def test_kind_rates(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    with rolled_back(d) as tx:
        d.queue_upsert(
            tx,
            name="default",
            paused=False,
            paused_by=None,
            paused_note=None,
            limit_total=None,
            limit_per_tenant=None,
        )
        row = d.kind_rate_set(tx, queue="default", kind="k", per_second=2.0, burst=3)
        assert row is not None and (row["per_second"], row["burst"]) == (2, 3)
        d.queue_kind_rated_sync(tx, name="default")
        queue = d.queue_get(tx, name="default")
        assert queue is not None and queue["kind_rated"]
        d.kind_tokens_set(tx, queue="default", kind="k", tokens=1.5)
        listed = d.kind_rate_list(tx, queue="default")
        assert [(b["kind"], b["tokens"]) for b in listed] == [("k", 1.5)]
        assert listed[0]["tokens_at"] is not None
        assert d.kind_rate_list(tx, queue=None) == listed
        d.kind_rate_delete(tx, queue="default", kind="k")
        d.queue_kind_rated_sync(tx, name="default")
        queue = d.queue_get(tx, name="default")
        assert queue is not None and not queue["kind_rated"]
        assert d.kind_rate_list(tx, queue="default") == []


@covers("search_top_id", "search_tasks")
def test_search_statements(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    queued, leased = world["queued"], world["leased"]
    base = {"state": None, "kind": None, "queue": None, "tenant": None, "before_id": None}
    base |= {"floor_id": None, "limit": 10}
    if d.dialect == "postgres":
        payload = {"doc": '{"n": 2}'}
    else:
        payload = {"path": '$."n"', "jtype": "number", "value": 2}
    with d.transaction(write=False) as tx:
        assert d.search_top_id(tx) == queued
        assert [r["id"] for r in d.search_tasks(tx, "filter", base)] == [queued, leased]
        rows = d.search_tasks(tx, "filter", {**base, "state": "leased"}, states_only=True)
        assert [dict(r) for r in rows] == [{"id": leased, "state": "leased"}]
        assert [r["id"] for r in d.search_tasks(tx, "payload", {**base, **payload})] == [queued]
        bounded = {**base, **payload, "floor_id": queued}  # only ids above the floor: none
        assert d.search_tasks(tx, "payload", bounded) == []
        assert d.search_tasks(tx, "error", {**base, "pattern": "%"}) == []  # no error yet
        assert d.search_tasks(tx, "key", {**base, "key": "nope"}) == []
        with pytest.raises(ValueError, match="unknown search mode"):
            d.search_tasks(tx, "everything", base)


# -- commits that need not wait for the disk (wait_for_disk=False) ------------------------------
@covers("skip_flush_wait", "task_insert_unflushed")
def test_commits_that_need_not_wait_for_the_disk(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    app: jobtrail.App = world["app"]
    expected = ("off",) if d.dialect == "postgres" else None
    with d.transaction() as tx:
        d.skip_flush_wait(tx)
        if expected is not None:  # SQLite: nothing to see (and nothing changes)
            assert tx.conn.execute("SHOW synchronous_commit").fetchone() == expected
    if expected is not None:  # that transaction's alone
        with d.transaction() as tx:
            assert tx.conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    row, created = d.task_insert_unflushed(app._core._new_task({"kind": "k", "payload": {}}))
    assert created
    with d.transaction(write=False) as tx:
        got = d.task_get(tx, int(row["id"]))
    assert got is not None and got["state"] == "queued"


@pytest.mark.parametrize("backend", ["postgres", *POOLED_BACKENDS])
def test_an_unflushed_single_enqueue_is_one_statement_that_turns_its_flush_wait_off(
    store: Store,
) -> None:
    """PostgreSQL: ``wait_for_disk=False`` on a single enqueue is one autocommit statement
    through libpq (store/postgres/unflushed.py), as the durable one: no BEGIN, SET LOCAL or
    COMMIT of its own. The statement evaluates the setting itself (an unread SELECT in WITH
    would not be run), so its own transaction commits without waiting for the flush; the
    setting ends with it. Prepared on our own connection, unnamed behind PgBouncer."""
    app = store.app()
    app.task("k")(lambda ctx, p: None)
    driver = app._driver
    assert driver._pooled == (store.backend != "postgres")  # no prepared statements there
    seen: list[tuple[str, tuple[Any, ...] | None]] = []
    for name, statement in driver._direct_unflushed.items():

        def first(*args: Any, _run: Any = statement.first, _name: str = name) -> Any:
            row = _run(*args)
            seen.append((_name, row))
            return row

        statement.first = first  # type: ignore[method-assign]
    for handoff in (False, True):
        driver._saw_idle(handoff)  # whether the enqueue looks for an idle worker
        task = app.enqueue("k", {}, wait_for_disk=False)
        name = "task_insert_handoff_unflushed" if handoff else "task_insert_unflushed"
        assert [(n, r[0] if r else None) for n, r in seen] == [(name, int(task.id))]
        assert seen[0][1] is not None and seen[0][1][-1] == "off"  # evaluated in the statement
        seen.clear()
        with driver.single_statement() as tx:  # the setting ended with that transaction
            assert tx.conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    # an existing key: no row, nothing written to flush; the existing task comes back
    first = app.enqueue("k", {}, wait_for_disk=False, idempotency_key="a")
    again = app.enqueue("k", {}, wait_for_disk=False, idempotency_key="a")
    assert (again.id, again.created, first.created) == (first.id, False, True)


def test_an_enqueue_beside_another_wakes_workers_after_its_commit(pg: Any) -> None:
    """PostgreSQL: a single enqueue while another is in flight (the express connection taken)
    and no idle worker was seen (else it may hand its task over) inserts without NOTIFY,
    whose lock would hold its commit until its flush, and the notifier wakes the workers once
    it has committed (store/postgres/notify_after.py)."""
    app = pg.app()
    app.task("k")(lambda ctx, p: None)
    driver = app._driver
    with psycopg.connect(pg.url, autocommit=True) as listener:
        row = listener.execute("SELECT jobtrail_channel('queued')").fetchone()
        assert row is not None
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(row[0])))
        done: list[jobtrail.Task] = []
        driver._saw_idle(False)  # the last look found no idle worker to hand a task to
        with driver._express_lock, driver._notify_cond:  # in flight; the notifier held
            enqueuer = threading.Thread(target=lambda: done.append(app.enqueue("k", {})))
            enqueuer.start()
            deadline = time.monotonic() + 10
            while not listener.execute("SELECT 1 FROM jobtrail_tasks").fetchall():
                assert time.monotonic() < deadline, "the enqueue did not commit"
                time.sleep(0.01)
            # committed, and the insert itself sent nothing
            assert list(listener.notifies(timeout=0.5, stop_after=1)) == []
        enqueuer.join(10)
        heard = list(listener.notifies(timeout=10, stop_after=1))
    assert done and done[0].created
    assert [n.payload for n in heard] == ["default"]


@covers("id_mark")
def test_id_mark(world: dict[str, Any]) -> None:
    d: Driver = world["d"]
    if not d.id_marks:  # SQLite finds a window's tasks through an index of created_at
        assert d.dialect == "sqlite"
        return
    with rolled_back(d) as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        conn.execute("DELETE FROM jobtrail_id_marks")
        d.id_mark(tx)
        d.id_mark(tx)  # under a minute after the first: nothing
        rows = conn.execute("SELECT last_id FROM jobtrail_id_marks").fetchall()
        assert rows == [(world["queued"],)]  # the highest id handed out
