"""Parents and children, on both backends."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import jobtrail
from jobtrail import PermanentError

from ._effects_support import WAIT, Background, Gate, burst, reasons, wait_for


def register(app: jobtrail.App, *kinds: str, fail: tuple[str, ...] = ()) -> list[str]:
    """Handlers that record their runs; kinds in ``fail`` die with a permanent error until the
    test sets ``FIXED``."""
    ran: list[str] = []

    def make(kind: str) -> None:
        @app.task(kind)
        def handler(ctx: jobtrail.Context, payload: Any) -> None:
            ran.append(kind)
            if kind in fail and not FIXED.is_set():
                raise PermanentError(f"{kind} failed", category="invalid_input")

    for kind in kinds:
        make(kind)
    return ran


FIXED = threading.Event()


@pytest.fixture(autouse=True)
def _reset_fixed() -> None:
    FIXED.clear()


def test_a_workflow_parent_waits_then_succeeds_when_every_child_succeeded(
    app: jobtrail.App,
) -> None:
    ran = register(app, "render", "review", "publish")
    parent = app.enqueue_workflow(
        "publish_pipeline",  # a label: never registered as a kind
        children=[("render", {"p": 1}), ("review", {"p": 2}), ("publish", {"p": 3})],
    )
    assert (parent.state, parent.last_reason, parent.created) == ("waiting", "enqueued", True)
    assert "publish_pipeline" not in app.kinds
    children = app.children(parent.id)
    assert [(c.kind, c.state, c.parent_id, c.payload) for c in children] == [
        ("render", "queued", parent.id, {"p": 1}),
        ("review", "queued", parent.id, {"p": 2}),
        ("publish", "queued", parent.id, {"p": 3}),
    ]
    assert "children: render" in app.explain(parent.id)

    burst(app)
    assert sorted(ran) == ["publish", "render", "review"]
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("succeeded", "children_succeeded")
    assert reasons(app, parent.id) == ["enqueued", "children_succeeded"]
    last = app.transitions(parent.id)[-1]
    assert (last.from_state, last.actor) == ("waiting", "system")
    text = app.explain(parent.id)
    ids = [c.id for c in children]
    assert (
        f"children: render #{ids[0]} succeeded, review #{ids[1]} succeeded, "
        f"publish #{ids[2]} succeeded" in text
    )


def test_one_dead_child_makes_the_parent_dead_while_others_still_run(app: jobtrail.App) -> None:
    gate = Gate()

    @app.task("slow")
    def slow(ctx: jobtrail.Context, payload: Any) -> None:
        gate.block()

    @app.task("broken")
    def broken(ctx: jobtrail.Context, payload: Any) -> None:
        gate.wait_entered()  # die while "slow" is certainly running
        raise PermanentError("cannot render", category="invalid_input")

    parent = app.enqueue_workflow("wf", children=[("slow", None), ("broken", None)])
    slow_child, broken_child = app.children(parent.id)
    worker = Background(app, concurrency=4)
    gate.wait_entered()
    try:
        wait_for(lambda: app.get(broken_child.id).state == "dead", "the broken child to die")
        dead = app.get(parent.id)
        assert (dead.state, dead.last_reason) == ("dead", "child_dead")
        assert app.get(slow_child.id).state == "leased"  # still running
    finally:
        gate.release.set()
        worker.join()
    assert app.get(slow_child.id).state == "succeeded"
    after = app.get(parent.id)
    assert (after.state, after.last_reason) == ("dead", "child_dead")  # not re-derived later
    assert reasons(app, parent.id) == ["enqueued", "child_dead"]


def test_a_parent_stays_waiting_while_a_child_is_unfinished_then_ends_cancelled(
    app: jobtrail.App,
) -> None:
    ran = register(app, "render", "publish")
    parent = app.enqueue_workflow("wf", children=[("render", None), ("publish", None)])
    render, publish = app.children(parent.id)
    result = app.cancel(publish.id, by="alice", note="not this one")
    assert result.outcome == "cancelled"
    assert app.get(parent.id).state == "waiting"  # render is still queued
    assert reasons(app, parent.id) == ["enqueued"]

    burst(app)
    assert ran == ["render"]
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("cancelled", "children_cancelled")
    assert f"render #{render.id} succeeded, publish #{publish.id} cancelled" in app.explain(
        parent.id
    )


def test_sequential_children_run_one_after_the_other(app: jobtrail.App) -> None:
    order: list[str] = []
    seen_next: list[str] = []
    ids: dict[str, str] = {}

    def make(kind: str, next_kind: str | None) -> None:
        @app.task(kind)
        def handler(ctx: jobtrail.Context, payload: Any) -> None:
            order.append(f"start {kind}")
            if next_kind is not None:  # the next step must not be claimable yet
                seen_next.append(app.get(ids[next_kind]).state)
            order.append(f"end {kind}")

    make("render", "review")
    make("review", "publish")
    make("publish", None)
    parent = app.enqueue_workflow(
        "wf", children=[("render", None), ("review", None), ("publish", None)], sequential=True
    )
    children = app.children(parent.id)
    ids.update({c.kind: c.id for c in children})
    now = app.db_now()
    assert children[0].run_at <= now
    assert children[1].run_at > now and children[2].run_at > now  # not due

    burst(app, concurrency=4)
    assert order == [
        "start render",
        "end render",
        "start review",
        "end review",
        "start publish",
        "end publish",
    ]
    assert seen_next == ["queued", "queued"]
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("succeeded", "children_succeeded")


def test_a_sequential_step_after_a_dead_step_stays_queued_and_says_why(
    app: jobtrail.App,
) -> None:
    ran = register(app, "render", "publish", fail=("render",))
    parent = app.enqueue_workflow(
        "wf", children=[("render", None), ("publish", None)], sequential=True
    )
    render, publish = app.children(parent.id)
    burst(app, concurrency=4)

    assert ran == ["render"]
    assert app.get(render.id).state == "dead"
    waiting = app.get(publish.id)
    assert waiting.state == "queued"
    assert waiting.run_at > app.db_now()  # not due
    assert reasons(app, publish.id) == ["enqueued"]
    assert f"waiting for the previous step #{render.id}" in app.explain(publish.id)
    assert (app.get(parent.id).state, app.get(parent.id).last_reason) == ("dead", "child_dead")

    # replaying the parent replays the dead step; its success releases the next one
    app.replay(parent.id, by="ops", note="renderer fixed")
    assert app.get(publish.id).state == "queued" and reasons(app, publish.id) == ["enqueued"]
    FIXED.set()
    burst(app, concurrency=4)
    assert ran == ["render", "render", "publish"]
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("succeeded", "children_succeeded")


def test_cancelling_a_parent_cancels_its_unfinished_children(app: jobtrail.App) -> None:
    register(app, "render", "publish")
    parent = app.enqueue_workflow(
        "wf", children=[("render", None), ("publish", None)], sequential=True
    )
    result = app.cancel(parent.id, by="alice", note="campaign stopped")
    assert (result.outcome, result.state) == ("cancelled", "cancelled")
    for child in app.children(parent.id):
        assert (child.state, child.last_reason) == ("cancelled", "cancelled_before_start")
        assert app.transitions(child.id)[-1].actor == "alice"
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("cancelled", "children_cancelled")
    again = app.cancel(parent.id, by="alice")
    assert (again.outcome, again.state) == ("already_terminal", "cancelled")
    assert reasons(app, parent.id) == ["enqueued", "children_cancelled"]


def test_cancelling_a_parent_with_a_running_child_asks_it_to_stop(app: jobtrail.App) -> None:
    gate = Gate()

    @app.task("long")
    def long(ctx: jobtrail.Context, payload: Any) -> None:
        gate.block()
        ctx.check_cancelled()

    register(app, "other")
    parent = app.enqueue_workflow("wf", children=[("long", None), ("other", None)])
    long_child, other_child = app.children(parent.id)
    app.cancel(other_child.id, by="setup")  # so only "long" is left running
    worker = Background(app)
    gate.wait_entered()
    try:
        result = app.cancel(parent.id, by="alice")
        assert (result.outcome, result.state) == ("cancel_requested", "waiting")
        assert app.get(long_child.id).state == "cancel_requested"
    finally:
        gate.release.set()
        worker.join()
    assert app.get(long_child.id).last_reason == "cancel_confirmed"
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("cancelled", "children_cancelled")


def test_replaying_a_dead_parent_replays_its_dead_children(app: jobtrail.App) -> None:
    ran = register(app, "render", "publish", fail=("publish",))
    parent = app.enqueue_workflow("wf", children=[("render", None), ("publish", None)])
    render, publish = app.children(parent.id)
    burst(app)
    assert app.get(parent.id).state == "dead"
    assert app.get(publish.id).state == "dead"
    render_log = app.transitions(render.id)

    replayed = app.replay(parent.id, by="ops", note="publisher fixed")
    assert (replayed.state, replayed.last_reason, replayed.replay_count) == (
        "waiting",
        "replayed",
        1,
    )
    again = app.get(publish.id)
    assert (again.state, again.last_reason, again.attempts) == ("queued", "replayed", 0)
    assert app.transitions(render.id) == render_log  # the succeeded child is untouched
    last = app.transitions(parent.id)[-1]
    assert (last.from_state, last.to_state, last.actor, last.note) == (
        "dead",
        "waiting",
        "ops",
        "publisher fixed",
    )

    FIXED.set()
    burst(app)
    assert sorted(ran) == ["publish", "publish", "render"]
    done = app.get(parent.id)
    assert (done.state, done.last_reason) == ("succeeded", "children_succeeded")
    assert reasons(app, parent.id) == ["enqueued", "child_dead", "replayed", "children_succeeded"]


def test_a_workflow_enqueue_with_the_same_key_returns_the_same_parent(app: jobtrail.App) -> None:
    register(app, "render", "publish")
    first = app.enqueue_workflow(
        "wf", children=[("render", None), ("publish", None)], idempotency_key="campaign-42"
    )
    second = app.enqueue_workflow(
        "wf", children=[("render", None), ("publish", None)], idempotency_key="campaign-42"
    )
    assert second.id == first.id
    assert (first.created, second.created) == (True, False)
    assert len(app.children(first.id)) == 2
    assert len(app.list(kind="render")) == 1 and len(app.list(kind="publish")) == 1
    other = app.enqueue_workflow(
        "wf", children=[("render", None), ("publish", None)], idempotency_key="campaign-43"
    )
    assert other.id != first.id


def test_children_finishing_at_the_same_moment_still_complete_the_parent(
    app: jobtrail.App,
) -> None:
    """The aggregation runs in each child's completing transaction: two children finishing
    together must not both see the other one still running."""
    n = 6
    barrier = threading.Barrier(n)

    @app.task("fan")
    def fan(ctx: jobtrail.Context, payload: Any) -> None:
        barrier.wait(WAIT)  # every child is running; they all complete together

    parents = [app.enqueue_workflow("fan_in", children=[("fan", {"i": i}) for i in range(n)])]
    parents.append(app.enqueue_workflow("fan_in", children=[("fan", {"i": i}) for i in range(n)]))
    burst(app, concurrency=n)
    for parent in parents:
        done = app.get(parent.id)
        assert (done.state, done.last_reason) == ("succeeded", "children_succeeded")
        assert reasons(app, parent.id) == ["enqueued", "children_succeeded"]
