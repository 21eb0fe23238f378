"""A real worker process killed with SIGKILL mid-handler, and one stopped with SIGTERM.

The sweeper decides an expired lease (the old process is never asked to clean up): edges 7 and
8 of docs/state_machine.md, where reentrant kinds are requeued after a crash and non-reentrant
kinds go to ``dead`` as ``lease_expired_effect_uncertain``; and ``run_worker`` stops on SIGTERM
after letting running handlers reach an outcome.

The worker subprocess runs ``runner.py`` (``crashapp.app.run_worker()``), written into
``tmp_path`` together with ``crashapp.py`` by ``WorkerDir``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _integration_helpers import WorkerDir, reasons, task_row, wait_until

import jobtrail
from jobtrail.model.machine import State


@pytest.fixture
def workers(store: Any, tmp_path: Path) -> Iterator[WorkerDir]:
    with WorkerDir(tmp_path / "workerdir", store.url, store.env()) as wd:
        yield wd


def _register(app: jobtrail.App) -> None:
    """The kinds of ``crashapp``, registered on the test's app so that it can enqueue them (the
    lease length and reentrancy are recorded on the task when it is enqueued)."""

    def not_here(ctx: jobtrail.Context, payload: Any) -> None:
        raise AssertionError("handlers run in the worker subprocess, not in the test")

    app.task("slow_reentrant", reentrant=True, lease_seconds=0.5)(not_here)
    app.task("slow_once", reentrant=False, lease_seconds=0.5)(not_here)
    app.task("one_second", lease_seconds=5)(not_here)


@pytest.mark.parametrize(
    ("kind", "swept_reason"),
    [("slow_reentrant", "lease_expired"), ("slow_once", "lease_expired_effect_uncertain")],
)
def test_sigkill_mid_handler_is_decided_by_the_sweeper(
    store: Any, workers: WorkerDir, kind: str, swept_reason: str
) -> None:
    app = store.app()
    _register(app)
    task = app.enqueue(kind, {"crash": True})
    proc = workers.start("--concurrency", "2")

    wait_until(
        lambda: workers.mark(f"started-{task.id}-1").exists() or proc.poll() is not None,
        timeout=30,
        what="the handler to start in the worker subprocess",
    )
    assert proc.poll() is None, workers.output(proc)
    first = task_row(app, task.id)
    assert first["state"] == "leased" and first["attempts"] == 1
    claimed_expiry = first["lease_expires_at"]

    # The heartbeat renews the 0.5 s lease while the handler runs: its expiry moves forward by
    # more than a whole lease length, and the sweeper has nothing to take.
    def renewed() -> bool:
        row = task_row(app, task.id)
        assert row["state"] == "leased" and row["attempts"] == 1, row
        return (row["lease_expires_at"] - claimed_expiry).total_seconds() > 0.6

    wait_until(renewed, timeout=15, what="the running handler's lease to be renewed")
    assert app.sweep() == {}
    assert not workers.mark(f"finished-{task.id}-1").exists()

    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL

    # Nobody cleans up after the dead process except the sweeper, once the lease has expired.
    swept: dict[str, int] = {}

    def sweep_moved() -> bool:
        swept.update(app.sweep())
        return bool(swept)

    wait_until(sweep_moved, timeout=15, what="the sweeper to move the orphaned task", interval=0.05)
    assert swept == {swept_reason: 1}
    log = app.transitions(task.id)
    assert [(t.reason, t.attempt) for t in log] == [
        ("enqueued", 0),
        ("claimed", 1),
        (swept_reason, 1),
    ]
    assert log[-1].actor == "sweeper"

    # A fresh worker (another process) finishes what can be run again, and nothing else.
    workers.mark(f"done-{task.id}").touch()
    rerun = workers.start("--burst", "--concurrency", "2")
    assert rerun.wait(timeout=60) == 0, workers.output(rerun)
    final = app.get(task.id)
    if kind == "slow_reentrant":
        assert final.state is State.SUCCEEDED and final.last_reason == "completed"
        assert [(t.reason, t.attempt) for t in app.transitions(task.id)] == [
            ("enqueued", 0),
            ("claimed", 1),
            ("lease_expired", 1),
            ("claimed", 2),
            ("completed", 2),
        ]
        assert workers.mark(f"started-{task.id}-2").exists()
        assert workers.mark(f"finished-{task.id}-2").exists()
        assert "processed 1" in workers.output(rerun)
    else:
        assert final.state is State.DEAD
        assert final.last_reason == "lease_expired_effect_uncertain"
        assert reasons(app, task.id) == ["enqueued", "claimed", "lease_expired_effect_uncertain"]
        assert not workers.mark(f"started-{task.id}-2").exists()  # never run twice
        assert "processed 0" in workers.output(rerun)
    assert not workers.mark(f"finished-{task.id}-1").exists()  # the killed run never finished


def test_sigterm_lets_the_running_handler_finish_and_takes_nothing_new(
    store: Any, workers: WorkerDir
) -> None:
    app = store.app()
    _register(app)
    first = app.enqueue("one_second", {"n": 1})
    second = app.enqueue("one_second", {"n": 2})
    grace = 10.0
    proc = workers.start("--concurrency", "1", "--grace", str(grace))

    started = wait_until(
        lambda: (
            [t for t in (first, second) if workers.mark(f"started-{t.id}-1").exists()]
            or proc.poll() is not None
        ),
        timeout=30,
        what="a handler to start",
    )
    assert proc.poll() is None, workers.output(proc)
    assert started == [first]  # higher priority or earlier run_at: the first enqueued
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=grace + 10)
    took = time.monotonic() - signalled
    assert code == 0, workers.output(proc)
    assert took < grace, f"the worker took {took:.1f}s to stop (grace {grace}s)"

    # The running handler reached its outcome within the grace period...
    assert workers.mark(f"finished-{first.id}-1").exists()
    done = app.get(first.id)
    assert done.state is State.SUCCEEDED and done.last_reason == "completed"
    assert done.lease_owner is None
    # ...and nothing new was taken after the signal.
    assert not workers.mark(f"started-{second.id}-1").exists()
    untouched = app.get(second.id)
    assert untouched.state is State.QUEUED and untouched.attempts == 0
    assert reasons(app, second.id) == ["enqueued"]
    assert "processed 1" in workers.output(proc)
    assert app.sweep() == {}
