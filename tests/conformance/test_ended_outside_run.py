"""``App.on_ended_outside_run``: the tasks this App ends without their handlers — a receipt's
outcome (a caller, a webhook, a deadline in the sweep) or an expired lease — are handed to each
hook after the commit; a handler's own end, a retry and a repeat hand nothing over. Both
backends."""

from __future__ import annotations

import logging
import threading
from collections import Counter

import pytest

import jobtrail

from .support import claim_as_dead_worker, drain, run, wait_for


def _hooked(app: jobtrail.App) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    @app.on_ended_outside_run
    def ended(task: jobtrail.Task) -> None:
        with lock:
            seen.append((task.id, task.state.value, task.last_reason))

    return seen


def _receipt_kind(app: jobtrail.App) -> None:
    @app.task("submit", max_attempts=3, backoff_base=0)
    def submit(ctx, p):
        ctx.await_receipt(f"r-{ctx.task_id}", timeout=float(p.get("timeout", 3600)))


def test_receipt_outcomes_hand_over_each_end_once(app: jobtrail.App) -> None:
    seen = _hooked(app)
    _receipt_kind(app)
    ok, retried, dead, by_receipt = (app.enqueue("submit", {}) for _ in range(4))
    run(app)
    assert seen == []  # awaiting a receipt is not an end

    app.confirm_receipt(ok.id, by="caller")
    assert seen == [(ok.id, "succeeded", "receipt_confirmed")]
    app.confirm_receipt(ok.id, by="caller")  # a repeat moves nothing
    app.confirm_receipt(retried.id, ok=False, category="unavailable", error="busy")
    assert app.get(retried.id).state == "queued" and len(seen) == 1  # a retry is no end
    app.confirm_receipt(dead.id, ok=False, category="unauthorized", error="token revoked")
    app.confirm_receipt(receipt_id=f"r-{by_receipt.id}", by="provider")
    assert seen[1:] == [
        (dead.id, "dead", "receipt_failed"),
        (by_receipt.id, "succeeded", "receipt_confirmed"),
    ]


def test_a_receipt_deadline_in_the_sweep(app: jobtrail.App) -> None:
    seen = _hooked(app)
    _receipt_kind(app)
    task = app.enqueue("submit", {"timeout": 0.1})
    run(app)
    wait_for(lambda: app.sweep() and seen, what="the receipt deadline")
    assert seen == [(task.id, "dead", "receipt_timeout")]


def test_an_expired_lease_in_app_sweep_and_in_the_workers_sweep(app: jobtrail.App) -> None:
    seen = _hooked(app)
    app.task("once", max_attempts=1, lease_seconds=1)(lambda ctx, p: None)
    app.task("again", max_attempts=2, lease_seconds=1)(lambda ctx, p: None)
    ended = app.enqueue("once")
    claim_as_dead_worker(app, "once")
    requeued = app.enqueue("again")
    claim_as_dead_worker(app, "again")
    moved: Counter[str] = Counter()
    wait_for(lambda: moved.update(app.sweep()) or moved.total() == 2, what="both leases")
    assert moved == {"attempts_exhausted": 1, "lease_expired": 1}
    assert app.get(requeued.id).state == "queued"  # requeued: no end
    assert seen == [(ended.id, "dead", "attempts_exhausted")]

    # a worker's own sweep hands over what it ends too
    seen.clear()
    third = app.enqueue("once")
    claim_as_dead_worker(app, "once")
    wait_for(lambda: run(app) >= 0 and seen, what="the worker's sweep")
    assert seen == [(third.id, "dead", "attempts_exhausted")]


def test_a_handlers_own_end_hands_nothing_over(app: jobtrail.App) -> None:
    seen = _hooked(app)
    app.task("fine")(lambda ctx, p: "done")
    app.task("bad", max_attempts=1)(lambda ctx, p: 1 / 0)
    assert drain(app, app.enqueue("fine").id).state == "succeeded"
    assert drain(app, app.enqueue("bad").id).state == "dead"
    assert seen == []


def test_a_hook_that_raises_is_logged_and_the_move_stands(
    app: jobtrail.App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.on_ended_outside_run
    def broken(task: jobtrail.Task) -> None:
        raise RuntimeError("secret payload text")

    seen = _hooked(app)  # registered after the broken one: still called
    _receipt_kind(app)
    task = app.enqueue("submit", {})
    run(app)
    with caplog.at_level(logging.ERROR, logger="jobtrail.app"):
        done = app.confirm_receipt(task.id)
    assert done.state == "succeeded" and app.get(task.id).state == "succeeded"
    assert seen == [(task.id, "succeeded", "receipt_confirmed")]
    (record,) = [r for r in caplog.records if "on_ended_outside_run" in r.getMessage()]
    assert "RuntimeError" in record.getMessage() and task.id in record.getMessage()
    assert "secret payload text" not in caplog.text


def test_a_hook_must_be_callable(app: jobtrail.App) -> None:
    with pytest.raises(TypeError, match="on_ended_outside_run takes a callable"):
        app.on_ended_outside_run("not a function")  # type: ignore[arg-type]
