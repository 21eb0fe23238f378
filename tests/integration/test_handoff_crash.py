"""The hand-off with real worker processes (docs/design_idle_handoff.md): one registered as idle
and killed with SIGKILL is never handed a task, because its LISTEN session's advisory lock went
with it (the task waits queued and a live worker claims it); several going idle between
enqueues from several threads run every task once."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _integration_helpers import WorkerDir, task_row, wait_until

import jobtrail


@pytest.fixture
def workers(pg: Any, tmp_path: Path) -> Iterator[WorkerDir]:
    with WorkerDir(tmp_path / "workerdir", pg.url, pg.env()) as wd:
        yield wd


def registrations(app: jobtrail.App) -> list[tuple[str, int, int | None]]:
    with app._driver.transaction(write=False) as tx:
        cur = tx.conn.execute("SELECT owner, lock_key, handed FROM jobtrail_idle_workers")
        return [(r[0], r[1], r[2]) for r in cur.fetchall()]


def lock_free(url: str, key: int) -> bool:
    """Whether a session could take ``key`` now (the holder's session has ended)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (key,)).fetchone()
        assert row is not None
        if row[0]:
            conn.execute("SELECT pg_advisory_unlock_shared(%s)", (key,))
        return bool(row[0])


def test_a_killed_idle_worker_is_not_handed_a_task(pg: Any, workers: WorkerDir) -> None:
    app = pg.app()
    app.task("tick", lease_seconds=2)(lambda ctx, payload: None)
    proc = workers.start("--concurrency", "2")
    wait_until(
        lambda: bool(registrations(app)) or proc.poll() is not None,
        timeout=30,
        what="the worker process to register as idle",
    )
    assert proc.poll() is None, workers.output(proc)
    [(owner, key, handed)] = registrations(app)
    assert handed is None and not lock_free(pg.url, key)  # alive: its session holds the lock

    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    # the server notices the closed connection and ends its session, and the lock with it
    wait_until(lambda: lock_free(pg.url, key), timeout=10, what="the dead session to end")

    task = app.enqueue("tick", {})
    assert task_row(app, task.id)["state"] == "queued"  # not leased to the dead worker
    assert registrations(app) == [(owner, key, None)]

    live = workers.start("--concurrency", "2")
    wait_until(
        lambda: task_row(app, task.id)["state"] == "succeeded" or live.poll() is not None,
        timeout=30,
        what="a live worker to run the task",
    )
    assert task_row(app, task.id)["state"] == "succeeded", workers.output(live)
    claimed = app.transitions(task.id)[1]
    assert claimed.reason == "claimed" and claimed.actor != owner
    assert "handed" not in claimed.data


def test_worker_processes_going_idle_between_enqueues_run_each_task_once(
    store: Any, tmp_path: Path
) -> None:
    """Three worker processes (concurrency 2) and four enqueuing threads that pause so the
    workers go idle and register between tasks: every task runs once, at attempt 1, the store's
    invariants hold (state = the last transition's to_state), and with the hand-off some tasks
    were handed over (on SQLite none: each was claimed)."""
    app = store.app()
    app.task("tick", lease_seconds=2)(lambda ctx, payload: None)
    with WorkerDir(tmp_path / "workerdir", store.url, store.env()) as wd:
        procs = [wd.start("--concurrency", "2") for _ in range(3)]
        if app._driver.hands_off:
            wait_until(
                lambda: len(registrations(app)) == 3 or any(p.poll() is not None for p in procs),
                timeout=30,
                what="the three workers to register as idle",
            )
        ids: list[str] = []
        lock = threading.Lock()

        def send(seed: int) -> None:
            for j in range(40):
                task = app.enqueue("tick", {"seed": seed, "j": j})
                with lock:
                    ids.append(task.id)
                time.sleep(0.003 * ((seed + j) % 5))

        threads = [threading.Thread(target=send, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_until(
            lambda: (
                len(app.list(state="succeeded", kind="tick", limit=1000)) == len(ids)
                or any(p.poll() is not None for p in procs)
            ),
            timeout=60,
            what="every task to run",
        )
        assert all(p.poll() is None for p in procs), [wd.output(p) for p in procs]
    runs = wd.mark("runs").read_text().split("\n")[:-1]
    ran = [line.split()[0] for line in runs]
    assert sorted(ran) == sorted(ids), "a task ran twice or not at all"
    assert {line.split()[1] for line in runs} == {"1"}
    assert app.check() == []
    handed = sum(1 for i in ids if app.transitions(i)[1].data.get("handed") is True)
    assert (handed > 0) is app._driver.hands_off, handed
