"""The hand-off (docs/design_idle_handoff.md): a single enqueue that would be claimed at once
leases its task to an idle, live worker in the enqueue's own commit (PostgreSQL with a LISTEN
connection: ``driver.hands_off``). Where there is no hand-off (SQLite, a transaction pooler
without ``listen_url``) the same idle worker claims the task as before; both run it once.

Each test waits for the worker to register (its row in ``jobtrail_idle_workers``) before it
enqueues, so the hand-off is what is tested, not a race with the claim."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import jobtrail
from jobtrail.app.background import WorkerHandle
from jobtrail.store.postgres import handoff as postgres_handoff

from .support import wait_for


def registry(app: jobtrail.App) -> list[dict[str, Any]]:
    """The idle registry's rows (none where there is no hand-off)."""
    if not app._driver.hands_off:
        return []
    with app._driver.transaction(write=False) as tx:
        cur = tx.conn.execute("SELECT owner, handed FROM jobtrail_idle_workers ORDER BY owner")
        return [{"owner": r[0], "handed": r[1]} for r in cur.fetchall()]


@contextmanager
def idle_worker(app: jobtrail.App, **options: Any) -> Iterator[WorkerHandle]:
    """A running (not burst) worker on a thread, returned once it waits registered as idle."""
    handle = app.start_worker(**{"concurrency": 2, **options})
    try:
        if app._driver.hands_off:
            wait_for(lambda: armed(app), what="the worker to register as idle")
        else:
            time.sleep(0.2)  # nothing to wait for: it claims from its first round
        yield handle
    finally:
        handle.stop(grace=5)


def armed(app: jobtrail.App) -> bool:
    rows = registry(app)
    return bool(rows) and all(r["handed"] is None for r in rows)


def claimed_entry(app: jobtrail.App, task_id: str) -> jobtrail.Transition:
    log = app.transitions(task_id)
    assert [t.reason for t in log][:2] == ["enqueued", "claimed"], log
    return log[1]


def test_an_idle_worker_gets_a_due_task_in_the_enqueues_own_commit(app: jobtrail.App) -> None:
    ran: list[str] = []
    app.task("k", max_attempts=1)(lambda ctx, payload: ran.append(ctx.task_id))
    with idle_worker(app):
        task = app.enqueue("k", {"n": 1})
        assert task.state == "queued"  # what the enqueue wrote first; its claim is the worker's
        done = wait_for(lambda: app.get(task.id).state == "succeeded" or None, what="the run")
        assert done
    assert ran == [task.id]
    log = app.transitions(task.id)
    assert [(t.from_state, t.to_state, t.reason) for t in log] == [
        (None, "queued", "enqueued"),
        ("queued", "leased", "claimed"),
        ("leased", "succeeded", "completed"),
    ]
    claimed = log[1]
    if app._driver.hands_off:
        # one commit: the claim is at the enqueue's own transaction time, by the worker
        assert claimed.data.get("handed") is True
        assert claimed.at == log[0].at
        assert claimed.actor.startswith("worker") or claimed.actor != log[0].actor
    else:
        assert "handed" not in claimed.data


def test_an_enqueuer_of_another_app_hands_each_idle_job_over(store: Any) -> None:
    """One job at a time from another App (another process's driver, as a web process's):
    the worker registers again after each, and each is handed over (where there is a
    hand-off); the enqueuer keeps looking at the registry while it finds workers in it."""
    worker_app, enqueuer = store.app(), store.app()
    for app in (worker_app, enqueuer):
        app.task("k", max_attempts=1)(lambda ctx, payload: None)
    with idle_worker(worker_app):
        for n in range(4):
            if worker_app._driver.hands_off:
                wait_for(lambda: armed(worker_app), what=f"the worker to register again ({n})")
            task_id = enqueuer.enqueue("k", {"n": n}).id
            wait_for(
                lambda: enqueuer.get(task_id).state == "succeeded" or None,  # noqa: B023
                what="the run",
            )
            claimed = claimed_entry(enqueuer, task_id)
            assert claimed.data.get("handed") is (True if enqueuer._driver.hands_off else None)


def test_a_worker_woken_by_a_hand_off_alone_sends_no_claim(store: Any) -> None:
    """A task is handed over only from an otherwise empty queue, so the worker it wakes does
    not claim (where there is no hand-off, its claim is what starts the task); its next round
    trip is the task's completion."""
    worker_app, enqueuer = store.app(), store.app()
    started, release = threading.Event(), threading.Event()

    def handler(ctx: jobtrail.Context, payload: Any) -> None:
        started.set()
        assert release.wait(10)

    worker_app.task("k", max_attempts=1)(handler)
    enqueuer.task("k", max_attempts=1)(lambda ctx, payload: None)
    driver = worker_app._driver
    # with the hand-off, no poll and no sweep while it runs (an idle worker claims at each);
    # without it, the poll is how the worker finds the task (behind a transaction pooler)
    quiet = {"poll_interval": 30.0, "sweep_interval": 30.0} if driver.hands_off else {}
    with idle_worker(worker_app, **quiet) as handle:
        before, heard = handle.worker.round_trips, driver.queued_heard
        task = enqueuer.enqueue("k", {})
        assert started.wait(10)
        time.sleep(0.3)  # time for a claim the worker should not send
        claims = handle.worker.round_trips - before
        # NOTIFY channels are the database's, not the schema's: other tests' enqueues wake
        # this worker too, and each such wake-up may make it claim
        others = driver.queued_heard - heard
        release.set()
        wait_for(lambda: enqueuer.get(task.id).state == "succeeded" or None, what="the run")
    if driver.hands_off:
        assert claims <= others, (claims, others)
    else:  # the claim that started it (and whatever polls came meanwhile)
        assert claims >= 1


def test_a_task_too_long_for_a_notification_is_handed_over_and_read(app: jobtrail.App) -> None:
    """A NOTIFY payload is at most 8,000 bytes: a bigger row is handed over by its id alone,
    and the worker reads it."""
    seen: list[Any] = []
    app.task("k", max_attempts=1)(lambda ctx, payload: seen.append(payload))
    big = {"blob": "x" * 20_000, "list": list(range(2000))}
    with idle_worker(app):
        task = app.enqueue("k", big)
        wait_for(lambda: app.get(task.id).state == "succeeded" or None, what="the run")
    assert seen == [big]
    claimed = claimed_entry(app, task.id)
    assert claimed.data.get("handed") is (True if app._driver.hands_off else None)


@pytest.mark.parametrize(
    "case", ["paused", "limited", "delayed", "idempotency_key", "something_else_queued", "queue"]
)
def test_no_handoff_where_a_claim_would_not_take_the_task_at_once(
    app: jobtrail.App, case: str
) -> None:
    app.task("k", max_attempts=1)(lambda ctx, payload: None)
    app.task("other", max_attempts=1, queue="elsewhere")(lambda ctx, payload: None)
    with idle_worker(app, queues=["default"]):
        options: dict[str, Any] = {}
        if case == "paused":
            app.pause("default", by="test", note="hand-off")
        elif case == "limited":
            app.set_limit("default", total=1, by="test", note="hand-off")
        elif case == "delayed":
            options["delay"] = 0.3
        elif case == "idempotency_key":
            options["idempotency_key"] = "once"
        elif case == "something_else_queued":
            app.enqueue("k", {"later": True}, delay=3600)
        kind = "other" if case == "queue" else "k"
        task = app.enqueue(kind, {"n": 1}, **options)
        if case == "paused":
            assert app.get(task.id).state == "queued"
            app.resume("default", by="test", note="hand-off")
        if case == "queue":
            assert app.get(task.id).state == "queued"  # nobody serves that queue
            return
        wait_for(lambda: app.get(task.id).state == "succeeded" or None, what="the run")
    assert "handed" not in claimed_entry(app, task.id).data


def test_idle_workers_each_run_what_is_handed_to_them_once_and_never_more_than_concurrency(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three workers (each its own App: its own LISTEN connection and channel) go idle between
    bursts of enqueues from four threads: every task runs once, no worker runs more than its
    concurrency at a time, and (with the hand-off) some tasks were handed over.

    Every enqueue looks for an idle worker (no ``RECHECK`` pause after a look that found none)
    and each burst starts once a worker is registered: otherwise whether any task is handed
    over depends on how fast a loaded machine lets the workers register between bursts."""
    monkeypatch.setattr(postgres_handoff, "RECHECK", 0.0)
    apps = [store.app() for _ in range(4)]
    lock = threading.Lock()
    runs: dict[str, int] = {}
    inside: dict[int, int] = {}
    most: dict[int, int] = {}

    def handler_for(i: int) -> Any:
        def handler(ctx: jobtrail.Context, payload: Any) -> None:
            with lock:
                runs[ctx.task_id] = runs.get(ctx.task_id, 0) + 1
                inside[i] = inside.get(i, 0) + 1
                most[i] = max(most.get(i, 0), inside[i])
            time.sleep(payload["sleep"])
            with lock:
                inside[i] -= 1

        return handler

    for i, app in enumerate(apps):
        app.task("k", max_attempts=1)(handler_for(i))
    enqueuer = apps[3]
    handles = [app.start_worker(concurrency=2) for app in apps[:3]]
    ids: list[str] = []
    try:

        def send(n: int) -> None:
            for j in range(n):
                task = enqueuer.enqueue("k", {"sleep": 0.002 * (j % 3)})
                with lock:
                    ids.append(task.id)
                time.sleep(0.004 * (j % 4))

        for _round in range(4):
            if enqueuer._driver.hands_off:
                wait_for(lambda: armed(enqueuer), what="a worker to register as idle")
            threads = [threading.Thread(target=send, args=(15,)) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wait_for(
                lambda: all(enqueuer.get(i).state == "succeeded" for i in ids) or None,
                timeout=30,
                what="every task to run",
            )
    finally:
        for handle in handles:
            handle.stop(grace=5)
    assert sorted(runs) == sorted(ids) and set(runs.values()) == {1}, runs
    assert max(most.values()) <= 2, most
    handed = sum(1 for i in ids if enqueuer.transitions(i)[1].data.get("handed") is True)
    if enqueuer._driver.hands_off:
        assert handed > 0
    else:
        assert handed == 0
