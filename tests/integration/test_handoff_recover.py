"""A task handed to an idle worker whose notification was lost (the LISTEN connection went
through a transaction pooler, issue 38), whose lease expired and which the same worker claimed
again, is not started a second time when that worker leaves the registry: only the handed
attempt (1), still leased to it and not running there, is recovered from the registry's
``handed`` mark (``worker/handoff.py``)."""

from __future__ import annotations

from typing import Any

from _integration_helpers import claim_one, lease_expired_by_db_clock, wait_until

from jobtrail.worker import Worker, WorkerOptions


def test_a_handed_task_claimed_again_by_the_same_worker_is_not_started_again(pg: Any) -> None:
    app = pg.app()
    app.task("tick", lease_seconds=0.5)(lambda ctx, payload: None)
    worker = Worker(
        app.worker_collaborators(), WorkerOptions(install_signals=False, queues=["default"])
    )
    driver = app._driver
    assert driver.check_wakeups() is True  # the listener is up and holds its lock
    worker._handoff.register_if_idle()
    assert worker._handoff.armed
    task = app.enqueue("tick", {})
    log = app.transitions(task.id)
    assert log[1].reason == "claimed" and log[1].data.get("handed") is True, log
    assert log[1].actor == worker.owner
    driver.take_handed(worker.owner)  # its notification, lost

    wait_until(
        lambda: lease_expired_by_db_clock(app, task.id), timeout=10, what="the lease to expire"
    )
    assert app.sweep()  # lease_expired: queued again
    [again] = claim_one(app, worker.owner, ["tick"])  # the same worker claims attempt 2
    assert int(again["attempts"]) == 2

    assert worker._handoff.leave_registry() == 0  # nothing started: attempt 2 is its claim's
    assert [t.reason for t in app.transitions(task.id)] == [
        "enqueued",
        "claimed",
        "lease_expired",
        "claimed",
    ]
