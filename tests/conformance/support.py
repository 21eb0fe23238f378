"""Shared helpers of the conformance suite: running workers, polling with deadlines, reaching
into the store seam to simulate a worker that died while holding a lease."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import jobtrail
from jobtrail.core import transition
from jobtrail.model.machine import State
from jobtrail.model.models import Transition
from jobtrail.store.base import Claim
from jobtrail.worker.presence import Presence

#: What a worker's owner id looks like (``host:pid:boot``).
OWNER_RE = re.compile(r"^[^:\s]+:\d+:[0-9a-f]+$")
DEAD_OWNER = "dead:1:x"
HELD = ("leased", "cancel_requested")
TERMINAL = ("succeeded", "cancelled", "dead")


def run(app: jobtrail.App, **options: Any) -> int:
    """One burst worker with short poll and sweep intervals."""
    options.setdefault("poll_interval", 0.05)
    options.setdefault("sweep_interval", 0.05)
    return app.run_worker(burst=True, **options)


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float = 5.0,
    interval: float = 0.01,
    what: str = "condition",
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def drain(app: jobtrail.App, task_id: str, *, timeout: float = 10.0, **options: Any) -> Any:
    """Run burst workers until the task is terminal (a retry that is not due yet makes a burst
    worker return, so one run is not always enough)."""
    deadline = time.monotonic() + timeout
    while True:
        run(app, **options)
        task = app.get(task_id)
        if task.state in TERMINAL:
            return task
        if time.monotonic() >= deadline:
            raise AssertionError(f"task {task_id} still {task.state} after {timeout}s")
        time.sleep(0.005)


class BackgroundWorker:
    """A burst worker on a thread, for tests that act while a handler runs."""

    def __init__(self, app: jobtrail.App, **options: Any) -> None:
        self.app = app
        self.options = options
        self.error: BaseException | None = None
        self.processed: int | None = None
        self.thread = threading.Thread(target=self._run, name="conformance-worker", daemon=True)

    def _run(self) -> None:
        try:
            self.processed = run(self.app, **self.options)
        except BaseException as exc:  # noqa: BLE001 - re-raised in join()
            self.error = exc

    def start(self) -> BackgroundWorker:
        self.thread.start()
        return self

    def join(self, timeout: float = 15.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"burst worker still running after {timeout}s"
        if self.error is not None:
            raise self.error


@contextmanager
def background_worker(
    app: jobtrail.App, *releases: threading.Event, **options: Any
) -> Iterator[BackgroundWorker]:
    """Run a burst worker in the background; on leaving, set ``releases`` and join it."""
    worker = BackgroundWorker(app, **options).start()
    try:
        yield worker
    finally:
        for event in releases:
            event.set()
        worker.join()


def join_handler_thread(task_id: str, timeout: float = 10.0) -> None:
    """Wait for a (possibly abandoned) plain handler of ``task_id`` to return: its pool thread
    is named ``jobtrail-task-<id>`` while it runs that task."""
    name = f"jobtrail-task-{task_id}"
    deadline = time.monotonic() + timeout
    while any(thread.name == name for thread in threading.enumerate()):
        assert time.monotonic() < deadline, f"the handler of task {task_id} did not return"
        time.sleep(0.005)


def claim_as_dead_worker(
    app: jobtrail.App, kind: str, *, owner: str = DEAD_OWNER, queue: str = "default"
) -> list[dict[str, Any]]:
    """Edge 3 through the store seam: a worker claims and then never renews (it "died")."""
    with app._driver.transaction() as tx:
        rows = transition.claim(
            app._driver, tx, Claim(owner=owner, queues=[queue], kinds=[kind], limit=1, version=None)
        )
    return rows


def db_now(app: jobtrail.App) -> datetime:
    with app._driver.transaction(write=False) as tx:
        return app._driver.db_now(tx)


def sweep_until_moved(app: jobtrail.App, task_id: str, *, timeout: float = 5.0) -> dict[str, int]:
    """Poll ``app.sweep()`` until the task is no longer held; the summed sweep counts."""
    total: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while True:
        for reason, n in app.sweep().items():
            total[reason] = total.get(reason, 0) + n
        if app.get(task_id).state not in HELD:
            return total
        if time.monotonic() >= deadline:
            raise AssertionError(f"the sweeper did not move task {task_id} within {timeout}s")
        time.sleep(0.02)


def wait_lease_expired(app: jobtrail.App, task_id: str, *, timeout: float = 5.0) -> None:
    """Wait (by the database clock) until the task's lease has expired, without sweeping."""
    expires = app.get(task_id).lease_expires_at
    assert expires is not None
    wait_for(lambda: db_now(app) > expires, timeout=timeout, what="the lease to expire")


def reasons(app: jobtrail.App, task_id: str) -> list[str]:
    return [t.reason for t in app.transitions(task_id)]


def last(app: jobtrail.App, task_id: str) -> Transition:
    return app.transitions(task_id)[-1]


def assert_row(
    t: Transition,
    from_state: str | None,
    to_state: str,
    reason: str,
    actor: str | Callable[[str], bool],
) -> None:
    """Check one transition row: its edge, its reason code and who made it."""
    got = (t.from_state.value if t.from_state else None, t.to_state.value, t.reason)
    assert got == (from_state, to_state, reason), f"transition #{t.seq} is {got}"
    if callable(actor):
        assert actor(t.actor), f"transition #{t.seq} has unexpected actor {t.actor!r}"
    else:
        assert t.actor == actor, f"transition #{t.seq} actor {t.actor!r} != {actor!r}"


def is_worker(actor: str) -> bool:
    return bool(OWNER_RE.match(actor)) and actor != DEAD_OWNER


def raw(app: jobtrail.App, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run raw SQL (``?`` placeholders) in a transaction of the app's own store."""
    with app._driver.transaction() as tx:
        conn: Any = tx.conn  # type: ignore[attr-defined]
        if app._driver.dialect == "postgres":
            sql = sql.replace("?", "%s")
        conn.execute(sql, params)


def state(app: jobtrail.App, task_id: str) -> State:
    return app.get(task_id).state


def live_worker(app: jobtrail.App, owner: str, **row: Any) -> Presence:
    """The heartbeat row of a worker that is not running here (another process, or one that
    died), written through the worker's own ``Presence``; ``beat`` it again to
    keep it live past its ``stale_after``."""
    options: dict[str, Any] = {
        "queues": ["default"],
        "kinds": ["k"],
        "concurrency": 1,
        "version": None,
        "interval": 0.05,
        "stale_after": 60.0,
        **row,
    }
    beat = Presence(app._driver, owner, **options)
    beat.beat(force=True)
    return beat
