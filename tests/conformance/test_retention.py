"""Retention on both backends: the worker prunes finished tasks older than their
state's retention, in bounded batches, keeps dead tasks by default and never touches an
unfinished task; what it pruned is counted in the store (``stats``, ``/metrics``)."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

import jobtrail
from jobtrail.cli.ops import stats_text
from jobtrail.model.errors import PermanentError, TaskNotFound
from jobtrail.services import retention
from jobtrail.web.metrics import Metrics
from jobtrail.worker import Worker, WorkerOptions

from .support import wait_for
from .test_ops import claim, raw

HOUR = 3600


def backdate(store: Any, ids: list[str], seconds: float) -> None:
    """Make these finished tasks finish ``seconds`` earlier (task rows are not append-only)."""
    shift = (
        f"finished_at - {float(seconds)}"
        if store.backend == "sqlite"
        else f"finished_at - make_interval(secs => {float(seconds)})"
    )
    for task_id in ids:
        raw(store, f"UPDATE jobtrail_tasks SET finished_at = {shift} WHERE id = ?", (int(task_id),))  # noqa: S608 - constant


def kinds(app: jobtrail.App) -> None:
    @app.task("k")
    def k(ctx: Any, payload: Any) -> None:
        pass

    @app.task("bad", max_attempts=1)
    def bad(ctx: Any, payload: Any) -> None:
        raise PermanentError("nope")


def exists(app: jobtrail.App, task_id: str) -> bool:
    try:
        app.get(task_id)
    except TaskNotFound:
        return False
    return True


def log_rows(store: Any, task_id: str) -> int:
    rows = raw(
        store, "SELECT COUNT(*) FROM jobtrail_transitions WHERE task_id = ?", (int(task_id),)
    )
    return int(rows[0][0])


def test_a_worker_prunes_what_is_older_than_its_state_retention(store: Any) -> None:
    app = store.app(retention={"succeeded": HOUR, "cancelled": timedelta(hours=2)})
    kinds(app)
    done = [app.enqueue("k", n) for n in range(4)]
    dead = app.enqueue("bad")
    cancelled = [app.enqueue("k", n, delay=HOUR) for n in (10, 11)]
    for task in cancelled:
        app.cancel(task.id, by="ops")
    queued = app.enqueue("k", 20, delay=HOUR)
    # the worker's first pass runs before it claims: nothing is old yet
    assert app.run_worker(burst=True, poll_interval=0.02) == 5
    assert app.stats()["pruned"] == {
        s: {"tasks": 0, "transitions": 0} for s in ("succeeded", "cancelled", "dead")
    }
    leased = app.enqueue("k", 30)
    assert [str(r["id"]) for r in claim(app, 1)] == [leased.id]

    # two succeeded tasks finished 2 h ago (older than their 1 h), one cancelled task 1.5 h ago
    # (younger than its 2 h), the other 3 h ago; the dead task 30 days ago (kept: no retention)
    backdate(store, [done[0].id, done[1].id], 2 * HOUR)
    backdate(store, [cancelled[0].id], 1.5 * HOUR)
    backdate(store, [cancelled[1].id], 3 * HOUR)
    backdate(store, [dead.id], 30 * 86400)
    transitions = log_rows(store, done[0].id) + log_rows(store, done[1].id)
    transitions_cancelled = log_rows(store, cancelled[1].id)
    assert transitions == 6 and transitions_cancelled == 2

    app.run_worker(burst=True, poll_interval=0.02)
    gone = {done[0].id, done[1].id, cancelled[1].id}
    for task in [*done, *cancelled, dead, queued, leased]:
        assert exists(app, task.id) == (task.id not in gone), task.id
        if task.id in gone:
            assert log_rows(store, task.id) == 0
    assert app.get(dead.id).state == "dead"
    assert app.get(leased.id).state == "leased"  # a running task is never pruned
    assert app.get(queued.id).state == "queued"
    assert app.stats()["pruned"] == {
        "succeeded": {"tasks": 2, "transitions": transitions},
        "cancelled": {"tasks": 1, "transitions": transitions_cancelled},
        "dead": {"tasks": 0, "transitions": 0},
    }

    report = app.stats()
    assert stats_text(report).endswith("\npruned so far: 2 succeeded, 1 cancelled, 0 dead tasks")
    assert stats_text(report, "zh").endswith("\n已清理：成功 2 个、已取消 1 个、死信 0 个任务")

    # the counts are the store's: another app (a restart, another machine) reads the same,
    # and /metrics exports them
    again = store.app()
    assert again.stats()["pruned"]["succeeded"]["tasks"] == 2
    text = generate_latest(Metrics(again, lag=0.0).registry).decode()
    assert 'jobtrail_pruned_tasks_total{state="succeeded"} 2.0' in text
    assert 'jobtrail_pruned_tasks_total{state="cancelled"} 1.0' in text
    assert 'jobtrail_pruned_tasks_total{state="dead"} 0.0' in text
    assert f'jobtrail_pruned_transitions_total{{state="succeeded"}} {float(transitions)}' in text


def test_dead_tasks_are_kept_unless_their_retention_is_set(store: Any) -> None:
    app = store.app()  # the defaults: 7 days for succeeded and cancelled, dead for ever
    assert app.retention == {"succeeded": 7 * 86400.0, "cancelled": 7 * 86400.0, "dead": None}
    kinds(app)
    dead = app.enqueue("bad")
    ok = app.enqueue("k")
    app.run_worker(burst=True, poll_interval=0.02)
    backdate(store, [dead.id, ok.id], 365 * 86400)
    app.run_worker(burst=True, poll_interval=0.02)
    assert exists(app, dead.id)
    assert not exists(app, ok.id)  # a year old: past the default 7 days

    keeping = store.app(retention={"dead": 30 * 86400})
    kinds(keeping)
    keeping.run_worker(burst=True, poll_interval=0.02)
    assert not exists(keeping, dead.id)
    assert keeping.stats()["pruned"]["dead"] == {"tasks": 1, "transitions": 3}


def test_batches_are_bounded_and_each_is_its_own_transaction(store: Any) -> None:
    app = store.app()
    kinds(app)
    tasks = app.enqueue_many([{"kind": "k", "payload": n} for n in range(12)])
    assert app.run_worker(burst=True, poll_interval=0.02) == 12
    backdate(store, [t.id for t in tasks], 2 * HOUR)
    driver = app._driver

    assert retention.prune_batch(driver, "succeeded", HOUR, limit=5) == (5, 15)
    # the oldest first: those that finished first are gone, the rest all there
    left = [t for t in tasks if exists(app, t.id)]
    assert len(left) == 7
    assert app.stats()["pruned"]["succeeded"] == {"tasks": 5, "transitions": 15}
    assert retention.prune_batch(driver, "succeeded", 3 * HOUR, limit=5) == (0, 0)  # too young
    assert retention.prune_state(driver, "succeeded", HOUR, batch=5, max_batches=1) == (5, 15)
    assert retention.prune_state(driver, "succeeded", HOUR, batch=5) == (2, 6)
    assert not any(exists(app, t.id) for t in tasks)
    assert app.stats()["pruned"]["succeeded"] == {"tasks": 12, "transitions": 36}
    # `jobtrail prune` runs the same batches and is counted the same way
    more = app.enqueue("k")
    app.run_worker(burst=True, poll_interval=0.02)
    backdate(store, [more.id], 2 * HOUR)
    assert app.prune(HOUR) == {"tasks": 1, "transitions": 3}
    assert app.stats()["pruned"]["succeeded"] == {"tasks": 13, "transitions": 39}


def test_a_running_worker_prunes_on_its_own_thread(store: Any) -> None:
    app = store.app(retention={"succeeded": 60})
    kinds(app)
    old = app.enqueue("k")
    app.run_worker(burst=True, poll_interval=0.02)
    backdate(store, [old.id], 120)
    worker = Worker(
        app,
        WorkerOptions(
            queues=["default"], poll_interval=0.02, sweep_interval=0.05, install_signals=False
        ),
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        fresh = app.enqueue("k")
        wait_for(lambda: app.get(fresh.id).state == "succeeded", what="the fresh task to run")
        wait_for(lambda: not exists(app, old.id), what="the old task to be pruned")
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert exists(app, fresh.id)  # finished just now: kept


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ({"succeeded": -1}, ValueError, r"retention\['succeeded'\] must be between"),
        ({"cancelled": float("nan")}, ValueError, r"retention\['cancelled'\]"),
        ({"dead": 20 * 365 * 86400}, ValueError, r"retention\['dead'\] must be between"),
        ({"succeeded": "7d"}, TypeError, r"retention\['succeeded'\] must be seconds"),
        ({"succeeded": True}, TypeError, r"retention\['succeeded'\] must be seconds"),
        ({"finished": 60}, ValueError, r"unknown state 'finished'"),
        ({"queued": 60}, ValueError, r"unknown state 'queued'"),
        ([("succeeded", 60)], TypeError, r"retention must be a dict"),
    ],
)
def test_bad_retention_is_refused_before_anything_is_opened(
    tmp_path: Path, value: Any, error: type[Exception], message: str
) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(error, match=message):
        jobtrail.App(f"sqlite:///{path}", retention=value)
    assert not path.exists()  # nothing written


def test_retention_values() -> None:
    assert retention.parse_retention(None) == retention.DEFAULT_RETENTION
    assert retention.parse_retention({"succeeded": timedelta(minutes=5), "cancelled": None}) == {
        "succeeded": 300.0,
        "cancelled": None,
        "dead": None,
    }
    assert retention.parse_retention({"dead": 0}) == {
        "succeeded": 7 * 86400.0,
        "cancelled": 7 * 86400.0,
        "dead": 0.0,
    }
