"""SQLite's cross-process wake-up (``SQLiteDriver.wait_for_work``): a worker notices another
connection's commit by ``PRAGMA data_version`` changing from the version it noted when it last
looked for work. The version must be the one the first claim since its last wait saw: a later
transaction of the same thread (the pump re-reads which queues are limited after an empty
claim, and sweeps), a later claim of some queues only, or the first wait itself, noting the
version again, would swallow a commit no claim had seen, and the task would wait for the
worker's poll (a 1 s idle-latency tail, seen once in ~100 samples of ``bench/run.py``'s idle
latency)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import jobtrail
from jobtrail.store.sqlite.driver import SQLiteDriver
from jobtrail.store.types import Claim


@pytest.fixture
def worker(make_driver: Callable[..., SQLiteDriver]) -> SQLiteDriver:
    """A driver used as a worker's pump uses it: this thread claims and waits on it."""
    return make_driver()


def _enqueue_elsewhere(url: str, queue: str = "default") -> None:
    """A commit by another connection, as another process's enqueue is."""
    with jobtrail.App(url) as other:
        other.task("k")(lambda ctx, payload: None)
        other.enqueue("k", queue=queue)


def _claim(driver: SQLiteDriver, queues: tuple[str, ...] = ("default",)) -> int:
    with driver.transaction() as tx:
        rows = driver.task_claim(tx, Claim("w", list(queues), ["k"], 10, None))
    return len(rows)


@pytest.mark.parametrize("write", [False, True], ids=["a read", "a write"])
def test_a_commit_after_the_last_claim_wakes_the_worker_whatever_it_did_since(
    url: str, worker: SQLiteDriver, write: bool
) -> None:
    worker.wait_for_work(0.001)  # a worker that has waited before
    assert _claim(worker) == 0  # nothing yet: the worker will wait
    _enqueue_elsewhere(url)
    # what the pump does between an empty claim and its wait: a read (which queues are
    # limited) or a write of its own (a sweep); neither looked for work
    with worker.transaction(write=write) as tx:
        worker.queues_limited(tx, ["default"])
    started = time.monotonic()
    assert worker.wait_for_work(3.0) is True, "the enqueue did not wake the worker"
    assert time.monotonic() - started < 1.0
    assert _claim(worker) == 1


def test_a_commit_between_the_first_claim_and_the_first_wait_wakes_the_worker(
    url: str, worker: SQLiteDriver
) -> None:
    assert _claim(worker) == 0  # a worker's first round finds nothing
    _enqueue_elsewhere(url)
    assert worker.wait_for_work(3.0) is True, "the first wait took the commit as seen"
    assert _claim(worker) == 1


def test_a_commit_between_two_claims_of_a_round_wakes_the_worker(
    url: str, worker: SQLiteDriver
) -> None:
    # a worker of two queues claims the unlimited ones, then the limited ones on their own
    worker.wait_for_work(0.001)
    assert _claim(worker, ("default",)) == 0
    _enqueue_elsewhere(url, "default")
    assert _claim(worker, ("limited",)) == 0  # looks at the other queue only
    assert worker.wait_for_work(3.0) is True, "the second claim took the commit as seen"
    assert _claim(worker, ("default", "limited")) == 1


def test_a_commit_the_last_claim_saw_does_not_wake_the_worker_again(
    url: str, worker: SQLiteDriver
) -> None:
    _enqueue_elsewhere(url)
    assert _claim(worker) == 1  # the claim saw the commit
    assert worker.wait_for_work(0.2) is False  # so it is not news: no spin on it
    _enqueue_elsewhere(url)
    assert worker.wait_for_work(3.0) is True


def test_a_claim_that_reads_no_queue_leaves_the_note_to_the_one_that_does(
    url: str, worker: SQLiteDriver
) -> None:
    with jobtrail.App(url) as app:
        app.set_limit("default", total=100, by="test", note="limited")  # its only queue
    worker.wait_for_work(0.001)
    with worker.transaction() as tx:  # the unlimited pass of a round: it reads no queue
        worker.task_claim(tx, Claim("w", ["default"], ["k"], 10, None, skip_limited=True))
    _enqueue_elsewhere(url)
    assert _claim(worker) == 1  # the round's claim of its limited queue saw the commit
    assert worker.wait_for_work(0.2) is False, "woken by a commit the round's claim had seen"
