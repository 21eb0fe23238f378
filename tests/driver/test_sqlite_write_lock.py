"""SQLite's write lock taken in short steps (``store/sqlite/locking.py``): a writer waiting
behind another connection retries ``BEGIN IMMEDIATE`` itself every millisecond or so instead
of backing off inside SQLite to 100 ms a try; reads keep the busy timeout."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable

import pytest

import jobtrail
from jobtrail.store.sqlite.driver import SQLiteDriver


def _hold_lock(url: str, seconds: float, held: threading.Event) -> threading.Thread:
    """Another connection holds the write lock for ``seconds`` from when ``held`` is set."""

    def hold() -> None:
        conn = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            held.set()
            time.sleep(seconds)
            conn.execute("COMMIT")
        finally:
            conn.close()

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def test_a_waiting_writer_tries_again_in_short_steps(
    url: str, make_driver: Callable[..., SQLiteDriver]
) -> None:
    driver = make_driver()
    conn = driver._connect()
    tries: list[str] = []
    conn.set_trace_callback(lambda sql: tries.append(sql))
    held = threading.Event()
    holder = _hold_lock(url, 0.3, held)
    held.wait(5)
    t0 = time.monotonic()
    with driver.transaction() as tx:
        waited = time.monotonic() - t0
        assert tx.conn.in_transaction
    holder.join()
    begins = [s for s in tries if s == "BEGIN IMMEDIATE"]
    # SQLite's own busy handler retries inside one statement (one BEGIN in the trace,
    # then sleeps of up to 100 ms); here each try is a statement of its own, about 1 ms
    # apart: ~300 in 0.3 s, and at least 10 even on a machine whose sleeps take 20 ms
    assert waited >= 0.25, waited
    assert len(begins) >= 10, (len(begins), waited)


def test_reads_keep_the_busy_timeout_and_writes_step(
    make_driver: Callable[..., SQLiteDriver],
) -> None:
    driver = make_driver(busy_timeout=7.0)
    conn = driver._connect()

    def timeout() -> int:
        return int(conn.execute("PRAGMA busy_timeout").fetchone()[0])

    with driver.transaction(write=False):
        assert timeout() == 7000
    with driver.transaction():
        assert timeout() == 0
    with driver.transaction():
        assert timeout() == 0
    with driver.transaction(write=False):
        assert timeout() == 7000


def test_a_writer_gives_up_after_the_busy_timeout_and_writes_nothing(url: str) -> None:
    with jobtrail.App(url, busy_timeout=0.2) as app:
        app.task("noop")(lambda ctx, payload: None)
        held = threading.Event()
        holder = _hold_lock(url, 1.0, held)
        held.wait(5)
        t0 = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            app.enqueue("noop", {})
        waited = time.monotonic() - t0
        holder.join()
        assert 0.2 <= waited < 0.9, waited
        assert app.list() == []


def test_threads_of_one_process_take_turns_and_only_one_polls(
    url: str, make_driver: Callable[..., SQLiteDriver]
) -> None:
    """Eight threads of one process wait behind another process's lock: one of them tries
    SQLite again and again, the others queue on the process's own lock (no GIL convoy of
    sleeping pollers), and each then begins at its first try."""
    driver = make_driver()
    tries: dict[int, list[str]] = {i: [] for i in range(8)}
    ready = threading.Barrier(9)

    def write(i: int) -> None:
        conn = driver._connect()
        conn.set_trace_callback(lambda sql: tries[i].append(sql))
        ready.wait(5)
        with driver.transaction():
            pass

    held = threading.Event()
    holder = _hold_lock(url, 0.3, held)
    held.wait(5)
    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    ready.wait(5)
    for t in threads:
        t.join(10)
    holder.join()
    begins = sorted(len([s for s in t if s == "BEGIN IMMEDIATE"]) for t in tries.values())
    assert begins[:7] == [1] * 7, begins
    assert begins[7] >= 10, begins


def test_the_process_lock_is_given_back_when_a_transaction_fails(
    make_driver: Callable[..., SQLiteDriver],
) -> None:
    driver = make_driver(busy_timeout=5.0)
    with pytest.raises(ZeroDivisionError), driver.transaction():
        1 / 0  # noqa: B018
    done: list[float] = []

    def other() -> None:
        t0 = time.monotonic()
        with driver.transaction():
            done.append(time.monotonic() - t0)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert done and done[0] < 1.0, done


def test_a_write_inside_a_write_on_one_thread_fails_at_once(
    make_driver: Callable[..., SQLiteDriver],
) -> None:
    driver = make_driver(busy_timeout=5.0)
    t0 = time.monotonic()
    with driver.transaction():
        with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
            with driver.transaction():
                pass  # pragma: no cover
    assert time.monotonic() - t0 < 1.0
    with driver.transaction():  # the lock was given back once
        pass
