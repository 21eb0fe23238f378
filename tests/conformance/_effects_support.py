"""Helpers shared by the effects, receipts, outbox and workflow conformance tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import jobtrail

WAIT = 10.0


def _due_work(app: jobtrail.App) -> list[str]:
    """Queued tasks of registered kinds that are due now (by the database clock)."""
    now = app.db_now()
    return [
        t.id
        for t in app.list(state="queued", limit=10_000)
        if t.kind in app.kinds and t.run_at is not None and t.run_at <= now
    ]


def burst(app: jobtrail.App, **options: Any) -> int:
    """Run burst workers until no task of this app is due.

    One ``run_worker(burst=True)`` should be enough; it is repeated because a burst worker can
    return while a retry it just wrote is due (a bug, proven by
    ``test_effects.py::test_a_burst_worker_does_not_return_while_a_retry_it_wrote_is_due``).
    """
    options.setdefault("poll_interval", 0.05)
    options.setdefault("sweep_interval", 0.05)
    deadline = time.monotonic() + WAIT
    ran = 0
    while True:
        ran += app.run_worker(burst=True, **options)
        due = _due_work(app)
        if not due:
            return ran
        if time.monotonic() > deadline:
            raise AssertionError(f"tasks still due after the burst workers: {due}")


class Background:
    """``burst(app)`` in a thread; ``join`` re-raises what it raised."""

    def __init__(self, app: jobtrail.App, **options: Any) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                burst(app, **options)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the worker did not finish"
        if self.error is not None:
            raise self.error


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned) or the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def reasons(app: jobtrail.App, task_id: str) -> list[str]:
    return [t.reason for t in app.transitions(task_id)]


class Gate:
    """The handler calls ``block()``: it sets ``entered`` and waits for ``release``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def block(self) -> None:
        self.entered.set()
        assert self.release.wait(WAIT), "the test never released the handler"

    def wait_entered(self) -> None:
        assert self.entered.wait(WAIT), "the handler never started"
