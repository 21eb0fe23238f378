"""Moves that are not edges are refused — by the API, by the one
transition path, and by the database itself (append-only log, CHECK constraints)."""

from __future__ import annotations

import itertools
import sqlite3

import psycopg
import pytest

import jobtrail
from jobtrail.core import transition
from jobtrail.core.context import Attempt, Context
from jobtrail.model.machine import EDGES, Reason, State
from jobtrail.store.base import Move

from .support import (
    DEAD_OWNER,
    claim_as_dead_worker,
    last,
    raw,
    run,
    sweep_until_moved,
    wait_lease_expired,
)

DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)
SOURCES: list[State | None] = [None, *State]


def _spec_allowed(source: State | None, target: State, reason: Reason, *, paired: bool) -> bool:
    """Whether an edge allows the move. ``paired``: rows that list several targets and as many
    reasons pair them in order (edge 18: cancelled by lease_expired_cancelled, dead by
    lease_expired_effect_uncertain; edge 20: one reason per target)."""
    pairs = {
        "18": [
            (State.CANCELLED, Reason.LEASE_EXPIRED_CANCELLED),
            (State.DEAD, Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN),
        ],
        "20": [
            (State.SUCCEEDED, Reason.CHILDREN_SUCCEEDED),
            (State.CANCELLED, Reason.CHILDREN_CANCELLED),
            (State.DEAD, Reason.CHILD_DEAD),
        ],
    }
    for edge in EDGES:
        sources = edge.sources or frozenset({None})
        if source not in sources or target not in edge.targets or reason not in edge.reasons:
            continue
        if edge.annotation and source != target:
            continue
        if paired and edge.number in pairs and (target, reason) not in pairs[edge.number]:
            continue
        return True
    return False


def _refused(source: State | None, target: State, reason: Reason) -> bool:
    try:
        transition.check("t1", source, target, reason.value)
    except jobtrail.IllegalTransition:
        return True
    return False


def test_check_refuses_every_move_outside_the_table() -> None:
    combos = list(itertools.product(SOURCES, State, Reason))
    wrong = [
        (s, t, r) for s, t, r in combos if _refused(s, t, r) == _spec_allowed(s, t, r, paired=True)
    ]
    assert wrong == []
    # the table is not permissive: most combinations are refused
    refused = sum(_refused(s, t, r) for s, t, r in combos)
    assert refused > 0.9 * len(combos)
    # the rows that list several targets pair each target with its own reason
    assert _refused(State.WAITING, State.SUCCEEDED, Reason.CHILD_DEAD)
    assert _refused(State.WAITING, State.DEAD, Reason.CHILDREN_SUCCEEDED)
    assert _refused(State.CANCEL_REQUESTED, State.DEAD, Reason.LEASE_EXPIRED_CANCELLED)
    assert not _refused(State.CANCEL_REQUESTED, State.DEAD, Reason.LEASE_EXPIRED_EFFECT_UNCERTAIN)


def test_check_names_the_current_state_and_rejects_unknown_codes() -> None:
    with pytest.raises(jobtrail.IllegalTransition, match="succeeded") as info:
        transition.check("42", State.SUCCEEDED, State.QUEUED, "retry_scheduled")
    assert info.value.current_state == State.SUCCEEDED
    with pytest.raises(ValueError, match="no_such_reason"):
        transition.check("42", State.QUEUED, State.LEASED, "no_such_reason")
    # window reasons are recorded on cron windows, never on a task
    for reason in (Reason.WINDOW_SKIPPED_CATCH_UP_BOUND, Reason.WINDOW_SKIPPED_PAUSED):
        for s, t in itertools.product(SOURCES, State):
            assert _refused(s, t, reason)


def _dead_task(app: jobtrail.App) -> jobtrail.Task:
    @app.task("doomed")
    def doomed(ctx, p):
        raise jobtrail.PermanentError("no", category="not_found")

    task = app.enqueue("doomed")
    run(app)
    assert app.get(task.id).state == "dead"
    return task


@pytest.mark.parametrize("where", ["queued", "succeeded"])
def test_replay_of_a_live_or_finished_task_is_refused(app: jobtrail.App, where: str) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    if where == "succeeded":
        run(app)
    before = app.transitions(task.id)
    with pytest.raises(jobtrail.IllegalTransition, match=where) as info:
        app.replay(task.id, by="op", note="again")
    assert info.value.current_state == where
    assert app.transitions(task.id) == before
    assert app.get(task.id).replay_count == 0


def test_dismiss_of_a_task_that_is_not_dead_is_refused(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    done = app.enqueue("k")
    run(app)
    cancelled = app.enqueue("k", delay=3600)
    app.cancel(cancelled.id, by="op")
    leased = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    queued = app.enqueue("k", delay=3600)
    for task, where in (
        (queued, "queued"),
        (leased, "leased"),
        (done, "succeeded"),
        (cancelled, "cancelled"),
    ):
        assert app.get(task.id).state == where
        before = app.transitions(task.id)
        with pytest.raises(jobtrail.IllegalTransition, match=where) as info:
            app.dismiss(task.id, by="op", note="never mind")
        assert info.value.current_state == where
        assert app.transitions(task.id) == before
        assert not app.get(task.id).dismissed


def test_force_into_a_worker_state_is_refused(app: jobtrail.App) -> None:
    task = _dead_task(app)
    before = app.transitions(task.id)
    for target in ("leased", "cancel_requested", "awaiting_receipt"):
        with pytest.raises(ValueError, match=target):
            app.force(task.id, target, by="op", note="try")
    assert app.transitions(task.id) == before
    assert app.get(task.id).state == "dead"


@pytest.mark.parametrize("held", ["leased", "cancel_requested"])
def test_force_out_of_a_held_state_needs_effects_checked(app: jobtrail.App, held: str) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    if held == "cancel_requested":
        app.cancel(task.id, by="op")
    before = app.transitions(task.id)
    for target in ("queued", "dead", "succeeded", "cancelled"):
        with pytest.raises(ValueError, match="effects_checked"):
            app.force(task.id, target, by="op", note="just do it")
    assert app.transitions(task.id) == before
    got = app.get(task.id)
    assert got.state == held and got.lease_owner == DEAD_OWNER


def test_force_and_operator_actions_need_by_and_note(app: jobtrail.App) -> None:
    task = _dead_task(app)
    before = app.transitions(task.id)
    for by, note in (("", "n"), ("op", ""), ("  ", "n"), ("op", "   ")):
        with pytest.raises(ValueError):
            app.force(task.id, "queued", by=by, note=note)
        with pytest.raises(ValueError):
            app.replay(task.id, by=by, note=note)
        with pytest.raises(ValueError):
            app.annotate(task.id, by=by, note=note)
        with pytest.raises(ValueError):
            app.dismiss(task.id, by=by, note=note)
    with pytest.raises(ValueError):
        app.force(task.id, "no_such_state", by="op", note="n")
    with pytest.raises(ValueError):
        app.cancel(task.id, by="")
    assert app.transitions(task.id) == before


def test_annotate_corrects_must_name_an_existing_transition(app: jobtrail.App) -> None:
    task = _dead_task(app)
    before = app.transitions(task.id)
    for bad in (0, len(before) + 1, -1):
        with pytest.raises(ValueError, match="corrects"):
            app.annotate(task.id, by="op", note="fix", corrects=bad)
    assert app.transitions(task.id) == before


def test_late_worker_write_is_refused_once_the_lease_expired(app: jobtrail.App) -> None:
    """Every worker write requires an unexpired lease, even before any sweeper ran."""
    app.task("k", lease_seconds=0.2)(lambda ctx, p: None)
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    wait_lease_expired(app, task.id)
    before = app.transitions(task.id)
    with app._driver.transaction() as tx:
        moved = transition.apply(
            app._driver,
            tx,
            Move(
                task_id=int(task.id),
                from_state=State.LEASED,
                to_state=State.SUCCEEDED,
                reason="completed",
                actor=DEAD_OWNER,
                owner=DEAD_OWNER,
                attempt=1,
            ),
        )
    assert moved is None
    assert app.transitions(task.id) == before
    assert app.get(task.id).state == "leased"
    # and a renewal is refused too: the old holder cannot bring its lease back
    with app._driver.transaction() as tx:
        assert app._driver.lease_extend(tx, int(task.id), DEAD_OWNER, 1, 30.0) is None


def test_stale_attempt_cannot_write_over_a_newer_one(app: jobtrail.App) -> None:
    """The attempt number is the fencing token."""
    app.task("k", lease_seconds=0.2)(lambda ctx, p: None)
    task = app.enqueue("k")
    claim_as_dead_worker(app, "k")
    sweep_until_moved(app, task.id)
    claim_as_dead_worker(app, "k")  # the same owner id takes attempt 2
    assert app.get(task.id).attempts == 2
    before = app.transitions(task.id)
    with app._driver.transaction() as tx:
        moved = transition.apply(
            app._driver,
            tx,
            Move(
                task_id=int(task.id),
                from_state=State.LEASED,
                to_state=State.SUCCEEDED,
                reason="completed",
                actor=DEAD_OWNER,
                owner=DEAD_OWNER,
                attempt=1,
            ),
        )
    assert moved is None
    assert app.transitions(task.id) == before


def test_ctx_raises_lease_lost_after_the_sweeper_took_the_task(app: jobtrail.App) -> None:
    app.task("k", lease_seconds=1.0)(lambda ctx, p: None)
    task = app.enqueue("k")
    (row,) = claim_as_dead_worker(app, "k")
    ctx = Context(
        Attempt(
            task=app._task_from_row(row),
            spec=app._kinds["k"],
            owner=DEAD_OWNER,
            number=1,
            lease_seconds=1.0,
        ),
        app._driver,
    )
    ctx.check_cancelled()  # still held: no exception (0.2 s once ran out under CI's load)
    sweep_until_moved(app, task.id)
    before = app.transitions(task.id)
    with pytest.raises(jobtrail.LeaseLost):
        ctx.check_cancelled()
    with pytest.raises(jobtrail.LeaseLost):
        ctx.extend(10)
    assert app.transitions(task.id) == before


# -- the database enforces it too ------------------------------------------------------------


def test_transition_log_refuses_update_and_delete(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    run(app)
    before = app.transitions(task.id)
    statements = [
        (
            "UPDATE jobtrail_transitions SET reason = 'completed' WHERE task_id = ? AND seq = 1",
            (int(task.id),),
        ),
        ("UPDATE jobtrail_transitions SET note = 'edited'", ()),
        ("DELETE FROM jobtrail_transitions WHERE task_id = ?", (int(task.id),)),
        ("DELETE FROM jobtrail_transitions", ()),
    ]
    for sql, params in statements:
        with pytest.raises(DB_ERRORS, match="append-only"):
            raw(app, sql, params)
    assert app.transitions(task.id) == before


IMPOSSIBLE_ROWS = [
    # terminal without a finish time
    "UPDATE jobtrail_tasks SET state = 'succeeded' WHERE id = ?",
    # a lease without an owner
    "UPDATE jobtrail_tasks SET state = 'leased' WHERE id = ?",
    # not a state at all
    "UPDATE jobtrail_tasks SET state = 'running' WHERE id = ?",
    "UPDATE jobtrail_tasks SET state = 'failed' WHERE id = ?",
    # negative attempts, a zero limit
    "UPDATE jobtrail_tasks SET attempts = -1 WHERE id = ?",
    "UPDATE jobtrail_tasks SET max_attempts = 0 WHERE id = ?",
    # dismissed while not dead
    "UPDATE jobtrail_tasks SET dismissed_at = created_at WHERE id = ?",
]


def test_check_constraints_refuse_impossible_rows(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    before = app.get(task.id)
    for sql in IMPOSSIBLE_ROWS:
        with pytest.raises(DB_ERRORS):
            raw(app, sql, (int(task.id),))
        after = app.get(task.id)
        assert (after.state, after.attempts, after.max_attempts, after.dismissed) == (
            before.state,
            before.attempts,
            before.max_attempts,
            before.dismissed,
        ), sql
    # the same statements are fine where the row stays possible: the refusal is the constraint
    raw(app, "UPDATE jobtrail_tasks SET attempts = 0 WHERE id = ?", (int(task.id),))


def test_transition_row_with_an_unknown_state_is_refused(app: jobtrail.App) -> None:
    app.task("k")(lambda ctx, p: None)
    task = app.enqueue("k")
    with pytest.raises(DB_ERRORS):
        raw(
            app,
            "INSERT INTO jobtrail_transitions (task_id, seq, from_state, to_state, reason,"
            " actor, attempt, at) SELECT id, 2, 'queued', 'running', 'claimed', 'x', 1,"
            " created_at FROM jobtrail_tasks WHERE id = ?",
            (int(task.id),),
        )
    assert len(app.transitions(task.id)) == 1
    assert last(app, task.id).reason == "enqueued"
