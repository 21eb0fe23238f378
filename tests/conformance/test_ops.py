"""Operations (limits, queues, dismissing) on both backends.

Pause and resume, concurrency limits enforced inside the claim, the audit of queue changes,
explanations of held-back tasks, dead-letter groups and dismissing, queue health against a
scripted workload, and pruning (the one documented exception to the append-only log).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import jobtrail
from jobtrail.core import transition
from jobtrail.model.errors import IllegalTransition, PermanentError, TaskNotFound, TransientError
from jobtrail.services import stats as stats_module
from jobtrail.store.base import Claim
from jobtrail.store.sqlite import path_from_url

WAIT = 15.0  # deadline for anything a test waits on


# -- helpers ------------------------------------------------------------------------------------
def raw(store: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own (``?`` placeholders), committed."""
    if store.backend == "sqlite":
        conn = sqlite3.connect(path_from_url(store.url), timeout=30)
        try:
            cur = conn.execute(sql, params)
            rows = cur.fetchall()
            conn.commit()
            return rows
        finally:
            conn.close()
    with psycopg.connect(store.url, autocommit=True) as pg:
        cur = pg.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def claim(
    app: jobtrail.App, limit: int, *, queues: tuple[str, ...] = ("default",), kinds=("k",)
) -> list[dict[str, Any]]:
    """Lease due tasks through the claim seam, without a worker running them."""
    with app._driver.transaction() as tx:
        return transition.claim(
            app._driver,
            tx,
            Claim(owner="w:1:x", queues=list(queues), kinds=list(kinds), limit=limit, version=None),
        )


def noop_kind(app: jobtrail.App, name: str = "k", **options: Any) -> None:
    @app.task(name, **options)
    def handler(ctx: Any, payload: Any) -> None:
        return None


def queue_view(app: jobtrail.App, name: str) -> dict[str, Any]:
    return next(q for q in app.queues() if q["queue"] == name)


def run_in_thread(app: jobtrail.App) -> threading.Thread:
    thread = threading.Thread(
        target=app.run_worker, kwargs={"burst": True, "poll_interval": 0.02}, daemon=True
    )
    thread.start()
    return thread


# -- pause and resume -----------------------------------------------------------------------------
def test_pause_stops_claims_running_tasks_finish_resume_runs(app: jobtrail.App) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task("block")
    def block(ctx: Any, payload: Any) -> None:
        started.set()
        assert release.wait(WAIT)

    first = app.enqueue("block")
    worker = run_in_thread(app)
    assert started.wait(WAIT), "the worker never started the first task"
    app.pause("default", by="alice", note="deploy in progress")
    second = app.enqueue("block")  # due now, but its queue is paused
    release.set()
    # A burst worker stops only after a claim that found nothing with nothing running: that
    # claim came after ``second`` was enqueued, so the pause is what kept it queued.
    worker.join(WAIT)
    assert not worker.is_alive()
    assert app.get(first.id).state == "succeeded"
    assert app.get(second.id).state == "queued"

    # Paused: a fresh burst worker leaves it queued too.
    assert app.run_worker(burst=True, poll_interval=0.02) == 0
    assert app.get(second.id).state == "queued"
    assert [t.reason for t in app.transitions(second.id)] == ["enqueued"]

    app.resume("default", by="alice", note="deploy done")
    assert app.run_worker(burst=True, poll_interval=0.02) == 1
    assert app.get(second.id).state == "succeeded"


def test_pause_resume_limit_are_audited_and_listed(app: jobtrail.App) -> None:
    noop_kind(app)
    assert app.queue_history("q1") == []
    before = app.db_now()
    view = app.pause("q1", by="alice", note="incident 42")
    assert view["paused"] is True and view["paused_by"] == "alice"

    listed = queue_view(app, "q1")
    assert listed["paused"] is True
    assert listed["paused_by"] == "alice"
    assert listed["paused_note"] == "incident 42"
    assert listed["paused_since"] is not None
    assert before <= listed["paused_since"] <= app.db_now()
    assert listed["limit_total"] is None and listed["limit_per_tenant"] is None
    assert queue_view(app, "default")["paused"] is False  # a registered kind's queue is listed

    # Pausing a paused queue records nothing and keeps who paused it and why.
    again = app.pause("q1", by="bob", note="me too")
    assert again["paused_by"] == "alice" and again["paused_note"] == "incident 42"
    assert len(app.queue_history("q1")) == 1

    # A limit on a paused queue keeps the pause (by, note, since).
    app.set_limit("q1", total=5, per_tenant=2, by="carol", note="protect the db")
    listed2 = queue_view(app, "q1")
    assert listed2["paused"] is True
    assert listed2["paused_by"] == "alice" and listed2["paused_note"] == "incident 42"
    assert listed2["paused_since"] == listed["paused_since"]
    assert (listed2["limit_total"], listed2["limit_per_tenant"]) == (5, 2)
    app.set_limit("q1", total=5, per_tenant=2, by="carol", note="same again")  # no change
    assert len(app.queue_history("q1")) == 2

    app.resume("q1", by="dave", note="fixed")
    app.resume("q1", by="dave", note="fixed twice")  # not paused: nothing recorded
    listed3 = queue_view(app, "q1")
    assert listed3["paused"] is False
    assert listed3["paused_by"] is None and listed3["paused_note"] is None
    assert listed3["paused_since"] is None
    assert (listed3["limit_total"], listed3["limit_per_tenant"]) == (5, 2)  # limits kept

    app.set_limit("q1", total=None, per_tenant=None, by="erin", note="lift")
    history = app.queue_history("q1")
    assert [(h["action"], h["by"], h["note"], h["data"]) for h in history] == [
        ("limit", "erin", "lift", {"total": None, "per_tenant": None}),
        ("resume", "dave", "fixed", {}),
        ("limit", "carol", "protect the db", {"total": 5, "per_tenant": 2}),
        ("pause", "alice", "incident 42", {}),
    ]
    ats = [h["at"] for h in history]
    assert ats == sorted(ats, reverse=True)
    assert app.queue_history("q1", limit=1)[0]["action"] == "limit"
    assert app.queue_history("other") == []


def test_by_and_note_are_required_and_nothing_is_recorded(app: jobtrail.App) -> None:
    app.pause("q2", by="alice", note="set up")  # so that resume would change something
    actions = {
        "pause": lambda by, note: app.pause("q3", by=by, note=note),
        "resume": lambda by, note: app.resume("q2", by=by, note=note),
        "limit": lambda by, note: app.set_limit("q2", total=1, by=by, note=note),
    }
    before = (app.queue_history("q2"), app.queue_history("q3"), app.queues())
    for name, action in actions.items():
        for by, note in (("", "n"), ("a", ""), ("  ", "n"), ("a", "\t"), (None, "n"), ("a", None)):
            with pytest.raises(ValueError):
                action(by, note)
            after = (app.queue_history("q2"), app.queue_history("q3"), app.queues())
            assert after == before, (name, by, note)


def test_set_limit_rejects_bad_values(app: jobtrail.App) -> None:
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError):
            app.set_limit("default", total=bad, by="a", note="n")
        with pytest.raises(ValueError):
            app.set_limit("default", per_tenant=bad, by="a", note="n")
    assert app.queue_history("default") == []


# -- explanations of held-back tasks --------------------------------------------------------------
def test_explain_names_the_pause_and_its_note(app: jobtrail.App) -> None:
    noop_kind(app)
    task = app.enqueue("k")
    app.pause("default", by="alice", note="provider outage INC-7")
    text = app.explain(task.id)
    assert "paused by alice" in text
    assert '"provider outage INC-7"' in text
    app.resume("default", by="alice", note="over")
    assert "paused" not in app.explain(task.id)


def test_explain_names_a_full_queue_limit(app: jobtrail.App) -> None:
    noop_kind(app)
    tasks = [app.enqueue("k") for _ in range(3)]
    app.set_limit("default", total=2, by="a", note="n")
    assert len(claim(app, 10)) == 2
    waiting = next(t for t in tasks if app.get(t.id).state == "queued")
    assert "concurrency limit reached: 2 of 2 leased" in app.explain(waiting.id)
    app.set_limit("default", total=None, by="a", note="lift")
    assert "leased" not in app.explain(waiting.id).split("transitions:")[0]


def test_explain_names_a_full_tenant_limit(app: jobtrail.App) -> None:
    noop_kind(app)
    first = app.enqueue("k", tenant="t1")
    second = app.enqueue("k", tenant="t1")
    other = app.enqueue("k", tenant="t2")
    app.set_limit("default", per_tenant=1, by="a", note="n")
    assert {r["id"] for r in claim(app, 10)} == {int(first.id), int(other.id)}
    assert "tenant t1: 1 of 1 leased" in app.explain(second.id)


# -- limits are enforced in the claim ---------------------------------------------------------
def test_total_limit_is_enforced_in_the_claim(app: jobtrail.App) -> None:
    noop_kind(app)
    for _ in range(6):
        app.enqueue("k")
    app.set_limit("default", total=2, by="a", note="n")
    assert len(claim(app, 10)) == 2
    assert claim(app, 10) == []  # the two are still leased
    app.set_limit("default", total=3, by="a", note="n")
    assert len(claim(app, 10)) == 1
    app.set_limit("default", total=None, by="a", note="lift")
    assert len(claim(app, 10)) == 3
    assert len(app.list(state="leased")) == 6


def test_per_tenant_limit_is_enforced_in_the_claim(app: jobtrail.App) -> None:
    noop_kind(app)
    for tenant in ("t1", "t2", "t3"):
        for _ in range(3):
            app.enqueue("k", tenant=tenant)
    app.set_limit("default", per_tenant=1, by="a", note="n")
    rows = claim(app, 10)
    assert sorted(r["tenant"] for r in rows) == ["t1", "t2", "t3"]
    assert claim(app, 10) == []
    app.set_limit("default", per_tenant=2, by="a", note="n")
    assert sorted(r["tenant"] for r in claim(app, 10)) == ["t1", "t2", "t3"]
    app.set_limit("default", total=None, per_tenant=None, by="a", note="lift")
    assert len(claim(app, 10)) == 3
    assert app.list(state="queued") == []


def test_total_and_per_tenant_limits_together(app: jobtrail.App) -> None:
    noop_kind(app)
    for tenant in ("t1", "t1", "t1", "t2", "t2", "t3"):
        app.enqueue("k", tenant=tenant)
    app.set_limit("default", total=2, per_tenant=1, by="a", note="n")
    rows = claim(app, 10)
    assert len(rows) == 2 and len({r["tenant"] for r in rows}) == 2


def test_limit_zero_claims_nothing(app: jobtrail.App) -> None:
    noop_kind(app)
    task = app.enqueue("k", tenant="t1")
    app.set_limit("default", total=0, by="a", note="n")
    assert claim(app, 10) == []
    assert "0 of 0 leased" in app.explain(task.id)
    app.set_limit("default", total=None, per_tenant=0, by="a", note="n")
    assert claim(app, 10) == []
    assert app.run_worker(burst=True, poll_interval=0.02) == 0
    assert app.get(task.id).state == "queued"
    app.set_limit("default", total=None, per_tenant=None, by="a", note="lift")
    assert len(claim(app, 10)) == 1


def test_a_limited_queue_does_not_hold_back_other_queues(app: jobtrail.App) -> None:
    noop_kind(app)
    for _ in range(3):
        app.enqueue("k")
        app.enqueue("k", queue="free")
    app.set_limit("default", total=1, by="a", note="n")
    rows = claim(app, 10, queues=("default", "free"))
    assert sorted(r["queue"] for r in rows) == ["default", "free", "free", "free"]


def test_a_paused_limited_queue_claims_nothing(app: jobtrail.App) -> None:
    noop_kind(app)
    app.enqueue("k")
    app.set_limit("default", total=5, per_tenant=5, by="a", note="n")
    app.pause("default", by="a", note="n")
    assert claim(app, 10) == []
    app.resume("default", by="a", note="n")
    assert len(claim(app, 10)) == 1


# -- dead letters and dismissing ------------------------------------------------------------------
def test_dead_groups_by_reason_and_kind_with_versions(store: Any) -> None:
    app = store.app(version="v7")

    @app.task("x", max_attempts=1)
    def x(ctx: Any, payload: Any) -> None:
        raise PermanentError("bad input")

    @app.task("y", max_attempts=1)
    def y(ctx: Any, payload: Any) -> None:
        raise TransientError("flaky")

    for _ in range(3):
        app.enqueue("x")
    app.enqueue("y")
    assert app.dead() == []
    assert app.run_worker(burst=True, poll_interval=0.02) == 4
    groups = app.dead()
    assert [(g["reason"], g["kind"], g["count"], g["versions"]) for g in groups] == [
        ("permanent_error", "x", 3, ["v7"]),
        ("attempts_exhausted", "y", 1, ["v7"]),
    ]
    for g in groups:
        assert isinstance(g["oldest_age"], float) and g["oldest_age"] >= 0

    # The version is the one that made the last claim: a newer build failing the same kind.
    app8 = store.app(version="v8")

    @app8.task("x", max_attempts=1)
    def x8(ctx: Any, payload: Any) -> None:
        raise PermanentError("still bad")

    app8.enqueue("x")
    assert app8.run_worker(burst=True, poll_interval=0.02) == 1
    first = app.dead()[0]
    assert (first["kind"], first["count"], first["versions"]) == ("x", 4, ["v7", "v8"])


def test_dismiss_closes_a_dead_task(app: jobtrail.App) -> None:
    @app.task("bad", max_attempts=1)
    def bad(ctx: Any, payload: Any) -> None:
        raise PermanentError("nope")

    noop_kind(app)
    one, two = app.enqueue("bad"), app.enqueue("bad")
    assert app.run_worker(burst=True, poll_interval=0.02) == 2

    def dead_stats() -> tuple[int, float]:
        row = next(q for q in app.stats()["queues"] if q["kind"] == "bad")
        return row["dead"], row["completions_per_min"]

    assert app.dead()[0]["count"] == 2
    dead_before, completions_before = dead_stats()
    assert dead_before == 2

    with pytest.raises(ValueError):
        app.dismiss(one.id, by="ops", note="")
    app.dismiss(one.id, by="ops", note="customer deleted; will not replay")
    task = app.get(one.id)
    assert task.state == "dead" and task.dismissed
    last = app.transitions(one.id)[-1]
    assert (last.reason, last.from_state, last.to_state) == ("dismissed", "dead", "dead")
    assert (last.actor, last.note) == ("ops", "customer deleted; will not replay")
    assert "dead" in app.explain(one.id)
    assert [(g["kind"], g["count"]) for g in app.dead()] == [("bad", 1)]
    assert dead_stats() == (1, completions_before)  # a dismissal is not a completion

    app.dismiss(two.id, by="ops", note="same")
    assert app.dead() == []
    assert dead_stats()[0] == 0
    assert app.get(two.id).state == "dead"

    # A replayed task that dies again needs a person again.
    app.replay(two.id, by="ops", note="provider fixed")
    assert not app.get(two.id).dismissed
    assert app.run_worker(burst=True, poll_interval=0.02) == 1
    assert app.get(two.id).state == "dead" and not app.get(two.id).dismissed
    assert [(g["kind"], g["count"]) for g in app.dead()] == [("bad", 1)]
    assert dead_stats()[0] == 1

    # Only dead tasks can be dismissed; a refusal appends nothing.
    queued = app.enqueue("k", delay=3600)
    done = app.enqueue("k")
    assert app.run_worker(burst=True, poll_interval=0.02) == 1
    for task_id in (queued.id, done.id):
        before = len(app.transitions(task_id))
        with pytest.raises(IllegalTransition):
            app.dismiss(task_id, by="ops", note="n")
        assert len(app.transitions(task_id)) == before
    with pytest.raises(TaskNotFound):
        app.dismiss("999999", by="ops", note="n")


# -- queue health -------------------------------------------------------------------------------
def test_stats_against_a_scripted_workload(app: jobtrail.App) -> None:
    @app.task("x", queue="a", backoff_base=0, max_attempts=3)
    def x(ctx: Any, payload: Any) -> None:
        time.sleep(0.06)
        if payload == "dead":
            raise PermanentError("bad input")
        if payload == "retry" and ctx.attempt == 1:
            raise TransientError("flaky")

    noop_kind(app, "later", queue="a")
    noop_kind(app, "y", queue="b")

    for payload in ("dead", "dead", "retry", "ok", "ok", "ok"):
        app.enqueue("x", payload)
    for _ in range(3):
        app.enqueue("later", delay=3600)
    app.pause("b", by="ops", note="hold b")
    held = [app.enqueue("y") for _ in range(2)]
    assert app.run_worker(burst=True, concurrency=4, poll_interval=0.02) == 7  # 6 + 1 retry

    window = 300.0
    report = app.stats(window=window)
    assert report["window_seconds"] == window
    rows = {(q["queue"], q["kind"]): q for q in report["queues"]}
    assert set(rows) == {("a", "x"), ("a", "later"), ("b", "y")}
    per_min = window / 60

    x_row = rows[("a", "x")]
    assert x_row["counts"] == {
        "queued": 0,
        "leased": 0,
        "cancel_requested": 0,
        "awaiting_receipt": 0,
        "waiting": 0,
    }
    assert x_row["finished_in_window"] == {"succeeded": 4, "cancelled": 0}
    assert x_row["dead"] == 2
    assert x_row["oldest_dead_age"] is not None and x_row["oldest_dead_age"] >= 0
    assert x_row["retries"] == 1
    assert x_row["lease_expiries"] == 0
    assert x_row["arrivals_per_min"] == pytest.approx(6 / per_min)
    assert x_row["completions_per_min"] == pytest.approx(6 / per_min)  # 4 succeeded + 2 dead
    assert x_row["oldest_due_age"] is None
    assert x_row["backlog"] == 0
    assert x_row["drain_time"] == 0.0
    for key in ("wait_p50", "wait_p95", "run_p50", "run_p95"):
        assert x_row[key] is not None and x_row[key] >= 0, (key, x_row[key])
    assert x_row["wait_p95"] >= x_row["wait_p50"]
    assert x_row["run_p95"] >= x_row["run_p50"] >= 0.05  # every attempt slept 0.06 s

    later = rows[("a", "later")]
    assert later["counts"]["queued"] == 3
    assert later["oldest_due_age"] is None  # queued but not due
    assert later["arrivals_per_min"] == pytest.approx(3 / per_min)
    assert later["completions_per_min"] == 0
    assert later["backlog"] == 3
    assert later["drain_time"] == "never"
    assert later["dead"] == 0 and later["retries"] == 0
    assert later["wait_p50"] is None and later["run_p50"] is None

    paused = rows[("b", "y")]
    assert paused["counts"]["queued"] == 2
    assert paused["oldest_due_age"] is not None and paused["oldest_due_age"] > 0
    assert paused["arrivals_per_min"] == pytest.approx(2 / per_min)
    assert paused["backlog"] == 2
    assert paused["drain_time"] == "never"
    assert all(app.get(t.id).state == "queued" for t in held)

    with pytest.raises(ValueError):
        app.stats(window=0)


def test_stats_window_excludes_older_arrivals_and_drain_time_is_computed(
    app: jobtrail.App,
) -> None:
    noop_kind(app)
    for _ in range(3):
        app.enqueue("k")
    later = [app.enqueue("k", delay=3600) for _ in range(2)]
    enqueued_at = max(t.created_at for t in app.list())
    gap = 0.6
    deadline = time.monotonic() + WAIT
    while (app.db_now() - enqueued_at).total_seconds() < gap:  # let the arrivals age
        assert time.monotonic() < deadline
        app._driver.wait_for_work(0.05)
    started = app.db_now()
    assert app.run_worker(burst=True, poll_interval=0.02) == 3
    # A window that starts after the arrivals but before the first claim.
    window = (app.db_now() - started).total_seconds() + gap / 2
    row = next(q for q in app.stats(window=window)["queues"] if q["kind"] == "k")
    per_min = window / 60
    assert row["arrivals_per_min"] == 0
    assert row["completions_per_min"] == pytest.approx(round(3 / per_min, 3))
    assert row["finished_in_window"]["succeeded"] == 3
    assert row["backlog"] == len(later) == row["counts"]["queued"]
    assert row["drain_time"] == pytest.approx(len(later) * window / 3)  # backlog / net rate

    wide = next(q for q in app.stats(window=3600)["queues"] if q["kind"] == "k")
    assert wide["arrivals_per_min"] == round(5 / 60, 3)  # rates are rounded to 3 places
    assert wide["drain_time"] == "never"  # 5 arrived, 3 completed


def test_stats_counts_leased_tasks_and_lease_expiries(app: jobtrail.App) -> None:
    noop_kind(app, lease_seconds=0.2)
    task = app.enqueue("k")
    assert len(claim(app, 1)) == 1  # leased by a "worker" that then vanishes
    row = next(q for q in app.stats()["queues"] if q["kind"] == "k")
    assert row["counts"]["leased"] == 1 and row["backlog"] == 1
    assert row["drain_time"] == "never"  # one arrival, no completion yet

    deadline = time.monotonic() + WAIT
    while not app.sweep():
        assert time.monotonic() < deadline, "the lease never expired"
        app._driver.wait_for_work(0.05)
    assert app.get(task.id).state == "queued"
    row = next(q for q in app.stats()["queues"] if q["kind"] == "k")
    assert row["lease_expiries"] == 1
    assert row["counts"]["leased"] == 0 and row["counts"]["queued"] == 1
    assert row["run_p50"] is None  # an expired lease is not a run time
    assert row["retries"] == 0


def test_drain_time_and_percentile_arithmetic() -> None:
    assert stats_module.drain_time(0, 5.0, 1.0) == 0.0
    assert stats_module.drain_time(10, 1.0, 1.0) == "never"
    assert stats_module.drain_time(10, 2.0, 1.0) == "never"
    assert stats_module.drain_time(10, 1.0, 3.0) == pytest.approx(300.0)
    assert stats_module.percentile([], 50) is None
    assert stats_module.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert stats_module.percentile([float(i) for i in range(1, 21)], 95) == 19.0


# -- pruning ---------------------------------------------------------------------------------------
def test_prune_deletes_old_finished_tasks_with_their_rows(store: Any, app: jobtrail.App) -> None:
    delivered: list[int] = []

    @app.sink("done")
    def sink(message_id: int, topic: str, payload: Any) -> None:
        delivered.append(message_id)

    @app.task("ok")
    def ok(ctx: Any, payload: Any) -> None:
        ctx.step("fetch", lambda: {"n": payload})
        ctx.emit("done", {"n": payload})

    @app.task("held")
    def held(ctx: Any, payload: Any) -> None:
        ctx.emit("nowhere", {})  # no sink for this topic: stays pending

    @app.task("bad", max_attempts=1)
    def bad(ctx: Any, payload: Any) -> None:
        raise PermanentError("nope")

    old, recent1, recent2 = (app.enqueue("ok", n) for n in (1, 2, 3))
    pending = app.enqueue("held")
    dead = app.enqueue("bad")
    cancelled = app.enqueue("ok", 4, delay=3600)
    app.cancel(cancelled.id, by="ops")
    queued = app.enqueue("ok", 5, delay=3600)
    assert app.run_worker(burst=True, poll_interval=0.02) == 5
    app.dispatch_outbox()
    assert [m["state"] for m in app.outbox(old.id)] == ["delivered"]
    assert [m["state"] for m in app.outbox(pending.id)] == ["pending"]
    assert app.get(cancelled.id).state == "cancelled"

    ids = {
        "old": old.id,
        "recent1": recent1.id,
        "recent2": recent2.id,
        "pending": pending.id,
        "dead": dead.id,
        "cancelled": cancelled.id,
        "queued": queued.id,
    }

    tables = {
        "jobtrail_transitions": "task_id",
        "jobtrail_steps": "task_id",
        "jobtrail_outbox": "task_id",
        "jobtrail_tasks": "id",
    }

    def snapshot() -> dict[str, dict[str, int]]:
        """Row counts per task (by name) in every table pruning touches, by raw SQL."""
        out: dict[str, dict[str, int]] = {name: dict.fromkeys(tables, 0) for name in ids}
        by_id = {int(task_id): name for name, task_id in ids.items()}
        for table, column in tables.items():
            sql = f"SELECT {column}, COUNT(*) FROM {table} GROUP BY 1"  # noqa: S608 - constants
            for task_id, n in raw(store, sql):
                out[by_id[task_id]][table] = n
        return out

    before = snapshot()
    assert before["old"] == {
        "jobtrail_transitions": 3,
        "jobtrail_steps": 1,
        "jobtrail_outbox": 1,
        "jobtrail_tasks": 1,
    }

    # Make ``old`` finish two hours ago (tasks rows are not append-only; the log is).
    shift = (
        "finished_at - 7200" if store.backend == "sqlite" else "finished_at - interval '2 hours'"
    )
    sql = f"UPDATE jobtrail_tasks SET finished_at = {shift} WHERE id = ?"  # noqa: S608 - constant
    raw(store, sql, (int(old.id),))

    assert app.prune(timedelta(hours=1)) == {"tasks": 1, "transitions": 3}
    after = snapshot()
    assert after["old"] == dict.fromkeys(tables, 0)
    with pytest.raises(TaskNotFound):
        app.get(old.id)
    assert {n: c for n, c in after.items() if n != "old"} == {
        n: c for n, c in before.items() if n != "old"
    }
    assert app.prune(3600) == {"tasks": 0, "transitions": 0}  # the rest finished recently

    result = app.prune(0)
    gone = ("recent1", "recent2", "cancelled")
    assert result == {
        "tasks": len(gone),
        "transitions": sum(before[n]["jobtrail_transitions"] for n in gone),
    }
    after = snapshot()
    for name in gone:
        assert after[name] == dict.fromkeys(tables, 0), name
    for name in ("pending", "dead", "queued"):  # pending outbox, dead, unfinished: all kept
        assert after[name] == before[name], name
    assert app.prune(0) == {"tasks": 0, "transitions": 0}
    assert app.get(dead.id).state == "dead"
    assert app.get(pending.id).state == "succeeded"

    # Outside pruning the log is still append-only.
    with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
        raw(store, "DELETE FROM jobtrail_transitions WHERE task_id = ?", (int(dead.id),))
    assert snapshot()["dead"] == before["dead"]

    with pytest.raises(ValueError):
        app.prune(-1)


def test_one_prune_removes_a_whole_finished_workflow(app: jobtrail.App) -> None:
    noop_kind(app)
    sequential = app.enqueue_workflow("flow", [("k", 1), ("k", 2), ("k", 3)], sequential=True)
    parallel = app.enqueue_workflow("flow", [("k", 4), ("k", 5)])
    assert app.run_worker(burst=True, poll_interval=0.02) == 5
    assert app.get(sequential.id).state == "succeeded"
    assert app.get(parallel.id).state == "succeeded"
    result = app.prune(0)
    assert result["tasks"] == 7  # two parents and five children, all finished
    assert app.list() == []
