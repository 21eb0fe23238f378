"""The edge table (docs/state_machine.md), walked. Every edge of ``jobtrail.model.machine.EDGES`` is
driven here with a real task through the public API (worker and sweeper included) and its transition
row checked."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

import jobtrail
from jobtrail.model.machine import EDGES, Actor

from .support import (
    DEAD_OWNER,
    assert_row,
    background_worker,
    claim_as_dead_worker,
    db_now,
    drain,
    is_worker,
    last,
    reasons,
    run,
    state,
    sweep_until_moved,
    wait_for,
)

# The edges as literal data, written apart from machine.py: (number, sources, targets,
# reasons, actor). "" is ∅, "*" any state.
SPEC_EDGES = [
    ("1", "", "queued", "enqueued", "caller"),
    ("2", "", "waiting", "enqueued", "caller"),
    ("3", "queued", "leased", "claimed", "worker"),
    ("4", "leased", "succeeded", "completed", "worker"),
    ("5", "leased", "queued", "retry_scheduled", "worker"),
    ("5s", "leased", "queued", "snoozed", "worker"),
    ("6", "leased", "dead", "permanent_error attempts_exhausted retry_budget_exhausted", "worker"),
    ("7", "leased", "queued", "lease_expired", "sweeper"),
    ("8", "leased", "dead", "lease_expired_effect_uncertain attempts_exhausted", "sweeper"),
    ("9", "leased", "awaiting_receipt", "submitted", "worker"),
    ("10", "awaiting_receipt", "succeeded", "receipt_confirmed", "caller"),
    ("11", "awaiting_receipt", "queued dead", "receipt_failed", "caller"),
    ("12", "awaiting_receipt", "dead", "receipt_timeout", "sweeper"),
    ("13", "queued", "cancelled", "cancelled_before_start", "caller"),
    ("14", "leased", "cancel_requested", "cancel_requested", "caller"),
    ("15", "cancel_requested", "cancelled", "cancel_confirmed", "worker"),
    ("16", "cancel_requested", "succeeded", "cancel_too_late", "worker"),
    ("17", "cancel_requested", "awaiting_receipt", "cancel_too_late", "worker"),
    (
        "18",
        "cancel_requested",
        "cancelled dead",
        "lease_expired_cancelled lease_expired_effect_uncertain",
        "sweeper",
    ),
    ("18f", "cancel_requested", "dead", "failed_after_cancel", "worker"),
    ("19", "dead", "queued", "replayed", "operator"),
    (
        "20",
        "waiting",
        "succeeded cancelled dead",
        "children_succeeded children_cancelled child_dead",
        "system",
    ),
    ("21", "dead", "waiting", "replayed", "operator"),
    ("24", "leased", "queued", "sleeping", "worker"),
    ("25", "leased", "waiting", "waiting_for_event waiting_for_children", "worker"),
    ("26", "waiting", "queued", "event_received", "caller"),
    ("27", "waiting", "queued", "children_finished", "system"),
    ("28", "waiting", "queued", "wait_timed_out", "sweeper"),
    ("29", "queued waiting", "cancelled", "cancelled_while_suspended", "caller"),
    ("30", "cancel_requested", "cancelled", "cancelled_after_effects", "worker"),
    ("22", "*", "*", "manual_fix", "operator"),
    ("23", "*", "*", "correction cancel_refused_submitted receipt_requeried dismissed", "any"),
    ("23d", "queued", "queued", "debounced", "caller"),
    ("13e", "queued", "cancelled", "expired", "sweeper"),
]

#: Edges not driven yet (none: every edge has a driver below).
LATER: dict[str, str] = {}


def _states(text: str) -> set[str]:
    if text == "*":
        return {s.value for s in jobtrail.State}
    return set(text.split())


def test_edge_table_is_the_spec_table() -> None:
    got = [
        (
            e.number,
            {s.value for s in e.sources},
            {s.value for s in e.targets},
            {r.value for r in e.reasons},
            e.actor.value,
        )
        for e in EDGES
    ]
    want = [
        (n, _states(src), _states(dst), set(rs.split()), Actor(actor).value)
        for n, src, dst, rs, actor in SPEC_EDGES
    ]
    assert got == want


def test_every_edge_is_driven_or_deferred() -> None:
    numbers = [e.number for e in EDGES]
    assert len(numbers) == len(set(numbers))
    assert set(DRIVERS).isdisjoint(LATER)
    assert set(numbers) == set(DRIVERS) | set(LATER)


# -- drivers: one function per edge, each with a fresh App -----------------------------------


def edge_1(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", {"a": 1})
    assert task.created and task.state == "queued"
    (t,) = app.transitions(task.id)
    assert_row(t, None, "queued", "enqueued", "caller")
    assert t.seq == 1 and t.attempt == 0
    # run_at = db now unless given
    assert task.run_at is not None
    assert abs((task.run_at - task.created_at).total_seconds()) < 0.002
    assert task.attempts == 0 and task.lease_owner is None


def edge_3(store, app: jobtrail.App) -> None:
    versioned = store.app(version="9.9.9-conformance")
    seen: list[tuple[str, int, str | None, str]] = []

    @versioned.task("k")
    def k(ctx, p):  # what a running handler sees of its own lease
        got = versioned.get(ctx.task_id)
        seen.append((ctx.task_id, ctx.attempt, got.lease_owner, got.state.value))

    task = versioned.enqueue("k")
    run(versioned)
    ts = versioned.transitions(task.id)
    claimed = ts[1]
    assert_row(claimed, "queued", "leased", "claimed", is_worker)
    assert claimed.attempt == 1
    assert claimed.data.get("version") == "9.9.9-conformance"
    assert claimed.data.get("waited", -1) >= 0
    # while running, the task was leased to the very worker that wrote the claim
    assert seen == [(task.id, 1, claimed.actor, "leased")]


def edge_3_lease(store, app: jobtrail.App) -> None:
    """Claiming sets owner, lease expiry = db now + lease, attempts += 1 (store seam)."""
    app.task("k", lease_seconds=7.0)(lambda ctx, p: None)
    task = app.enqueue("k")
    rows = claim_as_dead_worker(app, "k")
    assert [str(r["id"]) for r in rows] == [task.id]
    got = app.get(task.id)
    t = last(app, task.id)
    assert_row(t, "queued", "leased", "claimed", DEAD_OWNER)
    assert got.state == "leased" and got.lease_owner == DEAD_OWNER and got.attempts == 1
    assert got.lease_expires_at is not None
    assert abs((got.lease_expires_at - t.at).total_seconds() - 7.0) < 0.01
    # a second claim finds nothing: a leased task is taken exactly once
    assert claim_as_dead_worker(app, "k", owner="other:2:y") == []


def edge_4(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    run(app)
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == ["enqueued", "claimed", "completed"]
    assert_row(ts[2], "leased", "succeeded", "completed", ts[1].actor)
    assert ts[2].attempt == 1
    got = app.get(task.id)
    assert got.state == "succeeded" and got.finished_at is not None
    assert got.lease_owner is None and got.lease_expires_at is None


def edge_5(store, app: jobtrail.App) -> None:
    calls: list[int] = []

    @app.task("k", backoff_base=0)
    def k(ctx, p):
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise jobtrail.TransientError("upstream busy", category="unavailable")

    task = app.enqueue("k")
    drain(app, task.id)
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == [
        "enqueued",
        "claimed",
        "retry_scheduled",
        "claimed",
        "completed",
    ]
    assert_row(ts[2], "leased", "queued", "retry_scheduled", ts[1].actor)
    assert ts[2].attempt == 1 and ts[2].error_category == "unavailable"
    assert "upstream busy" in (ts[2].error or "")
    assert ts[3].attempt == 2 and calls == [1, 2]
    assert app.get(task.id).attempts == 2


def edge_5s(store, app: jobtrail.App) -> None:
    calls: list[tuple[int, int]] = []

    @app.task("k", max_attempts=1)
    def k(ctx, p):
        calls.append((ctx.attempt, len(calls)))
        if len(calls) == 1:
            raise jobtrail.Snooze(0)

    task = app.enqueue("k")
    drain(app, task.id)
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == ["enqueued", "claimed", "snoozed", "claimed", "completed"]
    assert_row(ts[2], "leased", "queued", "snoozed", ts[1].actor)
    assert ts[2].error_category is None
    # not counted: with max_attempts=1 the second run is still attempt 1 and it succeeded
    assert ts[1].attempt == 1 and ts[3].attempt == 1
    got = app.get(task.id)
    assert got.state == "succeeded" and got.attempts == 1


def edge_5s_delay(store, app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.Snooze(30)

    task = app.enqueue("k")
    run(app)
    got = app.get(task.id)
    t = last(app, task.id)
    assert_row(t, "leased", "queued", "snoozed", is_worker)
    assert got.state == "queued" and got.attempts == 0  # the attempt went back
    assert got.run_at is not None
    assert abs((got.run_at - t.at).total_seconds() - 30) < 0.01


def edge_6(store, app: jobtrail.App) -> None:
    @app.task("perm")
    def perm(ctx, p):
        raise jobtrail.PermanentError("token revoked", category="unauthorized")

    @app.task("tired", max_attempts=2, backoff_base=0)
    def tired(ctx, p):
        raise jobtrail.TransientError("busy", category="rate_limited")

    @app.task("budget", max_elapsed=5)
    def budget(ctx, p):
        raise jobtrail.TransientError("come back later", category="rate_limited", retry_after=60)

    a, b, c = app.enqueue("perm"), app.enqueue("tired"), app.enqueue("budget")
    for task in (a, b, c):
        drain(app, task.id)
    ta, tb, tc = last(app, a.id), last(app, b.id), last(app, c.id)
    assert_row(ta, "leased", "dead", "permanent_error", is_worker)
    assert ta.error_category == "unauthorized" and ta.attempt == 1
    assert_row(tb, "leased", "dead", "attempts_exhausted", is_worker)
    assert tb.error_category == "rate_limited" and tb.attempt == 2
    assert reasons(app, b.id).count("retry_scheduled") == 1
    assert_row(tc, "leased", "dead", "retry_budget_exhausted", is_worker)
    assert tc.error_category == "rate_limited" and tc.attempt == 1
    for task in (a, b, c):
        got = app.get(task.id)
        assert got.state == "dead" and got.finished_at is not None
        assert got.lease_owner is None


def edge_7(store, app: jobtrail.App) -> None:
    ran: list[int] = []
    app.task("k", lease_seconds=0.2)(lambda ctx, p: ran.append(ctx.attempt))
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    expires = app.get(task.id).lease_expires_at
    moved = sweep_until_moved(app, task.id)
    assert moved == {"lease_expired": 1}
    t = last(app, task.id)
    assert_row(t, "leased", "queued", "lease_expired", "sweeper")
    assert t.data.get("owner") == DEAD_OWNER and t.attempt == 1
    assert expires is not None and t.at >= expires  # never before the lease ran out
    got = app.get(task.id)
    assert got.state == "queued" and got.lease_owner is None
    assert got.run_at is not None and got.run_at <= t.at + timedelta(milliseconds=1)
    # requeued at once: a live worker runs it as attempt 2
    run(app)
    assert ran == [2]
    assert app.get(task.id).state == "succeeded"


def edge_8(store, app: jobtrail.App) -> None:
    app.task("once", reentrant=False, lease_seconds=0.2)(lambda ctx, p: None)
    app.task("last", max_attempts=1, lease_seconds=0.2)(lambda ctx, p: None)
    a, b = app.enqueue("once"), app.enqueue("last")
    claim_as_dead_worker(app, "once")
    claim_as_dead_worker(app, "last")
    sweep_until_moved(app, a.id)
    sweep_until_moved(app, b.id)
    ta, tb = last(app, a.id), last(app, b.id)
    assert_row(ta, "leased", "dead", "lease_expired_effect_uncertain", "sweeper")
    assert_row(tb, "leased", "dead", "attempts_exhausted", "sweeper")
    assert tb.attempt == 1 and tb.error_category == "timeout"
    assert app.get(a.id).state == "dead" and app.get(b.id).state == "dead"
    assert app.sweep() == {}  # nothing left to move


def edge_13(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", delay=3600)
    result = app.cancel(task.id, by="alice", note="wrong note")
    assert (result.outcome, result.state, result.reason) == (
        "cancelled",
        "cancelled",
        "cancelled_before_start",
    )
    t = last(app, task.id)
    assert_row(t, "queued", "cancelled", "cancelled_before_start", "alice")
    assert t.note == "wrong note"
    assert app.get(task.id).finished_at is not None
    run(app)  # nothing to run: a cancelled task is never claimed
    assert reasons(app, task.id) == ["enqueued", "cancelled_before_start"]


def edge_14(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    result = app.cancel(task.id, by="bob", note="stop")
    assert (result.outcome, result.state, result.reason) == (
        "cancel_requested",
        "cancel_requested",
        "cancel_requested",
    )
    t = last(app, task.id)
    assert_row(t, "leased", "cancel_requested", "cancel_requested", "bob")
    got = app.get(task.id)
    # the holder keeps its lease until it confirms
    assert got.lease_owner == DEAD_OWNER and got.lease_expires_at is not None


def _blocking(
    app: jobtrail.App, kind: str, after: Callable[[jobtrail.Context], None], **options: object
) -> tuple[threading.Event, threading.Event, list[object]]:
    started, release = threading.Event(), threading.Event()
    outcome: list[object] = []

    @app.task(kind, **options)
    def handler(ctx, p):
        started.set()
        assert release.wait(10)
        try:
            after(ctx)
        except BaseException as exc:
            outcome.append(exc)
            raise
        outcome.append("returned")

    return started, release, outcome


def _cancel_while_running(
    app: jobtrail.App, after: Callable[[jobtrail.Context], None]
) -> tuple[jobtrail.Task, list[object]]:
    started, release, outcome = _blocking(app, "k", after)
    task = app.enqueue("k")
    with background_worker(app, release):
        assert started.wait(10)
        result = app.cancel(task.id, by="carol", note="changed my mind")
        assert result.outcome == "cancel_requested"
        release.set()
    return task, outcome


def edge_15(store, app: jobtrail.App) -> None:
    task, outcome = _cancel_while_running(app, lambda ctx: ctx.check_cancelled())
    assert len(outcome) == 1 and isinstance(outcome[0], jobtrail.Cancelled)
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == ["enqueued", "claimed", "cancel_requested", "cancel_confirmed"]
    assert_row(ts[3], "cancel_requested", "cancelled", "cancel_confirmed", ts[1].actor)
    assert ts[3].attempt == 1
    got = app.get(task.id)
    assert got.state == "cancelled" and got.lease_owner is None


def edge_15_failed(store, app: jobtrail.App) -> None:
    def fail(ctx):
        raise RuntimeError("disk full")

    task, outcome = _cancel_while_running(app, fail)
    assert isinstance(outcome[0], RuntimeError)
    t = last(app, task.id)
    assert_row(t, "cancel_requested", "cancelled", "cancel_confirmed", is_worker)
    assert "disk full" in (t.error or "")  # the error is recorded


def edge_15_snooze(store, app: jobtrail.App) -> None:
    """Asking to run later after a cancel was requested does not put the task back."""

    def snooze(ctx):
        raise jobtrail.Snooze(0)

    task, outcome = _cancel_while_running(app, snooze)
    assert isinstance(outcome[0], jobtrail.Snooze)
    assert_row(last(app, task.id), "cancel_requested", "cancelled", "cancel_confirmed", is_worker)
    assert app.get(task.id).state == "cancelled"


def edge_16(store, app: jobtrail.App) -> None:
    task, outcome = _cancel_while_running(app, lambda ctx: None)
    assert outcome == ["returned"]
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == ["enqueued", "claimed", "cancel_requested", "cancel_too_late"]
    assert_row(ts[3], "cancel_requested", "succeeded", "cancel_too_late", ts[1].actor)
    assert app.get(task.id).state == "succeeded"


def edge_18(store, app: jobtrail.App) -> None:
    app.task("re", lease_seconds=0.2)(lambda ctx, p: None)
    app.task("nonre", reentrant=False, lease_seconds=0.2)(lambda ctx, p: None)
    a, b = app.enqueue("re"), app.enqueue("nonre")
    claim_as_dead_worker(app, "re")
    claim_as_dead_worker(app, "nonre")
    assert app.cancel(a.id, by="dan").outcome == "cancel_requested"
    assert app.cancel(b.id, by="dan").outcome == "cancel_requested"
    sweep_until_moved(app, a.id)
    sweep_until_moved(app, b.id)
    ta, tb = last(app, a.id), last(app, b.id)
    assert_row(ta, "cancel_requested", "cancelled", "lease_expired_cancelled", "sweeper")
    assert_row(tb, "cancel_requested", "dead", "lease_expired_effect_uncertain", "sweeper")
    assert ta.data.get("owner") == DEAD_OWNER and tb.data.get("owner") == DEAD_OWNER
    assert app.get(a.id).state == "cancelled" and app.get(b.id).state == "dead"


def edge_19(store, app: jobtrail.App) -> None:
    calls: list[int] = []

    @app.task("k", max_attempts=2, backoff_base=0)
    def k(ctx, p):
        calls.append(ctx.attempt)
        if len(calls) <= 2:
            raise jobtrail.TransientError("busy")

    task = app.enqueue("k")
    drain(app, task.id)
    assert app.get(task.id).state == "dead"
    replayed = app.replay(task.id, by="erin", note="upstream fixed")
    assert replayed.state == "queued" and replayed.attempts == 0
    assert replayed.replay_count == 1
    t = last(app, task.id)
    assert_row(t, "dead", "queued", "replayed", "erin")
    assert t.note == "upstream fixed"
    run(app)
    assert calls == [1, 2, 1]  # attempts start again from 0
    assert app.get(task.id).state == "succeeded"


def edge_22(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    queued = app.enqueue("k", delay=3600)
    forced = app.force(queued.id, "dead", by="frank", note="bad input")
    assert forced.state == "dead" and forced.finished_at is not None
    t = last(app, queued.id)
    assert_row(t, "queued", "dead", "manual_fix", "frank")
    assert t.note == "bad input"
    # leaving leased needs effects_checked; then it is allowed and releases the lease
    held = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    before = len(app.transitions(held.id))
    with pytest.raises(ValueError, match="effects_checked"):
        app.force(held.id, "queued", by="frank", note="retry it")
    assert len(app.transitions(held.id)) == before
    assert app.get(held.id).state == "leased"
    forced = app.force(
        held.id, "queued", by="frank", note="checked the platform", effects_checked=True
    )
    assert forced.state == "queued" and forced.lease_owner is None
    t = last(app, held.id)
    assert_row(t, "leased", "queued", "manual_fix", "frank")
    assert t.data.get("effects_checked") is True
    run(app)
    assert app.get(held.id).state == "succeeded"
    # a terminal state can be left only like this, audited
    back = app.force(held.id, "dead", by="frank", note="actually it was wrong")
    assert back.state == "dead"
    assert_row(last(app, held.id), "succeeded", "dead", "manual_fix", "frank")


def edge_23(store, app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx, p):
        raise jobtrail.PermanentError("bad input", category="invalid_input")

    task = app.enqueue("k")
    run(app)
    n = len(app.transitions(task.id))
    app.annotate(task.id, by="gina", note="the error was upstream's", corrects=n)
    t = last(app, task.id)
    assert_row(t, "dead", "dead", "correction", "gina")
    assert t.corrects == n and t.note == "the error was upstream's" and t.seq == n + 1
    got = app.get(task.id)
    assert got.state == "dead" and got.last_reason == "permanent_error"
    app.dismiss(task.id, by="gina", note="compliance: will not replay")
    t = last(app, task.id)
    assert_row(t, "dead", "dead", "dismissed", "gina")
    got = app.get(task.id)
    assert got.state == "dead" and got.dismissed and got.last_reason == "permanent_error"
    # a dismissed task leaves the needs-attention views: batch replay does not pick it up
    assert app.replay_dead(reason="permanent_error", by="gina", note="sweep") == []


# -- edges of receipts, effects and workflows --------------------------------------------------


def _receipt_kind(app: jobtrail.App, name: str = "submit", **options: object) -> None:
    @app.task(name, **options)  # type: ignore[arg-type]
    def submit(ctx, p):
        ctx.await_receipt(f"r-{ctx.task_id}", timeout=float(p.get("timeout", 3600)))


def edge_2(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    parent = app.enqueue_workflow("flow", [("k", 1)])
    assert parent.state == "waiting" and parent.created
    (t,) = app.transitions(parent.id)
    assert_row(t, None, "waiting", "enqueued", "caller")


def edge_9_10(store, app: jobtrail.App) -> None:
    _receipt_kind(app)
    task = app.enqueue("submit", {})
    run(app)
    got = app.get(task.id)
    assert got.state == "awaiting_receipt" and got.lease_owner is None
    assert got.receipt_id == f"r-{task.id}" and got.receipt_deadline is not None
    assert_row(last(app, task.id), "leased", "awaiting_receipt", "submitted", is_worker)
    app.confirm_receipt(receipt_id=f"r-{task.id}", by="webhook")
    assert_row(last(app, task.id), "awaiting_receipt", "succeeded", "receipt_confirmed", "webhook")


def edge_11(store, app: jobtrail.App) -> None:
    _receipt_kind(app, backoff_base=0.0)
    retried, dead = app.enqueue("submit", {"n": 1}), app.enqueue("submit", {"n": 2})
    run(app)
    app.confirm_receipt(retried.id, ok=False, category="unavailable", error="busy")
    assert_row(last(app, retried.id), "awaiting_receipt", "queued", "receipt_failed", "caller")
    app.confirm_receipt(dead.id, ok=False, category="unauthorized", error="token revoked")
    t = last(app, dead.id)
    assert_row(t, "awaiting_receipt", "dead", "receipt_failed", "caller")
    assert t.error_category == "unauthorized"


def edge_12(store, app: jobtrail.App) -> None:
    _receipt_kind(app)
    task = app.enqueue("submit", {"timeout": 0.1})
    run(app)
    _sweep_until_dead(app, task.id)
    assert_row(last(app, task.id), "awaiting_receipt", "dead", "receipt_timeout", "sweeper")


def _sweep_until_dead(app: jobtrail.App, task_id: str) -> None:
    """Receipt deadlines are swept like leases: poll until the deadline passed and it moved.
    The worker's own sweep may move it first (a loaded machine makes its run outlast the
    deadline); either is the sweeper, so the state is what is waited for."""

    def swept() -> bool:
        app.sweep()
        return state(app, task_id) == "dead"

    wait_for(swept, what="receipt_timeout")


def edge_17_and_18f(store, app: jobtrail.App) -> None:
    go = threading.Event()
    submitted = threading.Event()

    @app.task("late")
    def late(ctx, p):
        ctx.effect("submit", lambda key: {"id": key})  # past the point of no return
        submitted.set()
        while not ctx.cancel_requested:
            ctx.check_cancelled()  # does not raise once an effect is confirmed
            go.wait(0.01)
        if p.get("fail"):
            raise RuntimeError("failed after the submission")
        ctx.await_receipt("r-late", timeout=60)

    for payload, target, reason in (
        ({}, "awaiting_receipt", "cancel_too_late"),
        ({"fail": True}, "dead", "failed_after_cancel"),
    ):
        task = app.enqueue("late", payload)
        submitted.clear()
        with background_worker(app, go):
            # cancel only once the effect is confirmed (a cancel before it is edge 14/15)
            assert submitted.wait(10), "the handler never confirmed its effect"
            assert app.cancel(task.id, by="ann").outcome == "cancel_requested"
            wait_for(lambda task=task, target=target: state(app, task.id) == target, what=target)
        assert_row(last(app, task.id), "cancel_requested", target, reason, is_worker)


def edge_20(store, app: jobtrail.App) -> None:
    app.task("ok")(lambda ctx, p: None)

    @app.task("boom", max_attempts=1)
    def boom(ctx, p):
        raise jobtrail.PermanentError("no")

    done = app.enqueue_workflow("flow", [("ok", 1), ("ok", 2)])
    failed = app.enqueue_workflow("flow", [("ok", 3), ("boom", 4)])
    stopped = app.enqueue_workflow("flow", [("ok", 5)], sequential=True)
    app.cancel(stopped.id, by="ann")
    run(app)
    assert_row(last(app, done.id), "waiting", "succeeded", "children_succeeded", "system")
    assert_row(last(app, failed.id), "waiting", "dead", "child_dead", "system")
    assert_row(last(app, stopped.id), "waiting", "cancelled", "children_cancelled", "system")


def edge_21(store, app: jobtrail.App) -> None:
    attempts: list[int] = []

    @app.task("flaky", max_attempts=1)
    def flaky(ctx, p):
        attempts.append(1)
        if len(attempts) == 1:
            raise jobtrail.PermanentError("first time")

    parent = app.enqueue_workflow("flow", [("flaky", 1)])
    run(app)
    assert state(app, parent.id) == "dead"
    app.replay(parent.id, by="ann", note="fixed upstream")
    assert_row(last(app, parent.id), "dead", "waiting", "replayed", "ann")
    (child,) = app.children(parent.id)
    assert_row(last(app, child.id), "dead", "queued", "replayed", "ann")
    run(app)
    assert state(app, parent.id) == "succeeded"


def edge_23_receipts(store, app: jobtrail.App) -> None:
    _receipt_kind(app, check_receipt=lambda receipt_id: None)
    task = app.enqueue("submit", {"timeout": 0.1})
    run(app)
    assert app.cancel(task.id, by="ann").outcome == "too_late"
    assert_row(
        last(app, task.id),
        "awaiting_receipt",
        "awaiting_receipt",
        "cancel_refused_submitted",
        "ann",
    )
    _sweep_until_dead(app, task.id)
    rows = app.transitions(task.id)
    assert_row(rows[-2], "awaiting_receipt", "awaiting_receipt", "receipt_requeried", "sweeper")
    assert_row(rows[-1], "awaiting_receipt", "dead", "receipt_timeout", "sweeper")


# -- durable handlers: a handler suspends and resumes later ------------------------------------
def _durable_kinds(app: jobtrail.App) -> None:
    app.task("kid")(lambda ctx, p: p)

    @app.task("nap")
    def nap(ctx, p):
        ctx.sleep("nap", p.get("seconds", 3600))

    @app.task("await_event")
    def await_event(ctx, p):
        return ctx.wait_for_event(p["key"], timeout=p.get("timeout"))

    @app.task("spawner")
    def spawner(ctx, p):
        kids = [ctx.spawn(f"k{i}", "kid", i, delay=p.get("delay", 0)) for i in range(2)]
        return ctx.join(kids)


def edge_24(store, app: jobtrail.App) -> None:
    _durable_kinds(app)
    task = app.enqueue("nap", {})
    run(app)
    t = last(app, task.id)
    assert_row(t, "leased", "queued", "sleeping", is_worker)
    got = app.get(task.id)
    assert got.lease_owner is None and got.attempts == 0 and got.run_at is not None
    assert got.run_at > db_now(app) + timedelta(seconds=3000)


def edge_25_26(store, app: jobtrail.App) -> None:
    _durable_kinds(app)
    task = app.enqueue("await_event", {"key": "go"})
    run(app)
    assert_row(last(app, task.id), "leased", "waiting", "waiting_for_event", is_worker)
    assert app.send_event("go", 1) == 1
    assert_row(last(app, task.id), "waiting", "queued", "event_received", "caller")
    drain(app, task.id)
    assert app.get(task.id).result == 1


def edge_25_27(store, app: jobtrail.App) -> None:
    _durable_kinds(app)
    task = app.enqueue("spawner", {"delay": 0.3})
    run(app)
    assert_row(app.transitions(task.id)[2], "leased", "waiting", "waiting_for_children", is_worker)
    drain(app, task.id)
    rows = app.transitions(task.id)
    assert_row(rows[3], "waiting", "queued", "children_finished", "system")
    assert app.get(task.id).result == [0, 1]


def edge_28(store, app: jobtrail.App) -> None:
    _durable_kinds(app)
    task = app.enqueue("await_event", {"key": "never", "timeout": 0.1})
    run(app)

    def swept() -> bool:
        app.sweep()
        return app.get(task.id).last_reason != "waiting_for_event"

    wait_for(swept, what="wait_timed_out")
    assert_row(app.transitions(task.id)[3], "waiting", "queued", "wait_timed_out", "sweeper")
    app.cancel(task.id, by="ann")


def edge_29(store, app: jobtrail.App) -> None:
    _durable_kinds(app)
    asleep = app.enqueue("nap", {})
    waiting = app.enqueue("await_event", {"key": "k"})
    run(app)
    for task, source in ((asleep, "queued"), (waiting, "waiting")):
        assert app.cancel(task.id, by="ann").reason == "cancelled_while_suspended"
        assert_row(last(app, task.id), source, "cancelled", "cancelled_while_suspended", "ann")


def edge_30(store, app: jobtrail.App) -> None:
    @app.task("charged")
    def charged(ctx, p):
        ctx.effect("charge", lambda key: key)
        app.cancel(ctx.task_id, by="ann")
        ctx.sleep("then", 3600)

    task = app.enqueue("charged")
    run(app)
    assert_row(
        last(app, task.id), "cancel_requested", "cancelled", "cancelled_after_effects", is_worker
    )


def edge_23d(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k", {"n": 1}, debounce_key="d", debounce=3600)
    again = app.enqueue("k", {"n": 2}, debounce_key="d", debounce=3600)
    assert (again.id, again.created, again.debounced) == (task.id, False, True)
    t = last(app, task.id)
    assert_row(t, "queued", "queued", "debounced", "caller")
    assert app.get(task.id).state == "queued"


def edge_13e(store, app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: pytest.fail("an expired task ran"))
    task = app.enqueue("k", expires_in=0.05)
    wait_for(lambda: app.db_now() > task.expires_at, what="the expiry")  # type: ignore[operator]
    run(app)
    t = last(app, task.id)
    assert_row(t, "queued", "cancelled", "expired", "sweeper")
    assert reasons(app, task.id) == ["enqueued", "expired"]


DRIVERS: dict[str, list[Callable[..., None]]] = {
    "1": [edge_1],
    "3": [edge_3, edge_3_lease],
    "4": [edge_4],
    "5": [edge_5],
    "5s": [edge_5s, edge_5s_delay],
    "6": [edge_6],
    "7": [edge_7],
    "8": [edge_8],
    "13": [edge_13],
    "14": [edge_14],
    "15": [edge_15, edge_15_failed, edge_15_snooze],
    "16": [edge_16],
    "18": [edge_18],
    "19": [edge_19],
    "22": [edge_22],
    "23": [edge_23, edge_23_receipts],
    "2": [edge_2],
    "9": [edge_9_10],
    "10": [edge_9_10],
    "11": [edge_11],
    "12": [edge_12],
    "17": [edge_17_and_18f],
    "18f": [edge_17_and_18f],
    "20": [edge_20],
    "21": [edge_21],
    "24": [edge_24],
    "25": [edge_25_26, edge_25_27],
    "26": [edge_25_26],
    "27": [edge_25_27],
    "28": [edge_28],
    "29": [edge_29],
    "30": [edge_30],
    "23d": [edge_23d],
    "13e": [edge_13e],
}

CASES = [
    pytest.param(number, fn, id=f"edge-{number}-{fn.__name__}")
    for number, fns in DRIVERS.items()
    for fn in fns
]


@pytest.mark.parametrize(("number", "driver"), CASES)
def test_edge(store, app: jobtrail.App, number: str, driver: Callable[..., None]) -> None:
    assert any(e.number == number for e in EDGES)
    driver(store, app)


def test_edge_3_claims_only_due_tasks(app: jobtrail.App) -> None:
    ran: list[str] = []
    app.task("k")(lambda ctx, p: ran.append(ctx.task_id))
    due = app.enqueue("k")
    later = app.enqueue("k", delay=60)
    run(app)
    assert ran == [due.id]
    assert app.get(later.id).state == "queued"
    assert app.get(due.id).state == "succeeded"


# -- leases in a live worker ------------------------------------------------------------------


def test_running_handler_keeps_its_lease_alive(app: jobtrail.App) -> None:
    started, release = threading.Event(), threading.Event()

    # a lease of 1 s, renewed every third of it: short enough for the test to see several
    # renewals, long enough that a loaded machine's scheduling delays (0.3 s seen) do not
    # let it lapse
    @app.task("k", lease_seconds=1.0)
    def k(ctx, p):
        started.set()
        assert release.wait(15)

    task = app.enqueue("k")
    with background_worker(app, release):
        assert started.wait(10)
        claimed = app.transitions(task.id)[1]
        # three lease lengths later, with sweeps all along, it is still held by the same attempt
        swept: dict[str, int] = {}

        def three_leases_later() -> bool:
            swept.update(app.sweep())
            return db_now(app) > claimed.at + timedelta(seconds=3.0)

        wait_for(three_leases_later, timeout=10, what="three lease lengths to pass")
        assert swept == {}
        got = app.get(task.id)
        assert got.state == "leased" and got.attempts == 1
        assert got.lease_expires_at is not None and got.lease_expires_at > db_now(app)
        release.set()
    assert reasons(app, task.id) == ["enqueued", "claimed", "completed"]


def test_ctx_extend_renews_for_the_given_length(app: jobtrail.App) -> None:
    seen: list[object] = []

    @app.task("k", lease_seconds=5)
    def k(ctx, p):
        ctx.extend(120)
        got = app.get(ctx.task_id)
        seen.append((got.lease_expires_at - db_now(app)).total_seconds())
        with pytest.raises(ValueError):
            ctx.extend(0)

    task = app.enqueue("k")
    run(app)
    assert len(seen) == 1 and 115 < seen[0] <= 120
    assert reasons(app, task.id) == ["enqueued", "claimed", "completed"]


def test_workers_run_the_sweeper(app: jobtrail.App) -> None:
    ran: list[int] = []
    app.task("k", lease_seconds=0.2)(lambda ctx, p: ran.append(ctx.attempt))
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    drain(app, task.id)  # no explicit app.sweep(): the worker's own sweeper requeues it
    assert ran == [2]
    assert reasons(app, task.id) == ["enqueued", "claimed", "lease_expired", "claimed", "completed"]


def test_workers_take_only_their_queues(app: jobtrail.App) -> None:
    ran: list[str] = []
    app.task("a")(lambda ctx, p: ran.append("a"))
    app.task("b", queue="slow")(lambda ctx, p: ran.append(ctx.task.queue))
    a, b = app.enqueue("a"), app.enqueue("b")
    moved = app.enqueue("a", queue="slow")
    assert (a.queue, b.queue, moved.queue) == ("default", "slow", "slow")
    run(app, queues=["slow"])
    assert sorted(ran) == ["a", "slow"]
    assert app.get(a.id).state == "queued"
    assert app.get(b.id).state == "succeeded" and app.get(moved.id).state == "succeeded"
    run(app)
    assert app.get(a.id).state == "succeeded"


def test_concurrent_workers_claim_each_task_once(store, app: jobtrail.App) -> None:
    runs: list[str] = []
    lock = threading.Lock()

    def handler(ctx, p):
        with lock:
            runs.append(ctx.task_id)

    other = store.app()
    for a in (app, other):
        a.task("k")(handler)
    ids = [t.id for t in app.enqueue_many([{"kind": "k", "payload": i} for i in range(40)])]
    with background_worker(app, concurrency=3), background_worker(other, concurrency=3):
        pass
    for a in (app, other):  # whatever a racing burst worker left behind
        run(a)
    assert sorted(runs) == sorted(ids)
    for task_id in ids:
        assert reasons(app, task_id) == ["enqueued", "claimed", "completed"]
