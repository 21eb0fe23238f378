"""Receipts (edges 9–12 and 17, ``check_receipt``), on both backends."""

from __future__ import annotations

from typing import Any

import pytest

import jobtrail
from jobtrail import IllegalTransition

from ._effects_support import Background, Gate, burst, reasons, wait_for


def register_submit(app: jobtrail.App, kind: str = "submit", **options: Any) -> None:
    """A handler that submits (an effect) and waits for the provider's receipt."""

    @app.task(kind, backoff_base=0, **options)
    def submit(ctx: jobtrail.Context, payload: Any) -> None:
        receipt = ctx.effect("submit_body", lambda key: {"id": f"rcpt-{key}"})
        ctx.await_receipt(receipt["id"], timeout=payload.get("timeout", 3600))


def submitted(app: jobtrail.App, kind: str = "submit", timeout: float = 3600) -> jobtrail.Task:
    task = app.enqueue(kind, {"timeout": timeout})
    burst(app)
    return app.get(task.id)


def test_await_receipt_releases_the_lease(app: jobtrail.App) -> None:
    register_submit(app)
    task = submitted(app)
    assert (task.state, task.last_reason) == ("awaiting_receipt", "submitted")
    assert task.lease_owner is None and task.lease_expires_at is None
    assert task.receipt_id == f"rcpt-{task.id}/submit_body"
    assert task.receipt_deadline is not None
    assert task.receipt_deadline > app.db_now()
    assert reasons(app, task.id) == ["enqueued", "claimed", "submitted"]
    assert "receipt" in app.explain(task.id)


@pytest.mark.parametrize("by", ["task_id", "receipt_id"])
def test_confirm_receipt_succeeds_and_a_repeat_is_idempotent(app: jobtrail.App, by: str) -> None:
    register_submit(app)
    task = submitted(app)

    def confirm() -> jobtrail.Task:
        if by == "task_id":
            return app.confirm_receipt(task.id)
        return app.confirm_receipt(receipt_id=task.receipt_id)

    done = confirm()
    assert (done.id, done.state, done.last_reason) == (task.id, "succeeded", "receipt_confirmed")
    log = app.transitions(task.id)
    assert [t.reason for t in log] == ["enqueued", "claimed", "submitted", "receipt_confirmed"]
    again = confirm()
    assert (again.state, again.last_reason) == ("succeeded", "receipt_confirmed")
    assert app.transitions(task.id) == log  # nothing appended


def test_a_transient_receipt_failure_requeues_the_task(app: jobtrail.App) -> None:
    register_submit(app)
    task = submitted(app)
    with pytest.raises(ValueError, match="no-such-category"):
        app.confirm_receipt(task.id, ok=False, category="no-such-category")
    assert reasons(app, task.id) == ["enqueued", "claimed", "submitted"]  # nothing changed
    failed = app.confirm_receipt(task.id, ok=False, category="unavailable", error="provider 503")
    assert (failed.state, failed.last_reason) == ("queued", "receipt_failed")
    assert failed.run_at is not None and failed.run_at <= app.db_now()  # backoff_base=0
    assert (failed.last_error_category, failed.last_error) == ("unavailable", "provider 503")
    last = app.transitions(task.id)[-1]
    assert (last.from_state, last.to_state, last.error_category) == (
        "awaiting_receipt",
        "queued",
        "unavailable",
    )
    with pytest.raises(IllegalTransition):  # no longer awaiting a receipt
        app.confirm_receipt(task.id)

    burst(app)  # the retry submits again (the effect is already confirmed: not repeated)
    again = app.get(task.id)
    assert (again.state, again.attempts) == ("awaiting_receipt", 2)
    assert app.confirm_receipt(task.id).state == "succeeded"


def test_a_permanent_receipt_failure_is_dead(app: jobtrail.App) -> None:
    register_submit(app)
    task = submitted(app)
    dead = app.confirm_receipt(
        receipt_id=task.receipt_id, ok=False, category="unauthorized", error="token revoked"
    )
    assert (dead.state, dead.last_reason) == ("dead", "receipt_failed")
    assert (dead.last_error_category, dead.last_error) == ("unauthorized", "token revoked")


def test_confirm_on_a_task_that_is_not_awaiting_a_receipt_is_refused(app: jobtrail.App) -> None:
    @app.task("plain")
    def plain(ctx: jobtrail.Context, payload: Any) -> None:
        pass

    queued = app.enqueue("plain", {"n": 1})
    with pytest.raises(IllegalTransition) as info:
        app.confirm_receipt(queued.id)
    assert info.value.current_state == "queued"
    finished = app.enqueue("plain", {"n": 2})
    burst(app)
    with pytest.raises(IllegalTransition):  # succeeded, but not by a receipt
        app.confirm_receipt(finished.id)
    with pytest.raises(IllegalTransition):
        app.confirm_receipt(finished.id, ok=False, category="unavailable")
    assert reasons(app, queued.id)[-1] == "completed"
    assert reasons(app, finished.id) == ["enqueued", "claimed", "completed"]


def test_cancel_while_awaiting_a_receipt_is_too_late(app: jobtrail.App) -> None:
    register_submit(app)
    task = submitted(app)
    result = app.cancel(task.id, by="alice", note="stop it")
    assert (result.outcome, result.state) == ("too_late", "awaiting_receipt")
    after = app.get(task.id)
    assert after.state == "awaiting_receipt"
    log = app.transitions(task.id)
    assert [t.reason for t in log] == [
        "enqueued",
        "claimed",
        "submitted",
        "cancel_refused_submitted",
    ]
    assert (log[-1].from_state, log[-1].to_state, log[-1].actor) == (
        "awaiting_receipt",
        "awaiting_receipt",
        "alice",
    )
    assert app.confirm_receipt(task.id).state == "succeeded"  # still confirmable


def test_a_cancel_before_await_receipt_is_too_late_into_awaiting_receipt(
    app: jobtrail.App,
) -> None:
    """Edge 17: the submission happened (effect confirmed), then the cancel came, then the
    handler asked to wait for the receipt."""
    gate = Gate()

    @app.task("submit_slowly")
    def submit_slowly(ctx: jobtrail.Context, payload: Any) -> None:
        receipt = ctx.effect("submit_body", lambda key: {"id": "r-17"})
        gate.block()
        ctx.await_receipt(receipt["id"], timeout=3600)

    task = app.enqueue("submit_slowly")
    worker = Background(app)
    gate.wait_entered()
    assert app.cancel(task.id, by="alice").outcome == "cancel_requested"
    gate.release.set()
    worker.join()

    after = app.get(task.id)
    assert (after.state, after.last_reason) == ("awaiting_receipt", "cancel_too_late")
    assert after.receipt_id == "r-17" and after.lease_owner is None
    assert reasons(app, task.id) == ["enqueued", "claimed", "cancel_requested", "cancel_too_late"]
    assert "the cancel came after the submission" in app.explain(task.id)
    assert app.confirm_receipt(receipt_id="r-17").state == "succeeded"


# -- the receipt deadline (edge 12) and check_receipt --------------------------------------------

DEADLINE_CASES = [
    # (hook, final state, final reason, requeried?)
    ("absent", "dead", "receipt_timeout", False),
    ("true", "succeeded", "receipt_confirmed", True),
    ("none", "dead", "receipt_timeout", True),
    ("raises", "dead", "receipt_timeout", True),
    ("false", "queued", "receipt_failed", True),
]


def test_the_sweeper_handles_receipt_deadlines(app: jobtrail.App) -> None:
    asked: dict[str, list[str]] = {}

    def hook_for(hook: str) -> Any:
        def check_receipt(receipt_id: str) -> Any:
            asked[hook].append(receipt_id)
            if hook == "raises":
                raise ConnectionError("provider status API down")
            return {"true": True, "false": False, "none": None}[hook]

        return None if hook == "absent" else check_receipt

    tasks = {}
    for hook, *_ in DEADLINE_CASES:
        asked[hook] = []
        register_submit(app, f"submit_{hook}", check_receipt=hook_for(hook))
        tasks[hook] = app.enqueue(f"submit_{hook}", {"timeout": 0.2})
    # the worker sweeps only once, at its start: every deadline below is handled by app.sweep()
    burst(app, sweep_interval=60)
    for task in tasks.values():
        assert app.get(task.id).state == "awaiting_receipt"

    moved: dict[str, int] = {}

    def swept_all() -> bool:
        for reason, n in app.sweep().items():
            moved[reason] = moved.get(reason, 0) + n
        return all(app.get(t.id).state != "awaiting_receipt" for t in tasks.values())

    wait_for(swept_all, "the receipt deadlines to pass and be swept")
    assert moved == {"receipt_timeout": 3, "receipt_confirmed": 1, "receipt_failed": 1}

    for hook, state, reason, requeried in DEADLINE_CASES:
        task = app.get(tasks[hook].id)
        assert (task.state, task.last_reason) == (state, reason), hook
        expected = ["enqueued", "claimed", "submitted"]
        expected += ["receipt_requeried"] if requeried else []
        assert reasons(app, task.id) == [*expected, reason], hook
        assert asked[hook] == ([task.receipt_id] if requeried else []), hook
        if reason == "receipt_timeout":
            assert task.last_error_category == "timeout", hook
            last = app.transitions(task.id)[-1]
            assert (last.from_state, last.actor) == ("awaiting_receipt", "sweeper"), hook


def test_a_receipt_id_already_awaited_by_another_task_is_decided_by_the_worker(
    app: jobtrail.App,
) -> None:
    """Two tasks whose providers hand out the same receipt id (e.g. two platforms numbering
    their receipts from 1). The worker holding the second task is alive: it, not the sweeper,
    must decide that attempt (the sweeper handles holders that stopped renewing)."""

    @app.task("submit_same", lease_seconds=0.5, max_attempts=1)
    def submit_same(ctx: jobtrail.Context, payload: Any) -> None:
        ctx.await_receipt("receipt-1", timeout=3600)

    first = app.enqueue("submit_same", {"n": 1})
    burst(app)
    assert app.get(first.id).state == "awaiting_receipt"
    second = app.enqueue("submit_same", {"n": 2})
    burst(app)

    def decided() -> bool:
        app.sweep()
        return app.get(second.id).state not in ("leased", "cancel_requested")

    wait_for(decided, "the second task to leave its lease")
    assert app.get(first.id).state == "awaiting_receipt"
    actors = [(t.reason, t.actor) for t in app.transitions(second.id)]
    assert all(actor != "sweeper" for _, actor in actors), actors
