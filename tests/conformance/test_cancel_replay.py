"""Repeated cancels, two-phase cancel, replay, batch replay by reason and
time range, and the audited operator actions."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

import jobtrail
from jobtrail.model.models import iso

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
    wait_for,
)


def _kinds(app: jobtrail.App) -> None:
    app.task("ok")(lambda ctx, p: None)

    @app.task("boom")
    def boom(ctx, p):
        raise jobtrail.PermanentError("bad input", category="invalid_input")

    @app.task("tired", max_attempts=1)
    def tired(ctx, p):
        raise jobtrail.TransientError("busy", category="unavailable")


# -- cancel ----------------------------------------------------------------------------------


def test_repeated_cancels_are_idempotent_and_append_nothing(app: jobtrail.App) -> None:
    _kinds(app)
    queued = app.enqueue("ok", delay=3600)
    done, dead = app.enqueue("ok"), app.enqueue("boom")
    run(app)
    first = app.cancel(queued.id, by="ann", note="first")
    assert (first.outcome, first.state, first.reason) == (
        "cancelled",
        "cancelled",
        "cancelled_before_start",
    )
    expected = {
        queued.id: ("cancelled", "cancelled_before_start"),
        done.id: ("succeeded", "completed"),
        dead.id: ("dead", "permanent_error"),
    }
    for task_id, (state, reason) in expected.items():
        before = app.transitions(task_id)
        for _ in range(2):
            again = app.cancel(task_id, by="ann", note="again")
            assert (again.task_id, again.outcome, again.state, again.reason) == (
                task_id,
                "already_terminal",
                state,
                reason,
            )
        assert app.transitions(task_id) == before


def test_cancelling_a_cancel_requested_task_again_appends_nothing(app: jobtrail.App) -> None:
    _kinds(app)
    task = app.enqueue("ok")
    claim_as_dead_worker(app, "ok")
    assert app.cancel(task.id, by="ann").outcome == "cancel_requested"
    before = app.transitions(task.id)
    again = app.cancel(task.id, by="bob", note="hurry")
    assert (again.outcome, again.state, again.reason) == (
        "cancel_requested",
        "cancel_requested",
        "cancel_requested",
    )
    assert app.transitions(task.id) == before


def test_cancel_of_a_running_task_is_confirmed_at_the_next_boundary(app: jobtrail.App) -> None:
    started = threading.Event()
    checks: list[str] = []

    @app.task("k")
    def k(ctx, p):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # cooperative: checks between units of work
            ctx.check_cancelled()
            checks.append("passed")
            started.set()
            time.sleep(0.01)
        raise AssertionError("never cancelled")

    task = app.enqueue("k")
    with background_worker(app):
        assert started.wait(10)
        result = app.cancel(task.id, by="ann", note="wrong note")
        assert (result.outcome, result.state) == ("cancel_requested", "cancel_requested")
        wait_for(lambda: app.get(task.id).state == "cancelled", what="the cancel to be confirmed")
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == ["enqueued", "claimed", "cancel_requested", "cancel_confirmed"]
    assert_row(ts[2], "leased", "cancel_requested", "cancel_requested", "ann")
    assert ts[2].note == "wrong note"
    assert_row(ts[3], "cancel_requested", "cancelled", "cancel_confirmed", ts[1].actor)
    assert len(checks) >= 1  # it was running (and checking) before the cancel came
    got = app.get(task.id)
    assert got.lease_owner is None and got.finished_at is not None


def test_a_running_handler_sees_the_cancel_request(app: jobtrail.App) -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    @app.task("k")
    def k(ctx, p):
        seen.append(ctx.cancel_requested)
        started.set()
        assert release.wait(10)
        try:
            ctx.check_cancelled()
        finally:
            seen.append(ctx.cancel_requested)

    task = app.enqueue("k")
    with background_worker(app, release):
        assert started.wait(10)
        app.cancel(task.id, by="ann")
        release.set()
    assert seen == [False, True]
    assert app.get(task.id).state == "cancelled"


def test_cancel_is_not_re_enqueueing(app: jobtrail.App) -> None:
    _kinds(app)
    old = app.enqueue("ok", {"note": 1}, idempotency_key="publish-1", delay=60)
    app.cancel(old.id, by="ann")
    # the same intent is still the old, cancelled task; publishing again is a new task
    same = app.enqueue("ok", {"note": 1}, idempotency_key="publish-1")
    assert (same.id, same.created, same.state) == (old.id, False, "cancelled")
    new = app.enqueue("ok", {"note": 1}, idempotency_key="publish-1-again")
    assert new.id != old.id and new.created
    run(app)
    assert app.get(new.id).state == "succeeded"
    assert reasons(app, old.id) == ["enqueued", "cancelled_before_start"]


# -- replay ----------------------------------------------------------------------------------


def test_replay_resets_attempts_and_counts_replays(app: jobtrail.App) -> None:
    runs: list[int] = []

    @app.task("k", max_attempts=2, backoff_base=0)
    def k(ctx, p):
        runs.append(ctx.attempt)
        raise jobtrail.TransientError("still down")

    task = app.enqueue("k")
    drain(app, task.id)
    for n in (1, 2):
        got = app.get(task.id)
        assert (got.state, got.attempts, got.replay_count) == ("dead", 2, n - 1)
        replayed = app.replay(task.id, by="ops", note=f"try #{n}")
        assert (replayed.state, replayed.attempts, replayed.replay_count) == ("queued", 0, n)
        t = last(app, task.id)
        assert_row(t, "dead", "queued", "replayed", "ops")
        assert (t.note, t.attempt) == (f"try #{n}", 0)
        drain(app, task.id)
    assert runs == [1, 2, 1, 2, 1, 2]
    assert app.get(task.id).last_reason == "attempts_exhausted"


def test_replay_requires_by_and_note(app: jobtrail.App) -> None:
    _kinds(app)
    task = app.enqueue("boom")
    run(app)
    before = app.transitions(task.id)
    with pytest.raises(TypeError):
        app.replay(task.id, by="ops")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        app.replay(task.id, note="why")  # type: ignore[call-arg]
    for by, note in (("", "why"), ("ops", ""), (" ", "why"), ("ops", " \n")):
        with pytest.raises(ValueError, match="by|note"):
            app.replay(task.id, by=by, note=note)
    assert app.transitions(task.id) == before
    assert app.get(task.id).state == "dead"


def test_replay_restarts_the_retry_budget(app: jobtrail.App) -> None:
    outcomes: list[str] = []

    # A retry_after of 2 s inside a 3 s budget: the second retry would overrun it. The margin
    # (1 s) keeps the test honest on a loaded machine: the replayed attempt must fail within
    # 1 s of the replay for its retry to fit the fresh budget.
    @app.task("k", max_elapsed=3.0, max_attempts=10)
    def k(ctx, p):
        outcomes.append(f"attempt {ctx.attempt}")
        raise jobtrail.TransientError("busy", retry_after=2.0)

    task = app.enqueue("k")
    drain(app, task.id, timeout=20.0)
    assert app.get(task.id).last_reason == "retry_budget_exhausted"
    enqueued_at = app.transitions(task.id)[0].at
    wait_for(
        lambda: db_now(app) > enqueued_at + timedelta(seconds=3.5),
        timeout=10.0,
        what="the first budget to be long gone",
    )
    app.replay(task.id, by="ops", note="fresh budget")
    run(app)
    after = [t.reason for t in app.transitions(task.id)]
    i = after.index("replayed")
    assert after[i + 1 : i + 3] == ["claimed", "retry_scheduled"]


def _dead_at(app: jobtrail.App, kind: str) -> tuple[str, datetime]:
    """Enqueue and run one task to ``dead``; return its id and the time it died. Waits until
    the database clock is past that time, so the next death is strictly later."""
    task = app.enqueue(kind)
    run(app)
    t = last(app, task.id)
    assert t.to_state == "dead"
    wait_for(lambda: db_now(app) > t.at + timedelta(milliseconds=3), what="clock to move")
    return task.id, t.at


def _between(earlier: datetime, later: datetime) -> datetime:
    return earlier + (later - earlier) / 2


def test_replay_dead_by_reason_and_time_range(app: jobtrail.App) -> None:
    _kinds(app)
    a, at_a = _dead_at(app, "boom")
    b, at_b = _dead_at(app, "boom")
    c, at_c = _dead_at(app, "tired")
    d, at_d = _dead_at(app, "boom")
    e, _ = _dead_at(app, "boom")
    app.dismiss(e, by="ops", note="will not replay")
    kw = {"by": "ops", "note": "upstream fixed"}
    # by reason and time range: b and c died in [a|b, c|d); only b by permanent_error
    assert app.replay_dead(
        reason="permanent_error", since=_between(at_a, at_b), until=_between(at_c, at_d), **kw
    ) == [(b, "queued")]
    # ISO 8601 strings work (with or without Z, any offset)
    since = iso(at_a - timedelta(milliseconds=1))
    until = _between(at_a, at_b).astimezone(timezone(timedelta(hours=8))).isoformat()
    assert app.replay_dead(reason="permanent_error", since=since, until=until, **kw) == [
        (a, "queued")
    ]
    # another reason, by kind
    assert app.replay_dead(kind="tired", **kw) == [(c, "queued")]
    assert app.replay_dead(reason="permanent_error", until=_between(at_c, at_d), **kw) == []
    assert app.replay_dead(reason="permanent_error", **kw) == [(d, "queued")]
    # nothing dead is left but the dismissed task, which batch replay never touches
    assert app.replay_dead(**kw) == []
    for task_id in (a, b, c, d):
        t = last(app, task_id)
        assert_row(t, "dead", "queued", "replayed", "ops")
        assert t.note == "upstream fixed"
        assert app.get(task_id).replay_count == 1
    assert app.get(e).state == "dead" and app.get(e).replay_count == 0


def test_replay_dead_since_is_inclusive_and_until_exclusive(app: jobtrail.App) -> None:
    """The exact times the API reports can be handed back as bounds — on SQLite too, where
    times are stored as REAL epoch seconds."""
    _kinds(app)
    ids = [app.enqueue("boom").id for _ in range(30)]
    run(app)
    died = {task_id: app.get(task_id).finished_at for task_id in ids}
    assert all(last(app, i).at == died[i] for i in ids)
    times = sorted(set(died.values()))
    assert len(times) >= 5
    kw = {"reason": "permanent_error", "by": "ops", "note": "n"}
    # exactly the times the API reported: [t_i, t_i+1) holds the tasks that died at t_i
    for i, since in enumerate(times):
        until = times[i + 1] if i + 1 < len(times) else None
        got = app.replay_dead(since=since, until=until, **kw)
        assert sorted(got) == sorted((t, "queued") for t, at in died.items() if at == since)


def test_replay_dead_validates_its_input(app: jobtrail.App) -> None:
    _kinds(app)
    task_id, _ = _dead_at(app, "boom")
    bad = [
        {"reason": "no_such_reason"},
        {"since": datetime(2020, 1, 1)},  # naive
        {"until": "yesterday-ish"},
        {"per_second": 0},
        {"limit": 0},
    ]
    for args in bad:
        with pytest.raises(ValueError):
            app.replay_dead(by="ops", note="n", **args)
    with pytest.raises(ValueError):
        app.replay_dead(by="", note="n")
    assert app.get(task_id).state == "dead"


def test_replay_dead_limit_takes_the_oldest_first(app: jobtrail.App) -> None:
    _kinds(app)
    ids = [_dead_at(app, "boom")[0] for _ in range(3)]
    assert app.replay_dead(reason="permanent_error", limit=2, by="ops", note="n") == [
        (ids[0], "queued"),
        (ids[1], "queued"),
    ]
    assert app.get(ids[2]).state == "dead"


def test_replay_dead_paces_itself(app: jobtrail.App) -> None:
    _kinds(app)
    ids = [app.enqueue("boom").id for _ in range(4)]
    run(app)
    per_second = 20.0
    started = time.monotonic()
    out = app.replay_dead(reason="permanent_error", per_second=per_second, by="ops", note="n")
    took = time.monotonic() - started
    assert sorted(out) == sorted((i, "queued") for i in ids)
    assert took >= 3 / per_second - 0.01
    times = sorted(last(app, i).at for i in ids)
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    # Pacing spaces the replays' starts; each transition's time is its transaction's start on
    # the database, which a loaded machine can delay by a few ms: check the span and that no
    # two replays came in a burst.
    assert (times[-1] - times[0]).total_seconds() >= 3 / per_second - 0.02, gaps
    assert min(gaps) >= 0.5 / per_second, gaps


# -- the audited operator actions ------------------------------------------------------------


def test_operator_actions_are_on_the_timeline_with_by_and_note(app: jobtrail.App) -> None:
    _kinds(app)
    task = app.enqueue("boom")
    run(app)
    app.annotate(task.id, by="ann", note="the platform was down", corrects=3)
    app.force(task.id, "succeeded", by="bob", note="published by hand")
    app.force(task.id, "dead", by="bob", note="it was not published after all")
    app.dismiss(task.id, by="cy", note="duplicate of another note")
    ts = app.transitions(task.id)
    tail = [(t.reason, t.from_state, t.to_state, t.actor, t.note, t.corrects) for t in ts[3:]]
    assert tail == [
        ("correction", "dead", "dead", "ann", "the platform was down", 3),
        ("manual_fix", "dead", "succeeded", "bob", "published by hand", None),
        ("manual_fix", "succeeded", "dead", "bob", "it was not published after all", None),
        ("dismissed", "dead", "dead", "cy", "duplicate of another note", None),
    ]
    assert [t.seq for t in ts] == list(range(1, len(ts) + 1))
    text = app.explain(task.id)
    for needle in (
        "ann",
        "the platform was down",
        "bob",
        "published by hand",
        "cy",
        "duplicate of another note",
        "#3",
    ):
        assert needle in text


def test_force_to_queued_runs_the_task_again(app: jobtrail.App) -> None:
    _kinds(app)
    task = app.enqueue("ok")
    claim_as_dead_worker(app, "ok")
    assert app.get(task.id).lease_owner == DEAD_OWNER
    app.force(
        task.id,
        "queued",
        by="ops",
        note="the holder is gone; nothing was sent",
        effects_checked=True,
    )
    got = app.get(task.id)
    assert got.state == "queued" and got.run_at is not None
    assert got.run_at <= db_now(app)  # due now
    run(app)
    ts = app.transitions(task.id)
    assert [t.reason for t in ts] == ["enqueued", "claimed", "manual_fix", "claimed", "completed"]
    assert is_worker(ts[3].actor) and ts[3].attempt == 2


def test_times_are_aware_utc(app: jobtrail.App) -> None:
    _kinds(app)
    task = app.enqueue("ok")
    run(app)
    got = app.get(task.id)
    for value in (
        got.created_at,
        got.updated_at,
        got.run_at,
        got.finished_at,
        *(t.at for t in app.transitions(task.id)),
    ):
        assert value is not None and value.utcoffset() == timedelta(0)
    assert abs(got.created_at - datetime.now(UTC)) < timedelta(minutes=5)
